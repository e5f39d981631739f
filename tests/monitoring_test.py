#!/usr/bin/python3
"""The shipped Grafana dashboards and Prometheus alert rules against a real
Prometheus scraping a running server (issue 15).

`promtool check rules` accepts deploy/prometheus/rules.yml and `promtool
check metrics` the server's /metrics; Prometheus (Debian's) scrapes the
server every second with a read-only token and loads the rules; after a
little activity (jobs submitted, run, finished, preempted, progress
reported, a node cordoned), every query of every panel of
deploy/grafana/*.json returns at least one series, and every rule's
expression evaluates without error.

Exit 0 when all hold, 1 on the first failure, 77 (skipped) without
Prometheus.
"""
import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from serverlib import SOURCE, Server, fail, job_yaml

PROMETHEUS, PROMTOOL = "/usr/bin/prometheus", "/usr/bin/promtool"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read() or b"{}") or {"status": "error", "error": str(e)}
    except (urllib.error.URLError, ConnectionError) as e:  # not listening yet
        return {"status": "error", "error": str(e)}


def dashboard_queries():
    """(file, panel title, expression) of every target, variables filled."""
    out = []
    for path in sorted(glob.glob(os.path.join(SOURCE, "deploy/grafana/*.json"))):
        d = json.load(open(path))
        ids = [p["id"] for p in d["panels"]]
        if len(ids) != len(set(ids)):
            fail(f"{path}: panel ids repeat")
        for p in d["panels"]:
            if p["datasource"]["uid"] != "${datasource}":
                fail(f"{path}: panel {p['title']} does not use the datasource variable")
            for t in p["targets"]:
                expr = (t["expr"].replace("$__rate_interval", "15s").replace("$queue", ".*")
                        .replace("$node", ".*"))
                out.append((os.path.basename(path), p["title"], expr))
    return out


def rule_expressions():
    """The expr of every rule in rules.yml (a YAML subset: `expr:` lines, and
    `expr: |` blocks)."""
    exprs, lines = [], open(os.path.join(SOURCE, "deploy/prometheus/rules.yml")).read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("expr:"):
            rest = line[len("expr:"):].strip()
            if rest == "|":
                block = []
                i += 1
                while i < len(lines) and lines[i].startswith(" " * 10):
                    block.append(lines[i].strip())
                    i += 1
                exprs.append(" ".join(block))
                continue
            exprs.append(rest)
        i += 1
    return exprs


