"""The DVM virtual machine as one PTX kernel (Fang et al., DVM, §4.3 and Alg. 2: the VM is compiled
once; a program is data).

The MLIR of `native_mlir.build_vm_module(gpu=True)` -- the same interpreter as the native CPU VM --
goes through vtmlir's CUDA path: the stages of `backend.cuda.lower` from ``map-to-gpu`` on (the
``scf.parallel`` over tiles becomes the grid: one thread block per tile, Alg. 2's cores are the
thread blocks), `backend.cuda.ptx` translates the outlined kernel to PTX with llvmlite and
`backend.cuda.ptxas.assemble` checks it. The kernel takes the bytecode, a local-memory buffer of
``tile_count * local_bytes`` bytes in global memory (one slice per block), the argument buffers,
the tile count and ``local_bytes``.

How the kernel is launched is read from the lowered IR, not assumed: `VmLaunch` holds the host
function's arithmetic before its ``gpu.launch_func`` (the grid from the tile count), the launch's
operands (which of ``@dvm_vm_gpu``'s arguments each is) and the kernel's parameter types, so a
change in the outlining's operand order or calling convention changes the launch plan
(`gpu_runtime.LaunchPlan`), not a hard-coded list.

The two linalg-specific stages (``parallel-loops``, ``wrap-serial-code``) are left out: the VM has
no linalg ops, and wrapping its serial helper functions into one-thread kernels would be wrong.
`gpu_runtime.py` builds a kernel's launch plan on the host and launches it through cuda-python.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import llvm

from ..backend.cuda.lower import DEFAULT_STAGES, lower_to_nvvm
from ..backend.cuda.ptx import check_chip, kernel_sources, translate_kernels
from ..backend.cuda.ptxas import assemble
from ..errors import VtmlirError
from .native_mlir import build_vm_module

#: CUDA lowering stages the VM goes through (see the module docstring)
SKIPPED_STAGES = ("parallel-loops", "wrap-serial-code")


@dataclass(frozen=True)
class VmPtx:
    """The VM's kernel for one chip: entry name, PTX text and the IR of every lowering stage."""

    chip: str
    kernel: str
    ptx: str
    stages: dict
    launch: VmLaunch

    def assemble(self, arch: str | None = None) -> bytes:
        """ptxas (from nvidia-cuda-nvcc) for `arch` (default: the chip it was generated for); cached
        per PTX and arch (≈10 s each: every dynamic CUDA compile assembles the VM for its chip)."""
        return _assemble(self.ptx, arch or self.chip, self.kernel)


@functools.lru_cache(maxsize=8)
def _assemble(ptx: str, arch: str, kernel: str) -> bytes:
    return assemble(ptx, arch, kernel)


@functools.lru_cache(maxsize=None)
def vm_ptx(chip: str = "sm_80") -> VmPtx:
    """The VM lowered through the CUDA path to PTX for `chip` (cached per chip)."""
    check_chip(chip)
    stages = tuple(s for s in DEFAULT_STAGES if s.name not in SKIPPED_STAGES)
    with ir.Context(), ir.Location.unknown():
        module = build_vm_module(gpu=True)
        lowering = lower_to_nvvm(module, chip=chip, stages=stages)
        sources = kernel_sources(module)
        if len(sources) != 1:
            raise VtmlirError(f"error: the DVM VM lowered to {len(sources)} kernels, expected 1")
        src = sources[0]
        launch = read_launch(module, src.module_name, src.function_name)
    out = translate_kernels([(src.module_name, src.mlir)], chip=chip)[src.module_name]
    return VmPtx(chip, src.function_name, out["ptx"], dict(lowering.stages), launch)


#: ``@dvm_vm_gpu``'s arguments, in order (`native_mlir.build_vm_module(gpu=True)`)
ENTRY_ARGUMENTS = ("code", "local", "args", "tiles", "local_bytes")
#: the signed-integer host arithmetic `VmLaunch` evaluates (what the lowering of the tile loop's
#: bounds leaves before the launch)
_HOST_ARITH = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.maxsi": max,
    "arith.minsi": min,
    "arith.floordivsi": lambda a, b: a // b,
    "arith.ceildivsi": lambda a, b: -(-a // b),
    "arith.divsi": lambda a, b: abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1),
}
_CMPI = {0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: a < b, 3: lambda a, b: a <= b,
         4: lambda a, b: a > b, 5: lambda a, b: a >= b}


