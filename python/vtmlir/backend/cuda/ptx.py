"""GPU target level → PTX: each `gpu.module` (NVVM/LLVM dialect) to LLVM IR and PTX text.

The torch-mlir wheel's LLVM has no NVPTX backend, so `gpu-module-to-binary` cannot be used
(docs/design.md §6). Instead each `gpu.module`'s body is re-parsed as a standalone module with the NVPTX
triple, checked to hold only llvm/nvvm ops, translated with `translate_module_to_llvmir`, and turned
into PTX by llvmlite's NVPTX target (libdevice linked when the kernel calls `__nv_*` functions).

The translation runs in a subprocess (`vtmlir.backend.cuda._translate`), one for all kernels of a
module: `translate_module_to_llvmir` segfaults on some bad input, and a crash must end in a
`VtmlirError`, never in the user's process dying.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from torch_mlir import ir

from ...errors import VtmlirError
from ._translate import NVPTX_TRIPLE, offending_op

TRANSLATE_TIMEOUT_S = 600
# The worker process; a list so tests can substitute one that crashes.
TRANSLATE_COMMAND = [sys.executable, "-m", "vtmlir.backend.cuda._translate"]


@dataclass(frozen=True)
class KernelSource:
    """One outlined kernel ready for translation: its `gpu.module` symbol, entry function, MLIR text."""

    module_name: str
    function_name: str
    mlir: str


SUPPORTED_CHIPS = ("sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a")


def check_chip(chip: str) -> None:
    """LLVM silently accepts an unknown `cpu` name and emits PTX for a generic target, so an unknown
    chip is refused up front rather than discovered by ptxas later."""
    if chip not in SUPPORTED_CHIPS:
        raise VtmlirError(f"error: unsupported CUDA chip '{chip}'; supported: {', '.join(SUPPORTED_CHIPS)}")


def ptx_features(chip: str) -> str:
    """PTX ISA version for a chip: 8.0 covers sm_70 … sm_90a (ptxas 13 accepts it for all of them)."""
    check_chip(chip)
    return "+ptx80"


def find_libdevice() -> str | None:
    """libdevice.10.bc from the nvidia-nvvm pip package, or None when it is not installed."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "cu12", "cuda_nvcc", ""):
            candidate = Path(root, sub, "nvvm", "libdevice", "libdevice.10.bc")
            if candidate.is_file():
                return str(candidate)
    return None


def _standalone_text(gpu_module) -> str:
    """The ops of `gpu_module` cloned into a new NVPTX-triple module, printed (for the translation
    subprocess). Printed alone, each kernel's module costs its own size: printing a nested op prints
    it in the scope of its whole top-level module (quadratic over a model's hundreds of kernels)."""
    with gpu_module.context, ir.Location.unknown():
        standalone = ir.Module.create()
        standalone.operation.attributes["llvm.target_triple"] = ir.StringAttr.get(NVPTX_TRIPLE)
        with ir.InsertionPoint(standalone.body):
            for inner in gpu_module.regions[0].blocks[0].operations:
                inner.operation.clone()
        return str(standalone)


def kernel_sources(module: ir.Module) -> list[KernelSource]:
    """Every `gpu.module` of a lowered module as a standalone NVPTX-triple MLIR module.

    Raises a `VtmlirError` naming the op when a kernel still holds anything but llvm/nvvm ops.
    """
    sources = []
    for op in module.body.operations:
        if op.operation.name != "gpu.module":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        body = op.regions[0].blocks[0]
        entries = [ir.StringAttr(f.attributes["sym_name"]).value for f in body.operations
                   if f.operation.name in ("llvm.func", "gpu.func") and "gpu.kernel" in f.attributes]
        if len(entries) != 1:
            raise VtmlirError(f"error: gpu.module @{name} has {len(entries)} kernel functions; expected 1")
        bad = offending_op(op)
        if bad:
            raise VtmlirError(f"error: kernel {name}: op {bad} is not in the LLVM or NVVM dialect; "
                              "the GPU lowering left it behind, so it cannot be translated to LLVM IR")
        sources.append(KernelSource(name, entries[0], _standalone_text(op)))
    return sources


def check_llvm_only(mlir_text: str, kernel: str = "<module>") -> None:
    """Refuse (with a `VtmlirError`) a module that `translate_module_to_llvmir` must not see."""
    with ir.Context():
        try:
            module = ir.Module.parse(mlir_text)
        except ir.MLIRError as err:
            raise VtmlirError(f"error: kernel {kernel}: cannot parse: {err}") from None
        bad = offending_op(module)
    if bad:
        raise VtmlirError(f"error: kernel {kernel}: op {bad} is not in the LLVM or NVVM dialect; "
                          "the GPU lowering left it behind, so it cannot be translated to LLVM IR")


def translate_kernels(kernels: list[tuple[str, str]], chip: str = "sm_80") -> dict[str, dict[str, str]]:
    """[(name, llvm/nvvm MLIR text)] → {name: {"llvm_ir": ..., "ptx": ...}} in one subprocess.

    Every failure (refused input, a crash of the translation, an LLVM error) is a `VtmlirError`.
    """
    if not kernels:
        return {}
    request = {"chip": chip, "features": ptx_features(chip), "libdevice": find_libdevice(),
               "kernels": [list(k) for k in kernels]}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3])]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        proc = subprocess.run(TRANSLATE_COMMAND,
                              input=json.dumps(request), capture_output=True, text=True,
                              timeout=TRANSLATE_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise VtmlirError(f"error: LLVM translation of {len(kernels)} kernel(s) timed out "
                          f"after {TRANSLATE_TIMEOUT_S} s") from None
    progress = [l for l in proc.stderr.splitlines() if l.startswith("translating ")]
    current = progress[-1].split(" ", 1)[1] if progress else kernels[0][0]
    if proc.returncode < 0 or (proc.returncode != 0 and not proc.stdout.strip()):
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        tail = "\n".join(l for l in proc.stderr.splitlines() if not l.startswith("translating "))[-2000:]
        raise VtmlirError(f"error: kernel {current}: the LLVM translation crashed ({how})"
                          + (f"\n{tail}" if tail else ""))
    reply = json.loads(proc.stdout)
    if "error" in reply:
        raise VtmlirError(f"error: kernel {reply['kernel']}: {reply['error']}")
    return reply["kernels"]
