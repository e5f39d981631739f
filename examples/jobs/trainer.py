#!/usr/bin/env python3
"""A stand-in trainer without PyTorch: the launch contract, checkpoints and
progress reports of a real one, in a fraction of a second per step.

Each rank counts steps; rank 0 writes a checkpoint (step and a running
"loss") every --checkpoint-every steps and on SIGTERM, then resumes from the
newest one after a restart. Progress goes to $UNIPOOL_REPORT_FILE as JSON
lines. At the end rank 0 writes done.json with the final step.
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
while step < args.steps:
    if stop:
        save(step)
        print(f"rank {rank}: SIGTERM at step {step}; checkpoint written, exiting", flush=True)
        sys.exit(0)
    time.sleep(args.step_time)
    step += 1
    if step == args.fail_at_step and os.environ.get("UNIPOOL_RESTART_COUNT") == "0":
        print(f"rank {rank}: failing at step {step} as asked", flush=True)
        sys.exit(1)
    report({"step": step, "loss": round(10.0 / (1 + step), 4), "throughput": round(1 / args.step_time, 1)})
    if step % args.checkpoint_every == 0 or (
            every_s > 0 and time.monotonic() - last_save >= every_s):
        save(step)
save(step)
if rank == 0:
    with open(os.path.join(ckpt_dir, "done.json"), "w") as f:
        json.dump({"step": step}, f)
print(f"rank {rank}: done at step {step}", flush=True)
