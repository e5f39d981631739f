#!/usr/bin/env python3
"""Data-parallel training with PyTorch DDP, in the spirit of the seed's
train_ddp.py, as unipool launches it (one process per GPU).

- Reads the launch environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
  MASTER_PORT); never hard-codes GPU ids (CUDA_VISIBLE_DEVICES is the
  scheduler's choice).
- NCCL on GPUs; gloo on CPU when no GPU is present, so it runs anywhere.
- Checkpoints model, optimizer, step and RNG state every --checkpoint-every
  steps and on SIGTERM (preemption) into $UNIPOOL_CHECKPOINT_DIR, and
  resumes from the newest one.
- Reports step, loss, throughput and gradient norm to $UNIPOOL_REPORT_FILE;
  every rank reports its step, data and communication seconds (the
  backward pass, where DDP all-reduces) for the platform's straggler watch.
- --stall-rank R --stall-at-step S: rank R stops talking at step S (a hung
  rank), so its peers' collectives time out after --pg-timeout seconds.
- Elastic continue (spec.elastic.onResize: continue, $UNIPOOL_ELASTIC): the
  process group is formed from $UNIPOOL_RENDEZVOUS_FILE. When a peer is lost
  (a collective fails) or the file's version goes up (a node joined), every
  rank waits for the newer membership, re-forms the group at its size, and
  the furthest rank broadcasts model, optimizer and step to the rest (a
  joining rank has none): training goes on in memory, without a restart.
  Each step's global batch is drawn from the step number alone and split
  among the ranks, so the data order does not depend on the size.
"""
import argparse
import json
import os
import sys
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--checkpoint-every", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds; stands in for a bigger model")
parser.add_argument("--pg-timeout", type=float, default=0,
                    help="seconds a collective may wait for a peer (0: PyTorch's default)")
parser.add_argument("--stall-rank", type=int, default=-1, help="this rank stops at --stall-at-step")
parser.add_argument("--stall-at-step", type=int, default=-1)
args = parser.parse_args()

stop = False


def on_sigterm(signum, frame):
    global stop
    stop = True  # checkpoint after the current step, then exit


signal.signal(signal.SIGTERM, on_sigterm)


class SimpleModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, x):
        return self.fc(x)


def report(obj):
    path = os.environ.get("UNIPOOL_REPORT_FILE")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(obj) + "\n")


def latest_checkpoint(ckpt_dir):
    steps = [int(n[5:-3]) for n in os.listdir(ckpt_dir) if n.startswith("ckpt-") and n.endswith(".pt")]
    return os.path.join(ckpt_dir, f"ckpt-{max(steps)}.pt") if steps else None


ELASTIC = os.environ.get("UNIPOOL_ELASTIC") == "continue"


class Reform(Exception):
    """The membership changed: re-form the process group."""


