"""PTX validation and assembly with `ptxas` from the `nvidia-cuda-nvcc` pip package.

A system ptxas (whatever CUDA toolkit a machine has) is never used: its version, and with it the PTX
ISA and the architectures it accepts, would vary from machine to machine.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ...errors import VtmlirError


@lru_cache(maxsize=1)
def find_ptxas() -> str:
    """Path of the pip-installed ptxas (`nvidia/cu13/bin/ptxas`); `VtmlirError` when it is missing."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "cuda_nvcc", "cu12"):
            candidate = Path(root, sub, "bin", "ptxas")
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    raise VtmlirError("error: ptxas not found; install the nvidia-cuda-nvcc package (pip)")


def assemble(ptx: str, arch: str = "sm_80", name: str = "kernel") -> bytes:
    """Assemble PTX text into a cubin for `arch` (e.g. sm_80, sm_90, sm_90a).

    A PTX module whose `.target` is older than `arch` is accepted (ptxas compiles forward).
    Raises `VtmlirError` with ptxas's own message when the PTX is invalid for `arch`.
    """
    ptxas = find_ptxas()
    with tempfile.TemporaryDirectory(prefix="vtmlir-ptxas-") as tmp:
        src, out = Path(tmp, f"{name}.ptx"), Path(tmp, f"{name}.cubin")
        src.write_text(ptx)
        proc = subprocess.run([ptxas, f"--gpu-name={arch}", "-O3", str(src), "-o", str(out)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            message = (proc.stderr or proc.stdout).strip().replace(str(src), f"{name}.ptx")
            raise VtmlirError(f"error: ptxas rejected kernel {name} for {arch}:\n{message}")
        return out.read_bytes()


@dataclass(frozen=True)
class KernelResources:
    """What `ptxas -v` reports for one kernel entry on one architecture."""

    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    barriers: int

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


# ptxas's own `-v` lines (its output format, not IR): "Used 90 registers, used 1 barriers, 29184 bytes
# smem, ..." and "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads".
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def resource_usage(ptx: str, arch: str = "sm_80", name: str = "kernel") -> KernelResources:
    """Assemble with `ptxas -v` and read back the kernel's registers, shared memory, stack and spills
    (a module with one entry, as each of the CUDA backend's kernels is)."""
    ptxas = find_ptxas()
    with tempfile.TemporaryDirectory(prefix="vtmlir-ptxas-") as tmp:
        src = Path(tmp, f"{name}.ptx")
        src.write_text(ptx)
        proc = subprocess.run([ptxas, "-v", f"--gpu-name={arch}", "-O3", str(src), "-o", str(Path(tmp, "out.cubin"))],
                              capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise VtmlirError(f"error: ptxas rejected kernel {name} for {arch}:\n{text.strip()}")
    used, frame = _USED.search(text), _FRAME.search(text)
    if used is None or frame is None:
        raise VtmlirError(f"error: no resource usage in ptxas -v output for kernel {name}:\n{text.strip()}")
    return KernelResources(int(used.group(1)), int(used.group(3) or 0), int(frame.group(1)), int(frame.group(2)),
                           int(frame.group(3)), int(used.group(2) or 0))
