#!/usr/bin/env python3
"""A stand-in trainer without PyTorch: the launch contract, checkpoints and
progress reports of a real one, in a fraction of a second per step.

Each rank counts steps; rank 0 writes a checkpoint (step and a running
"loss") every --checkpoint-every steps and on SIGTERM, then resumes from the
newest one after a restart. Progress goes to $UNIPOOL_REPORT_FILE as JSON
lines, each rank's with its step, data-loading and communication time (the
platform's straggler watch). At the end rank 0 writes done.json with the
final step.

Elastic continue (spec.elastic.onResize: continue, $UNIPOOL_ELASTIC): each
rank reads $UNIPOOL_RENDEZVOUS_FILE at every step; when its version goes up
(a node left or joined) the ranks of the new membership meet through files
in the checkpoint directory, take the step of the furthest survivor (a
joining rank has none: it receives it, as DDP's ranks receive the model
from a peer) and go on at the new size without a restart.

Troubles to reproduce, for tests and for `unipool diagnose`:
  --slow-node N     local rank 0 on node N is --slow-factor times slower
                    (--slow-data: its extra time is spent loading data)
  --nan-at-step S   the loss is NaN from step S on
  --oom-at-step S   allocate host memory until it runs out at step S
  --leak-mb-per-step M  keep M MiB more host memory each step (a loop that
                    holds on to its outputs) until --memory-limit-mb runs out
"""
import argparse
import json
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--checkpoint-every", type=int, default=10)
parser.add_argument("--step-time", type=float, default=0.05)
parser.add_argument("--fail-at-step", type=int, default=-1, help="exit 1 at this step (tests)")
parser.add_argument("--slow-node", default="", help="local rank 0 on this node is slow")
parser.add_argument("--slow-factor", type=float, default=3.0)
parser.add_argument("--slow-data", action="store_true", help="the slow rank waits on data")
parser.add_argument("--nan-at-step", type=int, default=-1)
parser.add_argument("--oom-at-step", type=int, default=-1)
parser.add_argument("--leak-mb-per-step", type=int, default=0)
parser.add_argument("--memory-limit-mb", type=int, default=256,
                    help="the address-space limit --oom-at-step and --leak-mb-per-step run into")
args = parser.parse_args()

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
ckpt_dir = os.environ.get("UNIPOOL_CHECKPOINT_DIR", "checkpoints")
report_path = os.environ.get("UNIPOOL_REPORT_FILE")
os.makedirs(ckpt_dir, exist_ok=True)

# Every rank records its pid, so tests can check that no old copy survives.
with open(os.path.join(ckpt_dir, f"pid-rank{rank}-run{os.environ.get('UNIPOOL_RESTART_COUNT', '0')}"), "w") as f:
    f.write(str(os.getpid()))

stop = False


def on_sigterm(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_sigterm)


def report(obj):
    if report_path:
        with open(report_path, "a") as f:
            f.write(json.dumps(obj) + "\n")


def latest():
    steps = [int(n[5:-5]) for n in os.listdir(ckpt_dir) if n.startswith("ckpt-") and n.endswith(".json")]
    return max(steps) if steps else 0


# The platform's advice (Daly's interval for the measured write), if any:
# a checkpoint at least that often, besides every --checkpoint-every steps.
every_s = float(os.environ.get("UNIPOOL_CHECKPOINT_INTERVAL") or 0)
last_save = time.monotonic()


def save(step):
    global last_save
    last_save = time.monotonic()
    if rank != 0:
        return
    began = time.monotonic()
    tmp = os.path.join(ckpt_dir, f".ckpt-{step}.tmp")
    with open(tmp, "w") as f:
        json.dump({"step": step, "world": world}, f)
    os.replace(tmp, os.path.join(ckpt_dir, f"ckpt-{step}.json"))
    # How long the save held training up; the agent measures its size.
    report({"checkpoint": {"step": step, "path": ckpt_dir,
                           "seconds": round(time.monotonic() - began, 6)}})


step = latest()
print(f"rank {rank}/{world} on {os.environ.get('UNIPOOL_NODE')} starts at step {step} "
      f"(restart {os.environ.get('UNIPOOL_RESTART_COUNT')}, master "
      f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
      f"{f', checkpoint interval {every_s:.0f} s' if every_s > 0 else ''})", flush=True)