def read_rendezvous(newer_than=-1, wait_s=300.0):
    """The rendezvous file, once its version is above `newer_than`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:  # rewritten in place: a half-written file is read again
            with open(os.environ["UNIPOOL_RENDEZVOUS_FILE"]) as f:
                rdzv = json.load(f)
            if rdzv["version"] > newer_than:
                return rdzv
        except (OSError, ValueError, KeyError):
            pass
        if time.monotonic() > deadline:
            sys.exit(f"no membership newer than {newer_than} within {wait_s:.0f} s")
        time.sleep(0.05)


def form_group(backend, rdzv, timeout_s):
    dist.init_process_group(backend=backend,
                            init_method=f"tcp://{rdzv['masterAddr']}:{rdzv['masterPort']}",
                            rank=rdzv["rank"], world_size=rdzv["worldSize"],
                            timeout=timedelta(seconds=timeout_s))


def main():
    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ["LOCAL_RANK"])
    if use_cuda:
        torch.cuda.set_device(local_rank)
    backend = "nccl" if use_cuda else "gloo"
    kwargs = {"timeout": timedelta(seconds=args.pg_timeout)} if args.pg_timeout > 0 else {}
    version = 0
    if ELASTIC:
        rdzv = read_rendezvous()
        version = rdzv["version"]
        form_group(backend, rdzv, args.pg_timeout or 60)
    else:
        dist.init_process_group(backend=backend, **kwargs)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    ckpt_dir = os.environ.get("UNIPOOL_CHECKPOINT_DIR", "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)
    with open(os.path.join(ckpt_dir, f"pid-rank{rank}-run{os.environ.get('UNIPOOL_RESTART_COUNT', '0')}"), "w") as f:
        f.write(str(os.getpid()))

    torch.manual_seed(0)
    model = DDP(SimpleModel().to(device), device_ids=[local_rank] if use_cuda else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    step = 0
    global_batch = args.batch_size * world
    path = latest_checkpoint(ckpt_dir) if version == 0 else None  # a joiner gets its state
    if path:
        ckpt = torch.load(path, map_location=device)
        model.module.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        step = ckpt["step"]
        global_batch = ckpt.get("globalBatch", global_batch)
        if len(ckpt["rng"]) == world:
            torch.set_rng_state(ckpt["rng"][rank])
        else:
            torch.manual_seed(1000 + rank + step)  # resumed at another size
    else:
        torch.manual_seed(1000 + rank)  # each rank its own data
    has_state = version == 0
    print(f"rank {rank}/{world} on {os.environ.get('UNIPOOL_NODE')} "
          f"{'starts at step ' + str(step) if has_state else 'joins at membership ' + str(version)} "
          f"(restart {os.environ.get('UNIPOOL_RESTART_COUNT')}, {'cuda' if use_cuda else 'cpu/gloo'})",
          flush=True)

    def sync_state():
        """The furthest rank (a survivor) broadcasts model, optimizer and step."""
        nonlocal step, global_batch
        mine = torch.tensor([float(step if has_state else -1)], device=device)
        everyone = [torch.zeros(1, device=device) for _ in range(world)]
        dist.all_gather(everyone, mine)
        src = max(range(world), key=lambda r: (everyone[r].item(), -r))
        box = [{"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                "step": step, "globalBatch": global_batch} if rank == src else None]
        dist.broadcast_object_list(box, src=src, device=device)
        if rank != src:
            model.module.load_state_dict(box[0]["model"])
            optimizer.load_state_dict(box[0]["optimizer"])
            step, global_batch = box[0]["step"], box[0]["globalBatch"]

    def reform(newer_than):
        """Waits for the next membership and re-forms the group at its size."""
        nonlocal rank, world, version, model, has_state
        rdzv = read_rendezvous(newer_than)
        dist.destroy_process_group()
        form_group(backend, rdzv, args.pg_timeout or 60)
        version, rank, world = rdzv["version"], dist.get_rank(), dist.get_world_size()
        model = DDP(model.module, device_ids=[local_rank] if use_cuda else None)
        sync_state()
        has_state = True
        print(f"rank {rank}/{world}: membership {version}: continuing at step {step} "
              f"(no restart)", flush=True)

    if ELASTIC:
        sync_state()
        has_state = True

    def newest_version():
        if not ELASTIC:
            return 0
        try:
            with open(os.environ["UNIPOOL_RENDEZVOUS_FILE"]) as f:
                return json.load(f)["version"]
        except (OSError, ValueError, KeyError):
            return version

    def save(step):
        began = time.monotonic()
        rngs = [None] * world  # every rank's RNG state, so a resumed run draws the same data
        dist.all_gather_object(rngs, torch.get_rng_state())
        if rank == 0:
            tmp = os.path.join(ckpt_dir, f".ckpt-{step}.tmp")
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                        "step": step, "rng": rngs, "globalBatch": global_batch}, tmp)
            os.replace(tmp, os.path.join(ckpt_dir, f"ckpt-{step}.pt"))
            # How long the save held training up; the agent measures its size.
            report({"checkpoint": {"step": step, "path": ckpt_dir,
                                   "seconds": round(time.monotonic() - began, 6)}})

    def train_step():
        """One step; True: stop now (checkpoint written)."""
        nonlocal step
        # Everyone stops together (a preempted rank tells the others), and
        # re-forms together when any rank sees a newer membership.
        flag = torch.tensor([1.0 if stop else 0.0, float(newest_version())], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag[0].item() > 0:
            save(step)
            print(f"rank {rank}: stopping at step {step}; checkpoint written", flush=True)
            return True
        if flag[1].item() > version:
            raise Reform()
        if rank == args.stall_rank and step == args.stall_at_step:
            print(f"rank {rank}: stalling at step {step}", flush=True)
            while True:  # a rank that stops talking: the others time out
                time.sleep(1)
        t0 = time.time()
        if ELASTIC:  # the step's global batch, whatever the size; this rank's share
            g = torch.Generator().manual_seed(1000003 + step)
            x = torch.randn(global_batch, 128, generator=g).tensor_split(world)[rank].to(device)
        else:
            x = torch.randn(args.batch_size, 128, device=device)
        y = (x[:, :10].argmax(dim=1))  # a learnable target
        t_data = time.time()
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        t_comm = time.time()
        loss.backward()  # DDP's all-reduce overlaps it
        comm_s = time.time() - t_comm
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9).item()
        optimizer.step()
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)
        step += 1
        report({"step": step, "rank": rank, "stepSeconds": round(time.time() - t0, 6),
                "dataSeconds": round(t_data - t0, 6), "commSeconds": round(comm_s, 6)})
        if rank == 0 and step % 5 == 0:
            report({"step": step, "loss": round(loss.item(), 4), "gradNorm": round(grad_norm, 4),
                    "throughput": round(args.batch_size * world / max(time.time() - t0, 1e-6), 1)})
        if step % 20 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if step % args.checkpoint_every == 0 or step == args.steps:
            save(step)
        return False

    while step < args.steps:
        if not ELASTIC:
            if train_step():
                break
            continue
        try:
            if train_step():
                break
        except Reform:
            reform(version)
        except RuntimeError as e:  # a peer is gone: its collective failed
            print(f"rank {rank}: lost a peer at step {step} ({str(e).splitlines()[0][:120]}); "
                  f"waiting for the new membership", flush=True)
            reform(version)
    if step >= args.steps and rank == 0:
        with open(os.path.join(ckpt_dir, "done.json"), "w") as f:
            json.dump({"step": step}, f)
        print(f"done at step {step}", flush=True)
    dist.barrier()  # nobody leaves while a peer still talks
    # No destroy_process_group(): with gloo it can hang joining its threads
    # once the peers have exited (seen here at the end of a run: rank 0
    # stuck in std::thread::join after "done"); the process exits at once
    # below and the kernel closes the connections.


if __name__ == "__main__":
    main()
    # Skip interpreter teardown: gloo's threads can hang it after a peer left.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
