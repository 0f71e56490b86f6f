"""The host CPU as code generation sees it: vector register width and core count.

Read from the operating system, not from a table of CPU names: `/proc/cpuinfo`'s feature flags on
x86 (AVX-512F: 512-bit vectors, AVX/AVX2: 256, else SSE: 128), 128-bit NEON on AArch64. The JIT
picks the instructions itself (LLVM's host CPU); the schedules only need the width to choose how many
elements one vector register holds, and the core count to split work for the threads.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class HostTarget:
    """What the schedules are tuned for: `vector_bits` per register, `cores`, and the CPU `features` seen."""

    arch: str
    vector_bits: int
    cores: int
    features: frozenset[str] = frozenset()

    def lanes(self, element_bits: int) -> int:
        """Elements of `element_bits` in one vector register (at least 1)."""
        return max(1, self.vector_bits // max(1, element_bits))


def _x86_vector_bits(flags: set[str]) -> int:
    if "avx512f" in flags:
        return 512
    if "avx2" in flags or "avx" in flags:
        return 256
    return 128


def _cpu_flags() -> set[str]:
    """The feature flags of the first processor in /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return set(value.split())
    except OSError:
        pass
    return set()


@lru_cache(maxsize=1)
def host_target() -> HostTarget:
    """The machine this process runs on (cached: it does not change while the process lives)."""
    arch = platform.machine().lower()
    flags = _cpu_flags()
    if arch in ("x86_64", "amd64", "i686", "i386"):
        bits = _x86_vector_bits(flags)
    elif arch in ("aarch64", "arm64"):
        bits = 128  # NEON (SVE's width is a run-time value; the schedules use fixed-width vectors)
    else:
        bits = 128
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    keep = {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "f16c", "asimd", "neon", "sse4_2"}
    return HostTarget(arch=arch, vector_bits=bits, cores=max(1, cores), features=frozenset(flags & keep))
