#!/usr/bin/env python3
"""Chaos run: jobs survive random faults.

Starts a local cluster (one `unipool server`, one `unipool agent` per node
with virtual GPUs, each agent behind a TCP proxy of its own), keeps a mix of
jobs running (the stand-in trainer of examples/jobs/trainer.py on 1, 2 and
4 GPUs and, where PyTorch imports, the DDP example), and for --duration
seconds injects random faults:

  rank-kill9         kill -9 of a job's rank process (the job's own failure)
  rank-exit          a rank exits 3 at once (SIGUSR1; the job's own failure)
  agent-kill9        kill -9 of an agent; it comes back later, same name
  agent-stop         SIGSTOP of an agent past its lease, then SIGCONT
  agent-restart      SIGTERM of an agent, started again at once, same name
  agent-netcut       the agent's proxy drops every connection for a while
  server-kill9       kill -9 of the server; restarted on the same port and data
  server-disk-full   the server's file size limit (RLIMIT_FSIZE) set to 0: no
                     write to any file succeeds; lifted later

Then it heals everything (dead daemons restarted, proxies restored), stops
submitting, waits for every job to end and checks the final invariants.
Invariants, checked continuously, after every fault and at the end:

  acknowledged jobs never lost   every job whose submission got 201 is found
  never two live copies          a /proc monitor (10 Hz) of the processes of
                                 this run's jobs (UNIPOOL_CHECKPOINT_DIR under
                                 this run's checkpoint root), keyed by job and
                                 rank: never two generations alive at once
  GPUs allocated = placements    /v1/summary's gpus.allocated equals the GPUs
                                 in the tasks of Running and Preempting jobs
                                 (read at one store revision); no GPU index
                                 of a node is held twice
  right terminal state           Succeeded (Cancelled when a cancel was
                                 accepted); restarts never exceed the failures
                                 the harness injected into the job
  final step = target            a succeeded trainer's done.json has exactly
                                 its --steps
  no process outlives its job    none of a job's processes is alive a grace
                                 after it ended, nor any at the end
  daemons stay up and heal    the server and the agents die only by the
                                 harness's hand (an agent that cannot join a
                                 server that is down or read-only may exit)

Every decision (fault kinds, targets among the sorted candidates, delays,
the job mix, the outage grace) comes from random.Random streams seeded by
--seed, so a failing seed reproduces the same plan; timing is not
deterministic. The run prints a table of faults and checks and exits 1 on any
violation. Its files (logs, store, checkpoints) are in a fresh temporary
directory, kept with --keep or when a check failed. Every process it started
(server, agents, their watchdogs and the jobs) carries UNIPOOL_CHAOS_RUN in
its environment and is killed by pid at the end, also on Ctrl-C or SIGTERM.

    python3 tests/chaos.py --binary build/release/unipool --duration 120 --seed 1

The parts are in tests/chaoslib: cluster.py (the daemons, the proxies, the
API), checks.py (the /proc monitor and the ledger), workload.py (the jobs).
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from chaoslib.checks import Copy, CopyMonitor, Ledger
from chaoslib.cluster import (LEASE_S, Agent, Api, Interrupted, Proxy, Server, configure_log, log,
                              pids, read_proc, start_time, tail)
from chaoslib.workload import JOB_FAILURE_BUDGET, REPO, Job, Workload, find_torch_python

OUTAGE_GRACE_S = 30
FAULT_GAP_S = (3.5, 6.5)  # seconds between faults: ~330 in 30 minutes
LEFTOVER_GRACE_S = 20.0  # a finished job's processes are gone by then
DRAIN_TIMEOUT_S = 300.0
FAULT_WEIGHTS = {
    "rank-kill9": 2.0,
    "rank-exit": 2.0,
    "agent-kill9": 1.5,
    "agent-stop": 1.0,
    "agent-restart": 1.0,
    "agent-netcut": 1.0,
    "server-kill9": 1.0,
    "server-disk-full": 1.0,
}


# ---- the run -----------------------------------------------------------------


@dataclasses.dataclass(order=True)
class Repair:
    due: float
    seq: int
    what: str = dataclasses.field(compare=False)
    action: Callable[[], bool] = dataclasses.field(compare=False)  # False: try again soon


class Chaos:
    def __init__(self, opts: argparse.Namespace, run: Path):
        self.opts, self.run = opts, run
        self.rng = random.Random(f"{opts.seed}/faults")
        grace = opts.outage_grace
        if grace is None:
            grace = OUTAGE_GRACE_S if random.Random(f"{opts.seed}/config").random() < 0.5 else 0
        self.outage_grace = grace
        self.ledger = Ledger(list(FAULT_WEIGHTS))
        self.jobs: dict[int, Job] = {}  # acknowledged, by id
        self.unacknowledged: list[Job] = []  # no answer: maybe created
        self.pending_submit: Job | None = None  # refused (503, 429, down): retry
        self.repairs: list[Repair] = []
        self.repair_seq = 0
        self.server_fault = ""  # the server fault in progress, if any
        self.last_poll = self.last_gpu_check = self.last_flaky_check = 0.0
        self.uncordoned = 0  # flaky nodes returned to service
        self.binary = str(run / "unipool")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("UNIPOOL_", "RANK"))}
        self.env["UNIPOOL_CHAOS_RUN"] = str(run)
        self.torch_python = find_torch_python() if not opts.no_ddp else None
        self.workload = Workload(opts.seed, self.torch_python)
        self.monitor = CopyMonitor(run / "checkpoints")
        self.api: Api | None = None
        self.server: Server | None = None
        self.agents: dict[str, Agent] = {}
        self.proxies: list[Proxy] = []
        self.join_token = ""

    # -- setup -----------------------------------------------------------------

    def setup(self) -> None:
        shutil.copy2(self.opts.binary, self.binary)  # a rebuild meanwhile changes nothing
        tokens = self.run / "tokens.yaml"
        admin = self.token(tokens, "admin", "admin")
        self.join_token = self.token(tokens, "agents", "join")
        cluster = self.write_cluster()
        (self.run / "agents").mkdir()
        (self.run / "checkpoints").mkdir()
        extra = ["--outage-grace", f"{self.outage_grace}s"] if self.outage_grace else []
        self.server = Server(self.binary, self.run, cluster, tokens, extra, self.env)
        self.api = Api(admin)
        if not self.server.start():
            raise RuntimeError("the server did not start:\n" + tail(self.run / "server.log"))
        self.api.port = self.server.port
        r = self.api.call("PUT", "/v1/queues/default", {"graceSeconds": 5})
        if not r.ok:
            raise RuntimeError(f"PUT /v1/queues/default: {r.status} {r.body}")
        for i in range(self.opts.nodes):
            proxy = Proxy(lambda: self.server.port)
            self.proxies.append(proxy)
            agent = Agent(f"n{i}", self.binary, self.run, proxy, extra, self.env)
            self.agents[agent.name] = agent
            agent.start(self.join_token)
        if not self.wait_nodes_up(60):
            raise RuntimeError("the agents did not join")
        self.monitor.start()

    def token(self, tokens: Path, name: str, role: str) -> str:
        out = subprocess.run([self.binary, "token", "create", "--file", str(tokens), "--name",
                              name, "--role", role], capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def write_cluster(self) -> Path:
        path = self.run / "cluster.yaml"
        nodes = "\n".join(f"    - {{name: n{i}, gpus: 2, gpuModel: H100-SXM}}"
                          for i in range(self.opts.nodes))
        path.write_text(f"""# The chaos run's cluster: {self.opts.nodes} nodes of two virtual GPUs.