def activity(server):
    """What makes every series of the dashboards exist."""
    server.call("PUT", "/v1/queues/team-a", body=json.dumps({"guarantee": 8}))
    server.call("PUT", "/v1/queues/team-b", body=json.dumps({"guarantee": 8, "limit": 16}))
    ids = {}
    for name, queue, gpus, extra in [("low", "team-a", 16, "  priorityClassName: low\n"),
                                     ("done", "team-b", 8, ""),
                                     ("high", "team-a", 16, "  priorityClassName: high\n")]:
        ids[name] = server.call("POST", "/v1/jobs", "ops", job_yaml(name, queue, gpus, extra),
                                "application/yaml")["id"]
        for _ in range(100):
            j = server.call("GET", f"/v1/jobs/{ids[name]}")
            if j["state"] in ("Running", "Pending") and (name != "low" or j["state"] == "Running"):
                break
            time.sleep(0.1)
    # The low job is preempted for the high one: it stops.
    for _ in range(100):
        low = server.call("GET", f"/v1/jobs/{ids['low']}")
        if low["state"] == "Preempting":
            break
        time.sleep(0.1)
    else:
        fail("no preemption: " + json.dumps(low))
    server.call("POST", f"/v1/jobs/{ids['low']}/report",
                body=json.dumps({"generation": low["generation"], "kind": "stopped"}))
    done = server.call("GET", f"/v1/jobs/{ids['done']}")
    server.call("POST", f"/v1/jobs/{ids['done']}/report",
                body=json.dumps({"generation": done["generation"], "kind": "succeeded"}))
    for _ in range(100):
        high = server.call("GET", f"/v1/jobs/{ids['high']}")
        if high["state"] == "Running":
            break
        time.sleep(0.1)
    data = {"step": 10, "loss": 2.5, "throughput": 1200.0, "gradNorm": 1.1}
    server.call("POST", f"/v1/jobs/{ids['high']}/report",
                body=json.dumps({"generation": high["generation"], "kind": "progress", "data": data}))
    server.call("DELETE", f"/v1/jobs/{ids['low']}")  # (it would run again on the free GPUs)
    idle = []
    for _ in range(100):
        idle = [n["name"] for n in server.call("GET", "/v1/nodes")["items"] if n["gpusAllocated"] == 0]
        if idle:
            break
        time.sleep(0.1)
    server.call("POST", f"/v1/nodes/{idle[0]}/cordon", body=json.dumps({"reason": "test"}))
    # A node's GPUs' readings, as its agent sends them with a heartbeat.
    server.call("POST", "/v1/nodes/dev-0/heartbeat", body=json.dumps({
        "health": "ok", "gpus": [[0, 87, 40000, 81559, 61, 455.5, 0], [1, 12, 1000, 81559, 40, 120, 0]],
        "xids": [[1, 13, 2]]}))
    try:  # an API error for the errors panel
        server.call("GET", "/v1/jobs/999999")
    except urllib.error.HTTPError:
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    for path in (PROMETHEUS, PROMTOOL):
        if not os.access(path, os.X_OK):
            print(f"monitoring_test: {path} is missing (Debian prometheus); skipped")
            raise SystemExit(77)
    rules = os.path.join(SOURCE, "deploy/prometheus/rules.yml")
    if subprocess.run([PROMTOOL, "check", "rules", rules]).returncode != 0:
        fail("promtool check rules")
    work = tempfile.mkdtemp(prefix="unipool-monitoring-")
    server = Server(args.binary, work, "monitoring_test")
    prom = None
    try:
        activity(server)
        req = urllib.request.Request(server.url + "/metrics")
        req.add_header("Authorization", "Bearer " + server.tokens["grafana"])
        metrics = urllib.request.urlopen(req, timeout=10).read()
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=metrics, capture_output=True)
        if check.returncode != 0:
            fail("promtool check metrics: " + check.stdout.decode() + check.stderr.decode())
        token = os.path.join(work, "grafana.token")
        open(token, "w").write(server.tokens["grafana"])
        host = server.url.split("://", 1)[1]
        config = os.path.join(work, "prometheus.yml")
        open(config, "w").write(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: [{rules}]\n"
            "scrape_configs:\n"
            "  - job_name: unipool\n"
            f"    authorization: {{credentials_file: {token}}}\n"
            f"    static_configs: [{{targets: ['{host}']}}]\n")
        port = free_port()
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={work}/tsdb",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "prometheus.log"), "w"))
        # Scraped for a while: rates need two samples in their window.
        deadline = time.time() + 60
        while time.time() < deadline:
            r = query(port, "count(up{job=\"unipool\"} == 1)")
            if r.get("status") == "success" and r["data"]["result"]:
                break
            time.sleep(0.5)
        else:
            fail("Prometheus never scraped the server: " + open(os.path.join(work, "prometheus.log")).read()[-2000:])
        time.sleep(6)
        missing = []
        queries = dashboard_queries()
        for name, title, expr in queries:
            for attempt in range(20):  # (a panel of rates may need one more scrape)
                r = query(port, expr)
                if r.get("status") == "success" and r["data"]["result"]:
                    break
                time.sleep(0.5)
            else:
                missing.append(f"{name} / {title}: {expr} -> {json.dumps(r)[:300]}")
        if missing:
            fail("dashboard queries without a series:\n  " + "\n  ".join(missing))
        exprs = rule_expressions()
        if len(exprs) != 10:
            fail(f"expected 10 rules in rules.yml, read {len(exprs)}")
        for expr in exprs:
            r = query(port, expr)
            if r.get("status") != "success":
                fail(f"rule expression {expr}: {r}")
        print(f"monitoring_test: ok; {len(queries)} dashboard queries, {len(exprs)} rules")
    finally:
        if prom:
            prom.terminate()
            prom.wait(timeout=20)
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
