"""The chaos run's checks: the /proc monitor of live copies, and the ledger
of faults and invariant checks."""
from __future__ import annotations

import collections
import dataclasses
import threading
from pathlib import Path

from chaoslib.cluster import log, parse_environ, pids, read_proc, start_time

INVARIANTS = (
    "acknowledged jobs never lost",
    "never two live copies",
    "GPUs allocated = placements",
    "right terminal state",
    "final step = target",
    "no process outlives its job",
    "daemons stay up and heal",
)


# ---- the /proc monitor -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Copy:
    """A live process of a job's rank in one generation (run)."""
    pid: int
    job: int
    rank: int
    generation: int  # UNIPOOL_RESTART_COUNT + 1
    started: int  # /proc start time: the pid's identity


class CopyMonitor(threading.Thread):
    """Samples /proc ten times a second for the processes of this run's jobs
    and flags a (job, rank) alive in two generations at once. A suspect
    sample is confirmed by reading the earlier-seen processes again: still
    alive, they overlapped the later ones."""

    INTERVAL_S = 0.1

    def __init__(self, checkpoint_root: Path):
        super().__init__(daemon=True)
        self.marker = f"UNIPOOL_CHECKPOINT_DIR={checkpoint_root}/".encode()
        self.lock = threading.Lock()
        self.latest: dict[int, Copy] = {}
        self.samples = 0
        self.overlaps: list[str] = []  # one line per confirmed overlapping sample
        self.generations: dict[int, set[int]] = collections.defaultdict(set)
        self._done = threading.Event()

    def scan(self) -> dict[int, Copy]:
        found = {}
        for pid in pids():
            env = read_proc(pid, "environ")
            if self.marker not in env:
                continue
            started = start_time(pid)
            if started is None:
                continue
            vars_ = parse_environ(env)
            try:
                found[pid] = Copy(pid, int(vars_["UNIPOOL_JOB_ID"]), int(vars_["RANK"]),
                                  int(vars_["UNIPOOL_RESTART_COUNT"]) + 1, started)
            except (KeyError, ValueError):
                continue
        return found

    def run(self) -> None:
        while not self._done.wait(self.INTERVAL_S):
            self.sample()

    def stop(self) -> None:
        self._done.set()
        self.join()

    def sample(self) -> None:
        copies = self.scan()
        by_rank: dict[tuple[int, int], list[Copy]] = collections.defaultdict(list)
        for c in copies.values():
            by_rank[(c.job, c.rank)].append(c)
        overlap = ""
        for (job, rank), cs in sorted(by_rank.items()):
            if len({c.generation for c in cs}) < 2:
                continue
            alive = [c for c in cs if start_time(c.pid) == c.started]
            gens = sorted({c.generation for c in alive})
            if len(gens) > 1:
                overlap = (f"job {job} rank {rank}: generations {gens} alive at once "
                           f"(pids {sorted(c.pid for c in alive)})")
                break
        with self.lock:
            self.latest = copies
            self.samples += 1
            for c in copies.values():
                self.generations[c.job].add(c.generation)
            if overlap:
                self.overlaps.append(overlap)
        if overlap:
            log(f"VIOLATION never two live copies: {overlap}")

    def of_job(self, job: int) -> list[Copy]:
        with self.lock:
            return [c for c in self.latest.values() if c.job == job]


# ---- the ledger --------------------------------------------------------------


class Ledger:
    """Faults injected and invariant checks, with the first few violations."""

    def __init__(self, fault_kinds: list[str]):
        self.kinds = list(fault_kinds)
        self.faults: collections.Counter[str] = collections.Counter()
        self.checks = {name: [0, 0] for name in INVARIANTS}
        self.violations: list[str] = []

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks[name][0] += 1
        if not ok:
            self.checks[name][1] += 1
            self.violations.append(f"{name}: {detail}")
            log(f"VIOLATION {name}: {detail}")
        return ok

    def set_count(self, name: str, checks: int, violations: list[str]) -> None:
        """For the monitor, whose samples are its checks."""
        self.checks[name] = [checks, len(violations)]
        for v in violations[:5]:
            self.violations.append(f"{name}: {v}")

    @property
    def failed(self) -> bool:
        return any(v for _, v in self.checks.values())

    def table(self) -> str:
        lines = [f"{'fault':<32}{'injected':>10}"]
        for kind in self.kinds:
            lines.append(f"{kind:<32}{self.faults[kind]:>10}")
        lines.append(f"{'total':<32}{sum(self.faults.values()):>10}")
        lines.append("")
        lines.append(f"{'invariant':<32}{'checks':>10}{'violations':>12}")
        for name, (checks, bad) in self.checks.items():
            lines.append(f"{name:<32}{checks:>10}{bad:>12}")
        return "\n".join(lines)
