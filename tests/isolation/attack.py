"""A tenant's job that tries to reach what is not its own.

Run by src/cli/isolation_e2e_test.cc as a job of a tenant. Each argument is
KIND:NAME:PATH, one attempt:
  read   - read a byte of the file
  list   - list the directory
  write  - create and write the file
  join   - POST PATH (a server URL) /v1/nodes/n0/join with every token it found
It also collects every token-like string it can read in /proc (command
lines and environments of every process) and in its own environment, and
writes everything to $UNIPOOL_CHECKPOINT_DIR/attack.json for the test to
check: each attempt "reached" or "refused: <why>".
"""
import json
import os
import re
import sys
import urllib.request

TOKEN = re.compile(rb"up_[0-9a-f]{64}")


def attempt(kind, path):
    if kind == "read":
        with open(path, "rb") as f:
            f.read(1)
    elif kind == "list":
        os.listdir(path)
    elif kind == "write":
        with open(path, "w") as f:
            f.write("planted by another tenant\n")
    else:
        raise ValueError(kind)


def readable_proc():
    """Everything this user can read of the other processes."""
    out = b""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as f:
                    out += f.read() + b"\n"
            except OSError:
                pass
    return out


def join(url, tokens):
    """Tries to join as node n0 with each token found; the HTTP statuses."""
    statuses = []
    for token in sorted(tokens) or ["none"]:
        req = urllib.request.Request(url + "/v1/nodes/n0/join", data=b"{}", method="POST",
                                     headers={"Authorization": "Bearer " + token,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                statuses.append(r.status)
        except urllib.error.HTTPError as e:
            statuses.append(e.code)
        except OSError:
            statuses.append(-1)
    return statuses


def main():
    proc = readable_proc()
    env = "\n".join(f"{k}={v}" for k, v in os.environ.items()).encode()
    tokens = {t.decode() for t in TOKEN.findall(proc + env)}
    results = {}
    for arg in sys.argv[1:]:
        kind, name, path = arg.split(":", 2)
        if kind == "join":
            results[name] = join(path, tokens)
            continue
        try:
            attempt(kind, path)
            results[name] = "reached"
        except OSError as e:
            results[name] = "refused: " + (e.strerror or type(e).__name__)
    report = {
        "results": results,
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "tokensFound": sorted(tokens),
    }
    with open(os.environ["UNIPOOL_CHECKPOINT_DIR"] + "/attack.json", "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