@dataclass(frozen=True)
class VmLaunch:
    """How the host function ``@dvm_vm_gpu`` launches the VM kernel, read from the lowered IR
    (`read_launch`). A reference is ``("arg", name)`` (one of `ENTRY_ARGUMENTS`), ``("const", v)``
    or ``("op", i)`` (the result of ``ops[i]``); ``ops`` are ``(op name, operand refs, predicate)``
    in order. ``operands`` are the launch's kernel operands: ``("memref", ref)`` (a 1-d memref
    argument: five kernel parameters, allocated and aligned pointer, offset, size, stride) or
    ``("scalar", ref)`` (one i64); ``param_types`` the kernel's `llvm.func` parameters ("ptr" or
    "i64"), checked against that expansion when read."""

    module: str
    function: str
    ops: tuple
    grid: tuple
    block: tuple
    operands: tuple
    param_types: tuple

    def evaluate(self, tiles: int, local_bytes: int) -> tuple:
        """(grid, block, operand values) for a program of `tiles` tiles and `local_bytes` bytes of
        local memory per tile: the host arithmetic run on those; a memref operand's value is its
        entry argument's name."""
        env = {"tiles": tiles, "local_bytes": local_bytes}
        results: list = []

        def value(ref):
            kind, v = ref
            if kind == "const":
                return v
            if kind == "op":
                return results[v]
            return env[v]

        for name, refs, predicate in self.ops:
            args = [value(r) for r in refs]
            if name == "arith.cmpi":
                results.append(_CMPI[predicate](*args))
            elif name == "arith.select":
                results.append(args[1] if args[0] else args[2])
            else:
                results.append(_HOST_ARITH[name](*args))
        grid = tuple(int(value(r)) for r in self.grid)
        block = tuple(int(value(r)) for r in self.block)
        operands = [ref[1] if kind == "memref" else int(value(ref)) for kind, ref in self.operands]
        return grid, block, operands


def read_launch(module: ir.Module, kernel_module: str, kernel: str) -> VmLaunch:
    """`VmLaunch` of the lowered VM module: the host function ``@dvm_vm_gpu`` must hold integer
    arithmetic on its arguments and one ``gpu.launch_func`` of `kernel_module`::`kernel`."""
    host = gpu_module = None
    for op in module.body.operations:
        name = op.operation.name
        if name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "dvm_vm_gpu":
            host = op
        elif name == "gpu.module" and ir.StringAttr(op.attributes["sym_name"]).value == kernel_module:
            gpu_module = op
    if host is None or gpu_module is None:
        raise VtmlirError("error: the lowered DVM VM has no host function @dvm_vm_gpu or no kernel module "
                          f"@{kernel_module}")
    block = host.regions[0].blocks[0]
    refs = {arg: ("arg", name) for arg, name in zip(block.arguments, ENTRY_ARGUMENTS)}
    ops, launch = [], None
    for op in block.operations:
        op = op.operation
        if op.name == "arith.constant":
            refs[op.results[0]] = ("const", ir.IntegerAttr(op.attributes["value"]).value)
        elif op.name in _HOST_ARITH or op.name in ("arith.cmpi", "arith.select"):
            predicate = ir.IntegerAttr(op.attributes["predicate"]).value if op.name == "arith.cmpi" else None
            if predicate is not None and predicate not in _CMPI:
                raise VtmlirError(f"error: @dvm_vm_gpu: unsigned comparison (predicate {predicate}) on the host")
            ops.append((op.name, tuple(_ref(refs, v, op) for v in op.operands), predicate))
            refs[op.results[0]] = ("op", len(ops) - 1)
        elif op.name == "gpu.launch_func":
            if launch is not None:
                raise VtmlirError("error: @dvm_vm_gpu launches more than one kernel")
            launch = op.opview
        elif op.name != "func.return":
            raise VtmlirError(f"error: @dvm_vm_gpu: unexpected host op '{op.name}'")
    if launch is None:
        raise VtmlirError("error: @dvm_vm_gpu launches no kernel")
    if len(launch.asyncDependencies) or launch.dynamicSharedMemorySize is not None:
        raise VtmlirError("error: @dvm_vm_gpu: async or dynamic-shared-memory launch")
    operands = []
    for v in launch.kernelOperands:
        if isinstance(v.type, ir.MemRefType):
            if v.type.rank != 1:
                raise VtmlirError(f"error: @dvm_vm_gpu passes a memref of rank {v.type.rank}")
            operands.append(("memref", _ref(refs, v, launch)))
        elif isinstance(v.type, ir.IndexType) or (isinstance(v.type, ir.IntegerType) and v.type.width == 64):
            operands.append(("scalar", _ref(refs, v, launch)))
        else:
            raise VtmlirError(f"error: @dvm_vm_gpu passes a kernel operand of type {v.type}")
    params = None
    for op in gpu_module.regions[0].blocks[0].operations:
        if op.operation.name == "llvm.func" and ir.StringAttr(op.attributes["sym_name"]).value == kernel:
            params = tuple("ptr" if isinstance(a.type.maybe_downcast(), llvm.PointerType) else str(a.type)
                           for a in op.regions[0].blocks[0].arguments)
    if params is None:
        raise VtmlirError(f"error: the DVM kernel @{kernel_module}::@{kernel} is not an llvm.func")
    expanded = tuple(t for kind, _ in operands
                     for t in (("ptr", "ptr", "i64", "i64", "i64") if kind == "memref" else ("i64",)))
    if expanded != params:
        raise VtmlirError(f"error: the DVM kernel takes ({', '.join(params)}) but its launch passes "
                          f"({', '.join(expanded)})")
    grid = tuple(_ref(refs, v, launch) for v in (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ))
    block_size = tuple(_ref(refs, v, launch) for v in (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ))
    return VmLaunch(kernel_module, kernel, tuple(ops), grid, block_size, tuple(operands), params)


def _ref(refs: dict, value, op):
    ref = refs.get(value)
    if ref is None:
        raise VtmlirError(f"error: @dvm_vm_gpu: an operand of '{op.operation.name}' is not computed on the host "
                          "from the tile count and local bytes")
    return ref
