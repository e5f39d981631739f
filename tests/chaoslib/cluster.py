"""The chaos run's cluster: its daemons (a server, agents, each agent behind
a TCP proxy of its own), the API, the /proc helpers and the run's log."""
from __future__ import annotations

import ctypes
import dataclasses
import http.client
import json
import os
import resource
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

LEASE_S = 3.0

_T0 = time.monotonic()
_VERBOSE = False
_LOG_FILE = None


def configure_log(verbose: bool, log_file) -> None:
    """Every line goes to `log_file`; to stdout too unless verbose_only
    (or when `verbose`)."""
    global _VERBOSE, _LOG_FILE
    _VERBOSE, _LOG_FILE = verbose, log_file


def log(msg: str, verbose_only: bool = False) -> None:
    line = f"[{time.monotonic() - _T0:7.1f}s] {msg}"
    if _LOG_FILE:
        _LOG_FILE.write(line + "\n")
        _LOG_FILE.flush()
    if _VERBOSE or not verbose_only:
        print(line, flush=True)


class Interrupted(Exception):
    """SIGTERM (or SIGINT): stop, clean up, report."""


# ---- processes ---------------------------------------------------------------


def _die_with_parent() -> None:
    """In a child: SIGKILL when the harness dies (PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def spawn(args: list[str], log_path: Path, env: dict[str, str]) -> subprocess.Popen:
    """Starts a daemon in a session of its own, stderr to `log_path`."""
    with open(log_path, "ab") as err:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, env=env, start_new_session=True,
                                preexec_fn=_die_with_parent)


def read_proc(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks), None when dead or a zombie."""
    stat = read_proc(pid, "stat")
    end = stat.rfind(b")")
    if end < 0:
        return None
    fields = stat[end + 2:].split()
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


def pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def parse_environ(raw: bytes) -> dict[str, str]:
    out = {}
    for kv in raw.split(b"\0"):
        k, eq, v = kv.partition(b"=")
        if eq:
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_bytes()[-limit:].decode(errors="replace")
    except OSError:
        return ""


# ---- the API -----------------------------------------------------------------


@dataclasses.dataclass
class Reply:
    status: int  # 0: no answer
    body: object = None
    refused: bool = False  # the connection was refused: the request did nothing

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class Api:
    """The server's REST API with the admin token; `port` follows restarts."""

    def __init__(self, token: str):
        self.token = token
        self.port = 0

    def call(self, method: str, path: str, body: object = None, timeout: float = 5.0) -> Reply:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data if data is not None else b"", headers=headers)
            r = conn.getresponse()
            raw = r.read()
        except ConnectionRefusedError:
            return Reply(0, refused=True)
        except (OSError, http.client.HTTPException):
            return Reply(0)
        finally:
            conn.close()
        try:
            return Reply(r.status, json.loads(raw) if raw else None)
        except ValueError:
            return Reply(r.status, raw.decode(errors="replace"))

    def get(self, path: str) -> Reply:
        return self.call("GET", path)


# ---- the network between an agent and the server -----------------------------


class Proxy:
    """A TCP forwarder from a port of its own to the server's current port;
    cut(True) closes every connection and refuses new ones."""

    def __init__(self, target: Callable[[], int]):
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._listener.getsockname()[1]
        self.cut_now = False
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, cut: bool) -> None:
        self.cut_now = cut
        if cut:
            with self._lock:
                for s in self._open:
                    self._shutdown(s)

    def close(self) -> None:
        self.cut(True)
        self._shutdown(self._listener)
        self._listener.close()

    @staticmethod
    def _shutdown(s: socket.socket) -> None:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.cut_now:
                client.close()
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self._target()), timeout=2)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, server}
            done = threading.Semaphore(0)  # released by each pump as it ends
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b, done), daemon=True).start()
            threading.Thread(target=self._close_after, args=(client, server, done),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, done: threading.Semaphore) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        self._shutdown(dst)
        done.release()

    def _close_after(self, a: socket.socket, b: socket.socket, done: threading.Semaphore) -> None:
        done.acquire()
        done.acquire()
        with self._lock:
            self._open -= {a, b}
        a.close()
        b.close()


# ---- the daemons -------------------------------------------------------------


class Server:
    def __init__(self, binary: str, run: Path, cluster: Path, tokens: Path, extra: list[str],
                 env: dict[str, str]):
        self.binary, self.run, self.env = binary, run, env
        self.args = [binary, "server", "--cluster", str(cluster), "--tokens", str(tokens),
                     "--data", str(run / "data"), "--address-file", str(run / "address"),
                     "--init", "--node-lease", f"{LEASE_S:g}s", "--min-runtime", "0s",
                     "--log-level", "warn", *extra]
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.disk_full = False
        self.killed = False  # by the harness: not a crash

    @property
    def up(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> bool:
        """Starts it on its port (any at first) and waits until it listens."""
        address = self.run / "address"
        for port in dict.fromkeys([self.port, 0]):  # its port, else any (taken meanwhile)
            address.unlink(missing_ok=True)
            self.disk_full = self.killed = False
            self.proc = spawn([*self.args, "--listen", f"127.0.0.1:{port}"],
                              self.run / "server.log", self.env)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.proc.poll() is None:
                if address.exists() and address.read_text().strip():
                    self.port = int(address.read_text().strip().rsplit(":", 1)[1])
                    return True
                time.sleep(0.05)
            if self.proc.poll() is None or "in use" not in tail(self.run / "server.log", 300):
                return False
        return False

    def kill9(self) -> None:
        self.killed = True
        if self.proc:
            self.proc.kill()
            self.proc.wait()

    def fill_disk(self, full: bool) -> None:
        """RLIMIT_FSIZE 0: every write to a file fails (EFBIG), as on a full
        disk; the server ignores SIGXFSZ. Its log is a file too: lines
        written meanwhile are lost, as they would be."""
        limit = 0 if full else resource.RLIM_INFINITY
        try:
            resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
            self.disk_full = full
        except (ProcessLookupError, AttributeError):
            self.disk_full = False


class Agent:
    def __init__(self, name: str, binary: str, run: Path, proxy: Proxy, extra: list[str],
                 env: dict[str, str]):
        self.name, self.proxy, self.env = name, proxy, env
        self.work = run / "agents" / name
        self.log_path = run / "agents" / f"{name}.log"
        self.args = [binary, "agent", "--server", f"http://127.0.0.1:{proxy.port}",
                     "--node", name, "--gpus", "2", "--work-dir", str(self.work),
                     "--checkpoint-root", str(run / "checkpoints"), "--heartbeat", "300ms",
                     "--lease", f"{LEASE_S:g}s", "--health-interval", "500ms",
                     "--health-check", "true", "--log-level", "info", *extra]
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.stopped = False  # SIGSTOPped
        self.down = False  # killed by the harness, to be restarted

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def healthy(self) -> bool:
        return self.running and not self.stopped and not self.down and not self.proxy.cut_now

    def start(self, join_token: str) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.proc = spawn([*self.args, "--join-token", join_token], self.log_path, self.env)
        self.started_at = time.monotonic()
        self.stopped = self.down = False

    def signal(self, sig: int) -> None:
        if self.running:
            self.proc.send_signal(sig)

    def kill9(self) -> None:
        if self.proc:
            if self.stopped:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.stopped = False

    def terminate(self) -> None:
        """SIGTERM and wait (SIGKILL after 15 s)."""
        if not self.running:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
