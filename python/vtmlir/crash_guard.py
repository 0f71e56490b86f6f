"""Run a function where a native crash cannot kill the caller: in a forked child process.

MLIR's parser and verifier are C++; on some malformed input they crash (a SIGSEGV in an op's custom
parser, an LLVM fatal error on a 2^32-element type) instead of reporting a diagnostic, and a crash in
C++ takes the whole Python process with it. `run_guarded(fn, *args)` forks, runs `fn` in the child and
sends its (picklable) result back through a pipe, so the caller gets either the result, or a
`Crashed` naming the signal and the last thing the child wrote on stderr (LLVM's fatal-error text), or
a `TimedOut`.

Why fork and not a fresh interpreter: the child starts with everything already imported (torch-mlir
takes ~0.5 s to import), so guarding a parse costs the parse plus a few milliseconds. The child runs
only MLIR code (no torch), leaves with `os._exit` (no atexit handlers, no flushing of the parent's
buffers), and is killed when it overruns its time limit.

`VTMLIR_NO_CRASH_GUARD=1` runs `fn` in the calling process instead (for debuggers, or platforms
without `fork`).

`limit="cpu"` counts the child's CPU time against `timeout` instead of the wall clock, for callers on
a busy machine (the fuzzer at low priority beside other work: a starved child passed 300 s of wall
time in a few seconds of CPU and was reported as a hang). A child that uses no CPU (blocked) is still
killed after `CPU_LIMIT_WALL_FACTOR` times `timeout` of wall time. Where the child's CPU time cannot
be read (no `/proc`), the wall clock counts.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import pickle
import select
import signal
import sys
import time
from dataclasses import dataclass

# What a child may write on stderr before it dies (LLVM's "LLVM ERROR: ..." line is what matters).
_STDERR_TAIL = 4096
# With `limit="cpu"`, wall time after which a child is killed however little CPU it used (x timeout).
CPU_LIMIT_WALL_FACTOR = 4


@dataclass(frozen=True)
class Crashed:
    """The child died from `signal_name`; `stderr` is the end of what it wrote on stderr."""

    signal_name: str
    stderr: str

    def describe(self) -> str:
        detail = self.stderr.strip().splitlines()[-1] if self.stderr.strip() else ""
        return f"{self.signal_name}{': ' + detail if detail else ''}"


@dataclass(frozen=True)
class TimedOut:
    """The child ran longer than `seconds` (of wall time, or of CPU time with `limit="cpu"`) and was killed."""

    seconds: float


@dataclass(frozen=True)
class Raised:
    """`fn` raised a Python exception in the child (its type name and message)."""

    type_name: str
    message: str


def guard_enabled() -> bool:
    return hasattr(os, "fork") and not os.environ.get("VTMLIR_NO_CRASH_GUARD")


def run_guarded(fn, *args, timeout: float = 600.0, limit: str = "wall"):
    """`fn(*args)` in a forked child: its return value, or `Crashed`, `TimedOut` or `Raised`.
    `limit`: what `timeout` counts, "wall" time or the child's "cpu" time (module docstring)."""
    if limit not in ("wall", "cpu"):
        raise ValueError(f"limit must be 'wall' or 'cpu', got {limit!r}")
    if not guard_enabled():
        return fn(*args)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    result_r, result_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(fn, args, result_r, result_w, err_r, err_w)
    os.close(result_w)
    os.close(err_w)
    payload, stderr_tail, timed_out = _collect(pid, result_r, err_r, timeout, limit == "cpu")
    os.close(result_r)
    os.close(err_r)
    if timed_out:
        _kill(pid)
        return TimedOut(timeout)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not payload:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        name = signal.Signals(sig).name if sig else f"exit status {os.WEXITSTATUS(status)}"
        return Crashed(name, stderr_tail.decode(errors="replace"))
    kind, value = pickle.loads(payload)
    if kind == "raised":
        return Raised(*value)
    return value


def _child(fn, args, result_r, result_w, err_r, err_w) -> None:
    code = 0
    try:
        # An expected crash is reported by the parent: no Python stack dump from the child (pytest and
        # PYTHONFAULTHANDLER enable faulthandler on the parent's stderr, which the child inherits).
        faulthandler.disable()
        # No cyclic GC: it could collect an MLIR context of the parent's, whose destructor joins
        # thread-pool threads that do not exist in this process (and would wait forever).
        gc.disable()
        os.close(result_r)
        os.close(err_r)
        os.dup2(err_w, 2)  # native fatal errors (LLVM ERROR: ...) go to the parent
        os.close(err_w)
        try:
            reply = ("value", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            reply = ("raised", (type(exc).__name__, str(exc)))
        data = pickle.dumps(reply)
        view = memoryview(data)
        while view:
            written = os.write(result_w, view)
            view = view[written:]
    except BaseException:  # noqa: BLE001 - a child must never return into the parent's code
        code = 70
    finally:
        os._exit(code)


def _collect(pid: int, result_r: int, err_r: int, timeout: float,
             cpu_limited: bool = False) -> tuple[bytes, bytes, bool]:
    """Read the child's reply and stderr until both pipes close (or the time is up)."""
    start = time.monotonic()
    deadline = start + timeout
    chunks: list[bytes] = []
    tail = b""
    open_fds = {result_r, err_r}
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0 and cpu_limited:
            used = _cpu_seconds(pid)
            if used is not None and used < timeout and time.monotonic() - start < CPU_LIMIT_WALL_FACTOR * timeout:
                # Starved rather than busy: wait at least as long as the CPU time it has left.
                deadline = time.monotonic() + max(timeout - used, 1.0)
                continue
        if left <= 0:
            return b"".join(chunks), tail, True
        ready, _, _ = select.select(list(open_fds), [], [], min(left, 1.0))
        for fd in ready:
            data = os.read(fd, 1 << 16)
            if not data:
                open_fds.discard(fd)
            elif fd == result_r:
                chunks.append(data)
            else:
                tail = (tail + data)[-_STDERR_TAIL:]
    return b"".join(chunks), tail, False


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process `pid` (all its threads), or None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
