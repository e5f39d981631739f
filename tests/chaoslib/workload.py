"""The chaos run's jobs: the mix it submits and what each must end as."""
from __future__ import annotations

import dataclasses
import random
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
JOB_FAILURE_BUDGET = 3  # injected failures per job at most
MAX_RESTARTS = JOB_FAILURE_BUDGET + 2
TERMINAL = ("Succeeded", "Failed", "Cancelled")
# A rank exits 3 at once on SIGUSR1: the harness's "non-zero exit" fault.
RANK_WRAPPER = ("import os,runpy,signal,sys;"
                "signal.signal(signal.SIGUSR1,lambda *_:os._exit(3));"
                "sys.argv=sys.argv[1:];runpy.run_path(sys.argv[0],run_name='__main__')")


# ---- the jobs ----------------------------------------------------------------


@dataclasses.dataclass
class Job:
    name: str
    kind: str  # trainer or ddp
    gpus: int
    steps: int
    cancel_after: float | None  # seconds after submission, or None
    id: int = 0
    acknowledged: bool = False
    submitted_at: float = 0.0
    expected: tuple[str, ...] = ("Succeeded",)
    state: str = "Pending"
    generation: int = 0
    record: dict = dataclasses.field(default_factory=dict)
    failures_injected: int = 0
    ended_at: float | None = None
    leftovers_checked: bool = False

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL

    def spec(self, python: str, torch_python: str | None) -> dict:
        if self.kind == "ddp":
            command = [torch_python, "-c", RANK_WRAPPER, "examples/jobs/train_ddp.py"]
            args = ["--steps", str(self.steps), "--checkpoint-every", "10", "--step-sleep", "0.05"]
        else:
            command = [python, "-c", RANK_WRAPPER, "examples/jobs/trainer.py"]
            args = ["--steps", str(self.steps), "--checkpoint-every", "20", "--step-time", "0.05"]
        return {"apiVersion": "unipool/v1", "kind": "Job", "metadata": {"name": self.name},
                "spec": {"command": command, "args": args, "workingDir": str(REPO),
                         "gpus": self.gpus, "gpusPerNode": min(self.gpus, 2),
                         "restartPolicy": {"maxRestarts": MAX_RESTARTS, "backoff": "500ms"}}}


class Workload:
    """The job mix, drawn from its own seeded stream: trainers of 1, 2 and 4
    GPUs, a DDP job now and then (one at a time) where PyTorch imports, and a
    cancel for some."""

    def __init__(self, seed: int, torch_python: str | None):
        self.rng = random.Random(f"{seed}/jobs")
        self.torch_python = torch_python
        self.count = 0

    def next(self, ddp_running: bool) -> Job:
        self.count += 1
        draw = self.rng.random()
        steps = self.rng.randrange(100, 301, 10)
        cancel_after = self.rng.uniform(1, 10) if self.rng.random() < 0.1 else None
        if draw < 0.1 and self.torch_python and not ddp_running:
            return Job(f"ddp-{self.count}", "ddp", 2, self.rng.randrange(40, 101, 10), cancel_after)
        gpus = 1 if draw < 0.3 else 4 if draw < 0.55 else 2
        return Job(f"trainer-{self.count}", "trainer", gpus, steps, cancel_after)


def find_torch_python() -> str | None:
    for python in dict.fromkeys([sys.executable, shutil.which("python3"), "/usr/bin/python3"]):
        if python and subprocess.run([python, "-c", "import torch"], capture_output=True,
                                     timeout=120).returncode == 0:
            return python
    return None