apiVersion: unipool/v1
kind: Cluster
metadata:
  name: chaos
spec:
  tiers:
    - {{name: node, bandwidthGbps: 3600, latencyUs: 1}}
    - {{name: host, bandwidthGbps: 100, latencyUs: 5}}
  nodes:
{nodes}
""")
        return path

    def wait_nodes_up(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            r = self.api.get("/v1/summary")
            if r.ok and r.body["nodes"]["up"] == self.opts.nodes:
                return True
            self.supervise()
            self.uncordon_flaky()
            time.sleep(0.2)
        return False

    # -- the main loop -----------------------------------------------------------

    def chaos(self) -> None:
        end = time.monotonic() + self.opts.duration
        next_fault = time.monotonic() + self.rng.uniform(*FAULT_GAP_S)
        log(f"injecting faults for {self.opts.duration:g} s")
        while time.monotonic() < end:
            self.tick(submit=True)
            if time.monotonic() >= next_fault:
                self.inject()
                self.check_now()
                next_fault = time.monotonic() + self.rng.uniform(*FAULT_GAP_S)
            time.sleep(0.2)

    def tick(self, submit: bool) -> None:
        self.run_repairs(time.monotonic())
        self.supervise()
        if submit:
            self.top_up()
        self.cancel_due()
        now = time.monotonic()
        if now - self.last_poll >= 1.0:
            self.last_poll = now
            self.poll_jobs()
            self.check_daemons()
        if now - self.last_gpu_check >= 2.0:
            self.check_gpus()
        if now - self.last_flaky_check >= 3.0:
            self.uncordon_flaky()
        self.check_leftovers(final=False)

    def check_now(self) -> None:
        """The checks after a fault: the monitor runs all the time."""
        self.check_daemons()
        self.poll_jobs()
        self.check_gpus()
        self.check_leftovers(final=False)

    # -- repairs -----------------------------------------------------------------

    def schedule(self, delay: float, what: str, action: Callable[[], bool]) -> None:
        self.repair_seq += 1
        self.repairs.append(Repair(time.monotonic() + delay, self.repair_seq, what, action))
        self.repairs.sort()

    def run_repairs(self, until: float) -> None:
        due = [r for r in self.repairs if r.due <= until]
        for r in due:
            self.repairs.remove(r)
            if r.action():
                log(f"  repaired: {r.what}", verbose_only=True)
            else:
                self.schedule(0.5, r.what, r.action)

    def supervise(self) -> None:
        """Daemons that died without the harness: a violation, unless an agent
        could not join a server that was down or read-only. Restarts them."""
        if self.server.proc and not self.server.up and not self.server.killed:
            code = self.server.proc.returncode
            self.server.killed = True
            self.ledger.check("daemons stay up and heal", False,
                              f"the server exited ({code}):\n{tail(self.run / 'server.log')}")
            self.server_fault = "crashed"
            self.schedule(0, "server restart after a crash", self.restart_server)
        for agent in self.agents.values():
            if agent.proc is None or agent.running or agent.down:
                continue
            code = agent.proc.returncode
            text = tail(agent.log_path, 600)
            join_failed = (time.monotonic() - agent.started_at < 20 and code in (2, 5)
                           and ("cannot reach the server" in text or "read-only" in text))
            if not join_failed:
                self.ledger.check("daemons stay up and heal", False,
                                  f"agent {agent.name} exited ({code}):\n{tail(agent.log_path)}")
            else:
                log(f"  agent {agent.name} could not join (exit {code}); again", verbose_only=True)
            agent.down = True
            self.schedule(1.0, f"agent {agent.name} start", lambda a=agent: self.start_agent(a))

    def check_daemons(self) -> None:
        """Counts a check when every daemon is up or down by the harness's
        hand (supervise() records the violations)."""
        before = self.ledger.checks["daemons stay up and heal"][1]
        self.supervise()
        if self.ledger.checks["daemons stay up and heal"][1] == before:
            self.ledger.check("daemons stay up and heal", True)

    def uncordon_flaky(self) -> None:
        """The operator's part: the scheduler cordons a node that failed 3
        times in a day as flaky; here every node fails that often."""
        self.last_flaky_check = time.monotonic()
        r = self.api.get("/v1/nodes?state=flaky")
        for node in r.body["items"] if r.ok else []:
            if self.api.call("POST", f"/v1/nodes/{node['name']}/uncordon").ok:
                self.uncordoned += 1
                log(f"  uncordoned flaky node {node['name']}", verbose_only=True)

    def start_agent(self, agent: Agent) -> bool:
        if not self.server.up or self.server.disk_full:
            return False
        agent.start(self.join_token)
        return True

    def restart_server(self) -> bool:
        if not self.server.start():
            code = self.server.proc.poll() if self.server.proc else None
            self.ledger.check("daemons stay up and heal", False,
                              f"the server did not restart ({code}):\n"
                              f"{tail(self.run / 'server.log')}")
            self.server.kill9()
            return False
        self.api.port = self.server.port
        self.server_fault = ""
        return True

    # -- faults ------------------------------------------------------------------

    def inject(self) -> None:
        candidates = {kind: self.targets(kind) for kind in self.opts.faults}
        kinds = [k for k in self.opts.faults if candidates[k]]
        if not kinds:
            log("no fault possible now")
            return
        kind = self.rng.choices(kinds, [FAULT_WEIGHTS[k] for k in kinds])[0]
        target = self.rng.choice(candidates[kind])
        getattr(self, "fault_" + kind.replace("-", "_"))(target)
        self.ledger.faults[kind] += 1

    def targets(self, kind: str) -> list:
        if kind.startswith("rank-"):
            return self.rank_targets()
        if kind.startswith("agent-"):
            impaired = sum(not a.healthy for a in self.agents.values())
            if impaired >= max(1, self.opts.nodes // 3):
                return []
            return [a for _, a in sorted(self.agents.items()) if a.healthy]
        return [self.server] if self.server.up and not self.server_fault else []

    def rank_targets(self) -> list[Copy]:
        with self.monitor.lock:
            copies = list(self.monitor.latest.values())
        out = []
        for c in copies:
            job = self.jobs.get(c.job)
            if (job and job.state == "Running" and c.generation == job.generation
                    and job.failures_injected < JOB_FAILURE_BUDGET):
                out.append(c)
        return sorted(out, key=lambda c: (c.job, c.rank, c.generation, c.pid))

    def hit_rank(self, c: Copy, sig: int, what: str) -> None:
        if start_time(c.pid) != c.started:
            log(f"fault {what}: job {c.job} rank {c.rank} already gone")
            return
        os.kill(c.pid, sig)
        self.jobs[c.job].failures_injected += 1
        log(f"fault {what}: job {c.job} rank {c.rank} generation {c.generation} (pid {c.pid})")

    def fault_rank_kill9(self, c: Copy) -> None:
        self.hit_rank(c, signal.SIGKILL, "rank-kill9")

    def fault_rank_exit(self, c: Copy) -> None:
        self.hit_rank(c, signal.SIGUSR1, "rank-exit")

    def fault_agent_kill9(self, agent: Agent) -> None:
        down = self.rng.uniform(0.5, 8)
        agent.kill9()
        agent.down = True
        log(f"fault agent-kill9: {agent.name}, back in {down:.1f} s")
        self.schedule(down, f"agent {agent.name} start", lambda: self.start_agent(agent))

    def fault_agent_stop(self, agent: Agent) -> None:
        frozen = LEASE_S + self.rng.uniform(0.5, 3)
        agent.signal(signal.SIGSTOP)
        agent.stopped = True
        log(f"fault agent-stop: {agent.name} for {frozen:.1f} s")

        def resume() -> bool:
            agent.signal(signal.SIGCONT)
            agent.stopped = False
            return True
        self.schedule(frozen, f"agent {agent.name} SIGCONT", resume)

    def fault_agent_restart(self, agent: Agent) -> None:
        log(f"fault agent-restart: {agent.name}")
        agent.down = True
        agent.terminate()
        if not self.start_agent(agent):
            self.schedule(0.5, f"agent {agent.name} start", lambda: self.start_agent(agent))

    def fault_agent_netcut(self, agent: Agent) -> None:
        cut = self.rng.uniform(1, 8)
        agent.proxy.cut(True)
        log(f"fault agent-netcut: {agent.name} for {cut:.1f} s")

        def restore() -> bool:
            agent.proxy.cut(False)
            return True
        self.schedule(cut, f"agent {agent.name} network", restore)

    def fault_server_kill9(self, server: Server) -> None:
        down = self.rng.uniform(0.5, 6)
        server.kill9()
        self.server_fault = "killed"
        log(f"fault server-kill9: back in {down:.1f} s")
        self.schedule(down, "server restart", self.restart_server)

    def fault_server_disk_full(self, server: Server) -> None:
        full = self.rng.uniform(1, 6)
        server.fill_disk(True)
        self.server_fault = "disk full"
        log(f"fault server-disk-full: for {full:.1f} s")

        def free() -> bool:
            server.fill_disk(False)
            self.server_fault = ""
            return True
        self.schedule(full, "server disk", free)

    def heal(self) -> None:
        """Runs every pending repair now and checks the cluster is whole."""
        log("healing: every daemon back, every network restored")
        deadline = time.monotonic() + 120
        while self.repairs and time.monotonic() < deadline:
            self.run_repairs(float("inf"))
            if self.repairs:
                time.sleep(0.5)
            self.supervise()
        for agent in self.agents.values():
            agent.proxy.cut(False)
        self.uncordon_flaky()
        if not self.wait_nodes_up(60):
            self.ledger.check("daemons stay up and heal", False,
                              "the cluster did not heal: " + str(self.api.get("/v1/nodes").body))

    # -- jobs ------------------------------------------------------------------

    def active_jobs(self) -> list[Job]:
        return [j for j in self.jobs.values() if not j.ended]

    def top_up(self) -> None:
        target = self.opts.nodes + 2  # about 1.5x the GPUs: a queue forms
        for _ in range(3):
            if len(self.active_jobs()) + len(self.unacknowledged_live()) >= target:
                return
            if not self.submit_next():
                return

    def unacknowledged_live(self) -> list[Job]:
        return [j for j in self.unacknowledged if time.monotonic() - j.submitted_at < 60]

    def submit_next(self) -> bool:
        if self.pending_submit is None:
            ddp = any(j.kind == "ddp" for j in self.active_jobs())
            self.pending_submit = self.workload.next(ddp)
        job = self.pending_submit
        job.submitted_at = time.monotonic()
        r = self.api.call("POST", "/v1/jobs", job.spec(sys.executable, self.torch_python))
        if r.status == 201:
            job.id, job.acknowledged = r.body["id"], True
            self.jobs[job.id] = job
            self.pending_submit = None
            log(f"submitted job {job.id} {job.name}: {job.gpus} GPUs, {job.steps} steps"
                + (f", cancel after {job.cancel_after:.1f} s" if job.cancel_after else ""),
                verbose_only=True)
            return True
        if r.status in (429, 503) or r.refused:
            return False  # nothing was created: the same job again later
        if r.status == 0:
            log(f"submission of {job.name}: no answer; it may exist", verbose_only=True)
            self.unacknowledged.append(job)
            self.pending_submit = None
            return False
        raise RuntimeError(f"submission refused: {r.status} {r.body}")

    def cancel_due(self) -> None:
        now = time.monotonic()
        for job in self.active_jobs():
            if job.cancel_after is None or now - job.submitted_at < job.cancel_after:
                continue
            r = self.api.call("POST", f"/v1/jobs/{job.id}/cancel")
            if r.ok:
                job.expected = ("Cancelled",)
            elif r.status == 409:
                pass  # it ended first
            elif r.status == 0 and not r.refused:
                job.expected = ("Cancelled", "Succeeded")  # maybe cancelled
            else:
                continue  # not now (down, read-only): again later
            log(f"cancel job {job.id}: {r.status}", verbose_only=True)
            job.cancel_after = None

    def poll_jobs(self) -> None:
        for job in self.active_jobs():
            r = self.api.get(f"/v1/jobs/{job.id}")
            if r.status == 0 or r.status >= 500:
                return  # the server is away
            if not self.ledger.check("acknowledged jobs never lost", r.status == 200,
                                     f"job {job.id} ({job.name}): {r.status} {r.body}"):
                job.state = "Lost"
                job.ended_at = time.monotonic()
                continue
            self.observe(job, r.body)

    def observe(self, job: Job, record: dict) -> None:
        job.record = record
        job.state = record["state"]
        job.generation = record["generation"]
        if job.ended and job.ended_at is None:
            job.ended_at = time.monotonic()
            self.check_outcome(job)

    def check_outcome(self, job: Job) -> None:
        r = job.record
        log(f"job {job.id} {job.name}: {job.state} (generation {r['generation']}, restarts "
            f"{r['restarts']}, disruptions {r['disruptions']}, injected failures "
            f"{job.failures_injected})", verbose_only=True)
        right = job.state in job.expected and r["restarts"] <= job.failures_injected
        if not self.ledger.check("right terminal state", right,
                                 f"job {job.id} ({job.name}) ended {job.state}, expected "
                                 f"{'/'.join(job.expected)}; restarts {r['restarts']}, injected "
                                 f"failures {job.failures_injected}: {r.get('message')}"):
            self.dump_job(job)
        if job.state == "Succeeded":
            done = self.run / "checkpoints" / f"job-{job.id}" / "done.json"
            try:
                step = json.loads(done.read_text())["step"]
            except (OSError, ValueError, KeyError) as e:
                step = f"unreadable ({e})"
            self.ledger.check("final step = target", step == job.steps,
                              f"job {job.id} ({job.name}): done.json step {step}, target "
                              f"{job.steps}")

    def dump_job(self, job: Job) -> None:
        events = self.api.get(f"/v1/jobs/{job.id}/events")
        log(f"job {job.id} record: {json.dumps(job.record)}")
        log(f"job {job.id} events: {json.dumps(events.body)}")

    def check_leftovers(self, final: bool) -> None:
        now = time.monotonic()
        for job in self.jobs.values():
            if job.ended_at is None or job.leftovers_checked:
                continue
            if not final and now - job.ended_at < LEFTOVER_GRACE_S:
                continue
            job.leftovers_checked = True
            alive = [c for c in self.monitor.scan().values() if c.job == job.id]
            self.ledger.check("no process outlives its job", not alive,
                              f"job {job.id} ({job.name}) {job.state} "
                              f"{now - job.ended_at:.0f} s ago: live {alive}")

    # -- GPUs --------------------------------------------------------------------

    def check_gpus(self) -> None:
        """gpus.allocated of the summary against the tasks of Running and
        Preempting jobs, from reads at one store revision (a few tries); and
        no GPU of a node in two tasks."""
        self.last_gpu_check = time.monotonic()
        if not self.server.up:
            return
        for _ in range(10):
            reads = [self.api.get("/v1/summary"), self.api.get("/v1/jobs?state=Running&limit=1000"),
                     self.api.get("/v1/jobs?state=Preempting&limit=1000"),
                     self.api.get("/v1/summary")]
            if not all(r.status == 200 for r in reads):
                return
            if len({r.body["revision"] for r in reads}) > 1:
                continue
            jobs = reads[1].body["items"] + reads[2].body["items"]
            held: dict[tuple[str, int], int] = {}
            double = []
            for j in jobs:
                for t in j["tasks"]:
                    for g in t["gpus"]:
                        if (t["node"], g) in held:
                            double.append(f"{t['node']} GPU {g}: jobs {held[(t['node'], g)]} "
                                          f"and {j['id']}")
                        held[(t["node"], g)] = j["id"]
            allocated = reads[0].body["gpus"]["allocated"]
            self.ledger.check("GPUs allocated = placements", allocated == len(held) and not double,
                              f"revision {reads[0].body['revision']}: allocated {allocated}, "
                              f"placed {len(held)}; {double}")
            return

    # -- the end -----------------------------------------------------------------

    def drain(self) -> None:
        """No more faults nor submissions: every job must end."""
        log("draining: waiting for every job to end")
        self.adopt_unacknowledged()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.active_jobs() and time.monotonic() < deadline:
            self.tick(submit=False)
            time.sleep(0.2)
        self.poll_jobs()
        for job in self.active_jobs():
            r = self.api.get(f"/v1/jobs/{job.id}")
            self.ledger.check("right terminal state", False,
                              f"job {job.id} ({job.name}) still {job.state} "
                              f"{DRAIN_TIMEOUT_S:g} s after the faults stopped: "
                              f"{r.body.get('explain') if isinstance(r.body, dict) else r.body}")
            self.dump_job(job)

    def all_jobs(self) -> list[dict]:
        out, cont = [], ""
        while True:
            r = self.api.get("/v1/jobs?limit=1000" + (f"&continue={cont}" if cont else ""))
            if r.status != 200:
                raise RuntimeError(f"GET /v1/jobs: {r.status} {r.body}")
            out += r.body["items"]
            cont = r.body.get("continue", "")
            if not cont:
                return out

    def adopt_unacknowledged(self) -> None:
        """Jobs created by submissions whose answer was lost: tracked too."""
        names = {j.name: j for j in self.unacknowledged}
        for record in self.all_jobs():
            job = names.get(record["name"])
            if job and record["id"] not in self.jobs:
                job.id = record["id"]
                self.jobs[job.id] = job
                self.observe(job, record)
                log(f"job {job.id} {job.name}: created by an unanswered submission",
                    verbose_only=True)

    def final_checks(self) -> None:
        listed = {r["id"]: r for r in self.all_jobs()}
        for job in self.jobs.values():
            if job.acknowledged:
                found = listed.get(job.id)
                self.ledger.check("acknowledged jobs never lost",
                                  found is not None and found["name"] == job.name,
                                  f"job {job.id} ({job.name}) is not listed")
        for job in self.jobs.values():
            if job.ended_at is not None and not job.leftovers_checked:
                time.sleep(max(0.0, LEFTOVER_GRACE_S - (time.monotonic() - job.ended_at)))
        self.check_leftovers(final=True)
        alive = self.monitor.scan()
        self.ledger.check("no process outlives its job", not alive,
                          f"job processes alive after every job ended: {list(alive.values())}")
        self.check_gpus()
        summary = self.api.get("/v1/summary").body
        self.ledger.check("GPUs allocated = placements", summary["gpus"]["allocated"] == 0,
                          f"GPUs allocated with no job running: {summary}")

    def stop_everything(self) -> None:
        """Kills every process of the run by pid: the agents (the watchdogs
        then kill the jobs and exit), the server, then anything left with
        this run's marker in its environment."""
        if self.monitor.is_alive():
            self.monitor.stop()
        for agent in self.agents.values():
            agent.kill9()
        if self.server and self.server.proc:
            self.server.kill9()
        for proxy in self.proxies:
            proxy.close()
        marker = f"UNIPOOL_CHAOS_RUN={self.run}".encode()
        deadline = time.monotonic() + 5
        while True:
            mine = [p for p in pids() if p != os.getpid() and marker in read_proc(p, "environ")
                    and start_time(p) is not None]
            if not mine or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for pid in mine:
            log(f"killing leftover process {pid}: {read_proc(pid, 'cmdline')[:100]!r}")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def report(self) -> None:
        self.ledger.set_count("never two live copies", self.monitor.samples,
                              self.monitor.overlaps)
        states = collections.Counter(j.state for j in self.jobs.values())
        gens = [len(self.monitor.generations[j]) for j in self.jobs]
        print()
        print(f"unipool chaos: seed {self.opts.seed}, {self.opts.duration:g} s of faults, "
              f"{self.opts.nodes} nodes x 2 GPUs, outage grace {self.outage_grace} s, "
              f"DDP {'on' if self.torch_python else 'off'}")
        print(f"jobs: {len(self.jobs)} tracked ({sum(j.acknowledged for j in self.jobs.values())}"
              f" acknowledged, {len(self.unacknowledged)} unanswered submissions); "
              + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
              + f"; {sum(gens)} runs seen by the monitor; {self.uncordoned} flaky nodes "
              "uncordoned")
        print()
        print(self.ledger.table())
        if self.ledger.violations:
            print("\nviolations (first 20):")
            for v in self.ledger.violations[:20]:
                print("  " + v)
        print(f"\nreproduce: python3 tests/chaos.py --duration {self.opts.duration:g} "
              f"--seed {self.opts.seed} --nodes {self.opts.nodes}"
              + (f" --outage-grace {self.opts.outage_grace}" if self.opts.outage_grace is not None
                 else "") + (" --no-ddp" if self.opts.no_ddp else "")
              + (f" --faults {','.join(self.opts.faults)}"
                 if self.opts.faults != list(FAULT_WEIGHTS) else ""))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default=str(REPO / "build/release/unipool"),
                   help="the unipool binary (copied into the run directory)")
    p.add_argument("--duration", type=float, default=120, help="seconds of faults")
    p.add_argument("--seed", type=int, default=1, help="seeds every decision")
    p.add_argument("--nodes", type=int, default=6, help="nodes of two virtual GPUs")
    p.add_argument("--outage-grace", type=int, default=None,
                   help=f"seconds of --outage-grace (0: off); default: {OUTAGE_GRACE_S} or 0, "
                        "drawn from the seed")
    p.add_argument("--no-ddp", action="store_true", help="trainers only, even with PyTorch")
    p.add_argument("--faults", default=",".join(FAULT_WEIGHTS),
                   help="the fault kinds to draw from, comma-separated (default: all)")
    p.add_argument("--keep", action="store_true", help="keep the run directory")
    p.add_argument("--verbose", action="store_true", help="log every job and repair")
    opts = p.parse_args(argv)
    if opts.nodes < 3:
        p.error("--nodes: at least 3")
    opts.faults = opts.faults.split(",")
    if unknown := set(opts.faults) - set(FAULT_WEIGHTS):
        p.error(f"--faults: unknown {sorted(unknown)}; known: {', '.join(FAULT_WEIGHTS)}")
    return opts


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    run = Path(tempfile.mkdtemp(prefix="unipool-chaos-"))
    configure_log(opts.verbose, open(run / "chaos.log", "w"))

    def interrupt(signum, frame):
        raise Interrupted(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    chaos = Chaos(opts, run)
    log(f"run directory {run}; seed {opts.seed}; outage grace {chaos.outage_grace} s; "
        f"DDP with {chaos.torch_python or 'no PyTorch'}")
    crashed = ""
    try:
        chaos.setup()
        chaos.chaos()
        chaos.heal()
        chaos.drain()
        chaos.final_checks()
    except Interrupted as e:
        crashed = f"interrupted by {e}"
    except Exception as e:  # the harness's own failure: reported, cleaned up
        import traceback
        crashed = "harness error: " + "".join(traceback.format_exception(e))
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        chaos.stop_everything()
    chaos.report()
    failed = chaos.ledger.failed or bool(crashed)
    if crashed:
        print("\n" + crashed)
    if opts.keep or failed:
        print(f"run directory kept: {run}")
    else:
        shutil.rmtree(run, ignore_errors=True)
    print("FAILED" if failed else "PASSED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
