"""Per-kernel time of a CPU executable compiled with `profile=True` (`CpuExecutable.profile`).

The profiling build (`codegen-insert-profile-marks`, inserted after `codegen-attach-schedule`) brackets
every kernel of the kernel report, and the whole function, with marks that add the `clock_gettime`
difference to a slot of a module global; `__vtmlir_profile_buffer()` gives its address. Here the slots
are zeroed before each call, read after it, and the median per kernel over the repeats is reported.
The slots are one global per executable: one profile at a time (a concurrent call would mix its
marks into them).
"""

from __future__ import annotations

import ctypes
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np

from ...codegen.insert_profile_marks import (BUFFER, CALIBRATE, CALLS, CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, CLOCK_WORD,
                                              SLOT_WORDS, TOTAL)
from ...errors import VtmlirError

_PACKED = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@dataclass(frozen=True)
class KernelTime:
    """One kernel of the report and its time: `time_ns` the median over the repeats of its summed
    time in one call (`calls` times per call: more than once inside a loop, a convolution's taps or a
    fused group's tiles; 0 if it never ran), `share` of the function's time (`CpuProfile.total_ns`)."""

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
    of `clock`: "wall" or "cpu" (the calling thread's CPU time: preemption on a busy machine is not
    counted). A pair of marks measures `mark_ns` even around nothing; that much per call is
    subtracted from each kernel's time (and stays in `outside_ns`). With `repeat` > 1 the kernels'
    medians need not add up to the function's median."""

    kernels: tuple[KernelTime, ...]
    total_ns: int
    call_ns: int
    repeat: int
    threads: int
    clock: str = "wall"  # what the kernel times and `total_ns` are: "wall" or "cpu" (thread CPU time)
    mark_ns: float = 0.0  # an empty bracket's time on that clock, subtracted per kernel call

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
                "mark_ns": self.mark_ns,
                "kernels": [k.to_dict() for k in self.kernels]}

    def to_text(self, limit: int | None = None) -> str:
        """A table sorted by time (the first `limit` kernels; all by default), then the totals."""
        rows = self.top(len(self.kernels) if limit is None else limit)
        threads = "all cores" if self.threads == 0 else f"{self.threads} thread{'s' * (self.threads > 1)}"
        clock = "thread CPU time" if self.clock == "cpu" else "wall time"
        lines = [f"{len(self.kernels)} kernels, median of {self.repeat} calls, {threads}, {clock}; "
                 f"function {_us(self.total_ns)}, call {_us(self.call_ns)} (wall); "
                 f"{self.mark_ns:.0f} ns per kernel call subtracted (the marks)",
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
        self._calibrate = _PACKED(engine.raw_lookup(CALIBRATE))

    def mark_ns(self, clock: int, brackets: int = 200, rounds: int = 5) -> float:
        """What an empty pair of marks measures on `clock` (ns; the median of `rounds` runs of
        `brackets`): the part of the marks' own cost that lands inside a kernel's time."""
        count = ctypes.c_int64(brackets)
        args = (ctypes.c_void_p * 1)(ctypes.addressof(count))
        per_bracket = []
        for _ in range(rounds):
            self.reset(clock)
            self._calibrate(ctypes.addressof(args))
            per_bracket.append(self.slots[-1, TOTAL] / brackets)
        self.reset(clock)
        return float(np.median(per_bracket))

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        """(total ns, calls) per slot since the last `reset`."""
        return self.slots[:, TOTAL].copy(), self.slots[:, CALLS].copy()

    def reset(self, clock: int) -> None:
        """Zero the slots; the marks read `clock` (a clock_gettime clock id) from now on."""
        self.slots[:, :CLOCK_WORD] = 0
        self.slots[-1, CLOCK_WORD] = clock


def sample_inputs(signature, seed: int = 0) -> list:
    """Arguments for a function of `signature` to profile on (`vtmlir compile --profile` of an .mlir
    file): floating-point inputs seeded standard-normal, the others zeros (valid indices and masks)."""
    import torch  # deferred: torch is heavy; loaded on first use

    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(spec.shape).astype(spec.numpy_dtype)
              if np.issubdtype(spec.numpy_dtype, np.floating) else np.zeros(spec.shape, spec.numpy_dtype)
              for spec in signature.inputs]
    return [torch.from_numpy(a) for a in arrays]


CLOCKS = {"cpu": CLOCK_THREAD_CPUTIME_ID, "wall": CLOCK_MONOTONIC}


def profile_calls(exe, call, kernel_report, buffer: ProfileBuffer, repeat: int, warmup: int,
                  clock: str = "wall") -> CpuProfile:
    """Run `call()` `warmup` times, then `repeat` times with the slots read after each; medians.
    `clock`: "wall" (CLOCK_MONOTONIC, a vDSO read of tens of ns) or "cpu" (the calling thread's CPU
    time: preemption on a busy machine is not counted, but each read is a system call, ~1 µs in a VM,
    and the OpenMP workers' time is not the calling thread's)."""
    if clock not in CLOCKS:
        raise VtmlirError(f"error: unknown clock {clock!r}; expected one of: {', '.join(CLOCKS)}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise VtmlirError(f"error: repeat must be a positive integer, got {repeat!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise VtmlirError(f"error: warmup must be a non-negative integer, got {warmup!r}")
    for _ in range(warmup):
        call()
    mark = buffer.mark_ns(CLOCKS[clock])
    totals, counts, walls = [], [], []
    for _ in range(repeat):
        buffer.reset(CLOCKS[clock])
        start = time.perf_counter_ns()
        call()
        walls.append(time.perf_counter_ns() - start)
        t, c = buffer.read()
        totals.append(t)
        counts.append(c)
    buffer.reset(CLOCK_MONOTONIC)  # the ordinary calls that follow read the cheap clock
    calls = np.stack(counts)[-1]
    # per kernel, its brackets' own share of the marks' cost taken out (never below 0)
    medians = np.maximum(np.median(np.stack(totals), axis=0) - mark * calls, 0)
    whole = int(np.median([t[-1] for t in totals]))  # the last slot: the function's body
    kernels = tuple(
        KernelTime(p.id, p.kind, p.description, p.location, p.schedule if p.id in kernel_report.vectorized else None,
                   int(medians[p.id]), int(calls[p.id]), float(int(medians[p.id])) / max(whole, 1))
        for p in kernel_report.kernels)
    return CpuProfile(kernels, whole, int(statistics.median(walls)), repeat, exe.threads, clock, mark)
