"""What the Python tests of the suite (ui_test.py, monitoring_test.py) share:
a `unipool server` on a free loopback port with its tokens, and job specs."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NAME = ["test"]


def fail(message):
    print(f"{_NAME[0]}: FAILED: {message}")
    sys.exit(1)


def job_yaml(name, queue, gpus, extra=""):
    return (f"apiVersion: unipool/v1\nkind: Job\nmetadata:\n  name: {name}\nspec:\n"
            f"  command: [sleep, \"600\"]\n  gpus: {gpus}\n  queue: {queue}\n{extra}")


class Server:
    """A `unipool server` on a free loopback port, with its tokens."""

    def __init__(self, binary, work, test_name, extra_args=("--min-runtime", "0s")):
        _NAME[0] = test_name
        self.binary, self.work = binary, work
        self.tokens = {}
        tokens = os.path.join(work, "tokens.yaml")
        for name, role, queues in [("ops", "admin", []), ("alice", "tenant", ["team-a"]),
                                   ("bob", "tenant", ["team-b"]), ("grafana", "read-only", [])]:
            args = [binary, "token", "create", "--file", tokens, "--name", name, "--role", role]
            if queues:
                args += ["--queues"] + queues
            self.tokens[name] = subprocess.run(args, check=True, capture_output=True,
                                               text=True).stdout.strip()
        address = os.path.join(work, "address")
        self.log = open(os.path.join(work, "server.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "server", "--cluster", os.path.join(SOURCE, "examples/clusters/devbox.yaml"),
             "--tokens", tokens, "--data", os.path.join(work, "data"), "--init",
             "--assume-nodes-up", "--listen", "127.0.0.1:0",
             "--address-file", address, "--log-level", "warn", *extra_args],
            stdout=self.log, stderr=self.log)
        for _ in range(300):
            if os.path.exists(address) and open(address).read().strip():
                break
            time.sleep(0.1)
        else:
            fail("the server did not start: " + open(self.log.name).read())
        self.url = open(address).read().strip()

    def call(self, method, path, who="ops", body=None, content_type="application/json"):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=body.encode() if body is not None else None)
        req.add_header("Authorization", "Bearer " + self.tokens[who])
        if body is not None:
            req.add_header("Content-Type", content_type)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=20)