slow = (args.slow_node and os.environ.get("UNIPOOL_NODE") == args.slow_node
        and os.environ.get("LOCAL_RANK", "0") == "0")


def limit_memory():
    import resource
    limit = args.memory_limit_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def oom():
    limit_memory()
    hoard = []
    while True:  # MemoryError, as a data loader that keeps too much would
        hoard.append(bytearray(16 << 20))


elastic = os.environ.get("UNIPOOL_ELASTIC") == "continue"
rdzv_path = os.environ.get("UNIPOOL_RENDEZVOUS_FILE")
restart = os.environ.get("UNIPOOL_RESTART_COUNT", "0")


def read_rendezvous():
    while True:  # rewritten in place: a half-written file is read again
        try:
            with open(rdzv_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            time.sleep(0.02)


def meet(rdzv, my_step):
    """The members of rendezvous `rdzv` meet: each says its step (-1: it has
    no state, it just joined) and all take the furthest one."""
    v, r, n = rdzv["version"], rdzv["rank"], rdzv["worldSize"]
    name = lambda k: os.path.join(ckpt_dir, f"member-r{restart}-v{v}-{k}.json")
    tmp = name(r) + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"step": my_step}, f)
    os.replace(tmp, name(r))
    steps = []
    deadline = time.monotonic() + 120
    while len(steps) < n:
        try:
            steps = [json.load(open(name(k)))["step"] for k in range(n)]
        except (OSError, ValueError):
            steps = []
            if time.monotonic() > deadline:
                sys.exit(f"rank {r}: the members of version {v} did not all come")
            time.sleep(0.02)
    return max(steps)


version = 0
if elastic:
    rdzv = read_rendezvous()
    version = rdzv["version"]
    if version > 0:  # joining a running job: the survivors have the state
        rank, world = rdzv["rank"], rdzv["worldSize"]
        step = meet(rdzv, -1)
        print(f"rank {rank}/{world}: joined at membership {version}, step {step} "
              f"(from a peer, not a checkpoint)", flush=True)

kept = []  # --leak-mb-per-step
if args.leak_mb_per_step > 0:
    limit_memory()
while step < args.steps:
    if elastic:
        rdzv = read_rendezvous()
        if rdzv["version"] > version:
            version, rank, world = rdzv["version"], rdzv["rank"], rdzv["worldSize"]
            step = meet(rdzv, step)
            print(f"rank {rank}/{world}: membership {version}: continuing at step {step} "
                  f"(no restart)", flush=True)
            if step >= args.steps:
                break
    if stop:
        save(step)
        print(f"rank {rank}: SIGTERM at step {step}; checkpoint written, exiting", flush=True)
        sys.exit(0)
    began = time.monotonic()
    data_s = 0.0
    if slow:
        extra = args.step_time * (args.slow_factor - 1)
        time.sleep(extra)
        if args.slow_data:
            data_s = extra
    time.sleep(args.step_time)
    step += 1
    if step == args.oom_at_step:
        oom()
    if args.leak_mb_per_step > 0:  # written, so resident
        kept.append(b"\x01" * (args.leak_mb_per_step << 20))
    if step == args.fail_at_step and os.environ.get("UNIPOOL_RESTART_COUNT") == "0":
        print(f"rank {rank}: failing at step {step} as asked", flush=True)
        sys.exit(1)
    loss = float("nan") if 0 <= args.nan_at_step <= step else round(10.0 / (1 + step), 4)
    if loss != loss and step == args.nan_at_step:
        print(f"rank {rank}: loss is nan at step {step}", flush=True)
    report({"step": step, "loss": loss, "throughput": round(1 / args.step_time, 1),
            "stepSeconds": round(time.monotonic() - began, 6), "dataSeconds": round(data_s, 6),
            "commSeconds": 0.0})
    if step % args.checkpoint_every == 0 or (
            every_s > 0 and time.monotonic() - last_save >= every_s):
        save(step)
save(step)
if rank == 0:
    with open(os.path.join(ckpt_dir, "done.json"), "w") as f:
        json.dump({"step": step}, f)
print(f"rank {rank}: done at step {step}", flush=True)
