"""Per-kernel time of a CPU executable compiled with `profile=True` (`CpuExecutable.profile`).

The profiling build (`codegen-insert-profile-marks`, inserted after `codegen-attach-schedule`) brackets
every kernel of the kernel report, and the whole function, with marks that add the `clock_gettime`
difference to a slot of a module global; `__vtmlir_profile_buffer()` gives its address. Here the slots
are zeroed before each call, read after it, and the median per kernel over the repeats is reported.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np

from ...codegen.insert_profile_marks import (BUFFER, CALLS, CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, CLOCK_WORD,
                                              SLOT_WORDS, TOTAL)
from ...errors import VtmlirError

_PACKED = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@dataclass(frozen=True)
class KernelTime:
    """One kernel of the report and its time: `time_ns` the median over the repeats of its summed
    time in one call (`calls` times per call: more than once inside a fused group's loop, 0 if it
    never ran), `share` of the function's time (`CpuProfile.total_ns`)."""

    id: int
    kind: str
    description: str
    location: str
    schedule: str | None  # None: scalar loops
    time_ns: int
    calls: int
    share: float

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "description": self.description, "location": self.location,
                "schedule": self.schedule, "time_ns": self.time_ns, "calls": self.calls, "share": self.share}


@dataclass(frozen=True)
class CpuProfile:
    """`CpuExecutable.profile(...)`: per kernel (in id order) its median time; `total_ns` the median
    time inside the compiled function (its first to its last instruction), `outside_ns` the part of
    it in no kernel (allocations, the marks themselves, code between kernels), `call_ns` the median
    wall time of the whole Python call (argument checks and result allocation included). Times are
    of `clock`: "cpu" (the calling thread's CPU time: preemption on a busy machine is not counted)
    or "wall". With `repeat` > 1 the kernels' medians need not add up to the function's median."""

    kernels: tuple[KernelTime, ...]
    total_ns: int
    call_ns: int
    repeat: int
    threads: int
    clock: str = "cpu"  # what the kernel times and `total_ns` are: "cpu" (thread CPU time) or "wall"

    @property
    def kernel_ns(self) -> int:
        return sum(k.time_ns for k in self.kernels)

    @property
    def outside_ns(self) -> int:
        return max(self.total_ns - self.kernel_ns, 0)

    def top(self, n: int = 10) -> list[KernelTime]:
        """The `n` kernels that took longest."""
        return sorted(self.kernels, key=lambda k: -k.time_ns)[:n]

    def to_dict(self) -> dict:
        return {"total_ns": self.total_ns, "call_ns": self.call_ns, "kernel_ns": self.kernel_ns,
                "outside_ns": self.outside_ns, "repeat": self.repeat, "threads": self.threads, "clock": self.clock,
                "kernels": [k.to_dict() for k in self.kernels]}

    def to_text(self, limit: int | None = None) -> str:
        """A table sorted by time (the first `limit` kernels; all by default), then the totals."""
        rows = self.top(len(self.kernels) if limit is None else limit)
        threads = "all cores" if self.threads == 0 else f"{self.threads} thread{'s' * (self.threads > 1)}"
        clock = "thread CPU time" if self.clock == "cpu" else "wall time"
        lines = [f"{len(self.kernels)} kernels, median of {self.repeat} calls, {threads}, {clock}; "
                 f"function {_us(self.total_ns)}, call {_us(self.call_ns)} (wall)",
                 f"{'kernel':>6} {'time':>11} {'share':>6} {'calls':>5}  {'schedule':<13} description  (location)"]
        for k in rows:
            lines.append(f"{k.id:>6} {_us(k.time_ns):>11} {k.share:>6.1%} {k.calls:>5}  {k.schedule or 'loops':<13} "
                         f"{k.description}  ({_short(k.location)})")
        if len(rows) < len(self.kernels):
            rest = self.kernel_ns - sum(k.time_ns for k in rows)
            lines.append(f"{'':>6} {_us(rest):>11} {rest / max(self.total_ns, 1):>6.1%}        "
                         f"{len(self.kernels) - len(rows)} more kernels")
        lines.append(f"{'':>6} {_us(self.outside_ns):>11} {self.outside_ns / max(self.total_ns, 1):>6.1%}        "
                     "outside kernels (allocations, marks, glue)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def _short(location: str) -> str:
    """`file:line` of a `path/file:line:col` location (the table's column; `to_dict` keeps it whole)."""
    parts = location.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit():
        return f"{os.path.basename(parts[0])}:{parts[1]}"
    return location


def _us(ns: int) -> str:
    return f"{ns / 1e3:.1f} µs"


class ProfileBuffer:
    """The slots of a profiling build's JIT'd module, as a numpy array (slots × `SLOT_WORDS` int64)."""

    def __init__(self, engine, slots: int):
        result = ctypes.c_int64(0)
        args = (ctypes.c_void_p * 1)(ctypes.addressof(result))
        _PACKED(engine.raw_lookup(BUFFER))(ctypes.addressof(args))
        words = (ctypes.c_int64 * (slots * SLOT_WORDS)).from_address(result.value)
        self.slots = np.ctypeslib.as_array(words).reshape(slots, SLOT_WORDS)
        self._words = words

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        """(total ns, calls) per slot since the last `reset`."""
        return self.slots[:, TOTAL].copy(), self.slots[:, CALLS].copy()

    def reset(self, clock: int) -> None:
        """Zero the slots; the marks read `clock` (a clock_gettime clock id) from now on."""
        self.slots[:, :CLOCK_WORD] = 0
        self.slots[-1, CLOCK_WORD] = clock


CLOCKS = {"cpu": CLOCK_THREAD_CPUTIME_ID, "wall": CLOCK_MONOTONIC}


def profile_calls(exe, call, kernel_report, buffer: ProfileBuffer, repeat: int, warmup: int,
                  clock: str | None = None) -> CpuProfile:
    """Run `call()` `warmup` times, then `repeat` times with the slots read after each; medians.
    `clock`: "cpu" (the calling thread's CPU time; the default with one thread) or "wall" (the
    default with OpenMP threads, whose workers' time the calling thread's CPU time does not hold)."""
    if clock is None:
        clock = "cpu" if exe.threads == 1 else "wall"
    if clock not in CLOCKS:
        raise VtmlirError(f"error: unknown clock {clock!r}; expected one of: {', '.join(CLOCKS)}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise VtmlirError(f"error: repeat must be a positive integer, got {repeat!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise VtmlirError(f"error: warmup must be a non-negative integer, got {warmup!r}")
    for _ in range(warmup):
        call()
    totals, counts, walls = [], [], []
    for _ in range(repeat):
        buffer.reset(CLOCKS[clock])
        start = time.perf_counter_ns()
        call()
        walls.append(time.perf_counter_ns() - start)
        t, c = buffer.read()
        totals.append(t)
        counts.append(c)
    medians = np.median(np.stack(totals), axis=0)
    calls = np.stack(counts)[-1]
    whole = int(medians[-1])  # the last slot: the function's body
    kernels = tuple(
        KernelTime(p.id, p.kind, p.description, p.location, p.schedule if p.id in kernel_report.vectorized else None,
                   int(medians[p.id]), int(calls[p.id]), float(medians[p.id]) / max(whole, 1))
        for p in kernel_report.kernels)
    return CpuProfile(kernels, whole, int(statistics.median(walls)), repeat, exe.threads, clock)
