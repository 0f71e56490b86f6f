"""PTX validation and assembly with `ptxas` from the `nvidia-cuda-nvcc` pip package.

A system ptxas (whatever CUDA toolkit a machine has) is never used: its version, and with it the PTX
ISA and the architectures it accepts, would vary from machine to machine.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import tempfile
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
