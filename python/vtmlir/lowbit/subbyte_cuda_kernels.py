"""`subbyte-cuda-kernels`: each quantised contraction becomes a launch of a Tilus kernel.

`subbyte-lower` leaves each quantised matmul as one `linalg.generic` marked `lowbit.fused = "<type>"`
(dialects/lowbit.py) whose reduction loop unpacks and dequantises each code. The generic GPU
schedules see a contraction whose B operand is computed in the body and leave it to the naive
mapping (one thread per output walking k). This pass gives it the schedule built for exactly this
product instead: the hand-built Tilus kernels of lowbit/gpu_kernels.py (docs/lowbit.md "GPU
kernels"), chosen by the mma rule of lowbit/mma_rule.py:

1. The weight is read back from the kernel's constants: the packed codes (the bit position of each
   code is the left side of the packed-byte map `(pos * bits) floordiv 8`, evaluated over (n, k)),
   the scales and zero points (their maps evaluated over (n, k); the group size is the largest
   divisor of K over whose blocks both are constant), the type from the `lowbit.fused` mark. The
   body's shape is checked: `out + x * w` with w = `(code - zero) * scale` or `code * scale` (casts
   between f16 and f32 passed through).
2. The kernel: `mma_kernel` (mma.sync m16n8k16, packed B tiles staged in shared memory) where the
   mma rule holds (`mma_refusal`: type exact in f16, group % 16, M % 16, N % 8, K % 16) and the
   activations are f16 -- or f32 where the user allowed reduced precision (`allow_tf32`, the
   contraction schedule's option: the activations are then rounded to f16); `fma_kernel` (f32 FMA,
   f32 or f16 activations read as they are) otherwise, where K % 4 = 0. The codes are re-packed at
   compile time in the kernel's Fig. 8 order (`pack_for_layout`) into a new constant global, the
   scales and zero points become f32 [N, K / group] globals; the kernel is built with the op
   builders in its own `gpu.module` and the generic is replaced by a `gpu.launch_func` on the
   kernel's grid and block, the contraction's output as y (the kernel adds to it: the linalg
   contraction's initial value -- unless the kernel right before only fills y with +0.0: that fill
   goes and the kernel writes y). The old constants go once nothing reads them.
3. The launch carries `codegen.launch_plan` (codegen/gpu/launch_plans.py), a dictionary (schedule `tilus-mma` or `tilus-fma`, why,
   the tiling, threads, blocks, flops, bytes, shared bytes, a description) from which the CUDA
   lowering makes the kernel's plan and report row (backend/cuda/lower.py). A quantised contraction
   neither kernel takes keeps its generic (today's naive mapping) and gets `codegen.tilus_refusal`
   saying why, which the report shows.

Numerics: f16 models (f16 activations) compute with the exact dequantised weight, f32 products
and sums (the graph rounds the dequantised weight to f16 first, as torch's QuantizedLinear does:
results differ by f16 rounding, |dy| <~ 2^-11 sum |x w|). f32 models on the FMA kernel equal the
graph's f32 result up to the order of the f32 additions; on mma (allow_tf32 only) x is rounded to
f16 (TF32's 10-bit mantissa, f16's exponent range).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, gpu, memref

from ..codegen.gpu.schedules import resolve_gpu_schedules
from ..codegen.gpu.target import gpu_target
from ..codegen.gpu.launch_plans import LAUNCH_ATTR, REFUSAL_ATTR, launch_plan_attr, zero_fill_before
from ..codegen.weights import Globals
from ..dialects.lowbit import FUSED_ATTR
from ..dialects.lowbit_types import LowBitType, parse_dtype
from ..ir_utils import walk_ops
from ..passes.registry import Option, Pass, register_pass
from .evaluate import affine_eval
from .gpu_kernels import (FMA_TILE_K, MMA_B_LAYOUT, MMA_TILE_K, MMA_TILE_M, MMA_TILE_N, fma_b_layout,
                                   fma_kernel, mma_kernel)
from .mma_rule import largest_divisor, mma_refusal, pack_for_layout
from .quantize import QuantizedWeight

SCHEDULES = ("tilus-mma", "tilus-fma")


class NotTilus(Exception):
    """Why a quantised contraction does not fit the Tilus kernels."""


@dataclass
class QuantisedContraction:
    """y[M, N] (+)= x[M, K] @ W'[N, K]^T read off a `lowbit.fused` generic."""

    op: ir.Operation
    weight: QuantizedWeight
    x: ir.Value
    y: ir.Value
    consts: list  # the weight's constant operands (their globals go once unread)

    @property
    def shape(self) -> tuple[int, int, int]:
        m, k = ir.MemRefType(self.x.type).shape
        return m, ir.MemRefType(self.y.type).shape[1], k


def _owner(value):
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def _through_casts(value, casts=("arith.extf", "arith.truncf")):
    """`value` with f16 <-> f32 casts (`casts`) stripped."""
    while True:
        op = _owner(value)
        if op is None or op.name not in casts:
            return value
        value = op.operands[0]


def _argument(value, block) -> int | None:
    """The block argument `value` is, widened (extf: exact) or not; None for anything else. (The
    kernels read activations, scales and zero points as they are: a rounding of one in the body
    would not be theirs.)"""
    value = _through_casts(value, ("arith.extf",))
    if isinstance(value, ir.BlockArgument) and value.owner == block:
        return value.arg_number
    return None


def _binary(value, name: str):
    """The operands of the `name` op that makes `value` (past f16 <-> f32 casts: the f16 rounding of
    the dequantised weight or of the sums, which the kernels leave out), or None."""
    op = _owner(_through_casts(value))
    return op.operands if op is not None and op.name == name else None


def _per_nk(maps, index: int, n: int, k: int) -> list[np.ndarray]:
    """The memref indices the operand `index` reads at (m = 0, n, k), one array [N, K] per dim."""
    grid = [np.zeros((n, k), np.int64), *np.indices((n, k), dtype=np.int64)]
    return [np.broadcast_to(affine_eval(e, grid), (n, k)) for e in maps[index].results]


def _group(*arrays: np.ndarray) -> int:
    """The largest divisor G of K such that every array [N, K] is constant over each block of G
    along K (bit for bit)."""
    k = arrays[0].shape[1]
    found = k
    for a in arrays:
        bits = np.ascontiguousarray(a, np.float32).view(np.uint32)
        g = next(d for d in sorted((d for d in range(1, k + 1) if k % d == 0), reverse=True)
                 if np.array_equal(bits.reshape(a.shape[0], k // d, d),
                                   np.broadcast_to(bits.reshape(a.shape[0], k // d, d)[:, :, :1],
                                                   (a.shape[0], k // d, d))))
        found = gcd(found, g)
    return found


def read_contraction(op, globals_: Globals) -> QuantisedContraction:
    """The quantised contraction of a `lowbit.fused` generic (kernel level), or `NotTilus`."""
    name = ir.StringAttr(op.attributes[FUSED_ATTR]).value
    try:
        dtype: LowBitType = parse_dtype(name)
    except (ValueError, KeyError) as err:
        raise NotTilus(f"type {name} is not one the Tilus kernels convert ({err})") from None
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    n_in = len(op.opview.inputs)
    operands = list(op.operands)
    if len(maps) != n_in + 1 or maps[0].n_dims != 3:
        raise NotTilus("not a contraction over (m, n, k)")
    d = [ir.AffineExpr.get_dim(i) for i in range(3)]
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    if body[-1].name != "linalg.yield":
        raise NotTilus("no linalg.yield")
    # out + x * w
    acc = _binary(body[-1].operands[0], "arith.addf")
    out_arg = len(operands) - 1
    if acc is None or out_arg not in [_argument(v, block) for v in acc]:
        raise NotTilus("the body is not out + x * w")
    product = _binary(acc[1] if _argument(acc[0], block) == out_arg else acc[0], "arith.mulf")
    if product is None:
        raise NotTilus("the body is not out + x * w")
    x_side = next((j for j in (0, 1) if _argument(product[j], block) is not None
                   and maps[_argument(product[j], block)] == ir.AffineMap.get(3, 0, [d[0], d[2]])), None)
    if x_side is None:
        raise NotTilus("no activation operand read at (m, k)")
    x_index = _argument(product[x_side], block)
    weight = _binary(product[1 - x_side], "arith.mulf")
    if weight is None:
        raise NotTilus("the weight is not value * scale")
    s_side = next((j for j in (0, 1) if _argument(weight[j], block) is not None), None)
    if s_side is None:
        raise NotTilus("the weight is not value * scale")
    s_index = _argument(weight[s_side], block)
    shifted = _binary(weight[1 - s_side], "arith.subf")
    z_index = _argument(shifted[1], block) if shifted is not None else None
    if shifted is not None and z_index is None:
        raise NotTilus("the zero point is not an operand")
    if maps[-1] != ir.AffineMap.get(3, 0, [d[0], d[1]]):
        raise NotTilus("the output is not y[m, n]")
    x, y = operands[x_index], operands[-1]
    xt, yt = ir.MemRefType(x.type), ir.MemRefType(y.type)
    if not (xt.has_static_shape and yt.has_static_shape):
        raise NotTilus("dynamic shapes")
    if xt.get_strides_and_offset()[0][-1] != 1 or yt.get_strides_and_offset()[0][-1] != 1:
        raise NotTilus("x or y is not contiguous along its rows")
    if not any(isinstance(xt.element_type, t) for t in (ir.F16Type, ir.F32Type)) \
            or not any(isinstance(yt.element_type, t) for t in (ir.F16Type, ir.F32Type)):
        raise NotTilus(f"activations {xt.element_type}, output {yt.element_type} (f16 or f32 only)")
    m, k = xt.shape
    n = yt.shape[1]
    # The packed codes: the i8 operand whose map is (bit position) floordiv 8.
    # (The second byte of codes that span two, `... floordiv 8 + 1`, is not the one; 8-bit codes'
    # map may have folded to the byte position itself.)
    bitpos, packed_index = None, None
    for i in range(n_in):
        if i in (x_index, s_index, z_index) or not isinstance(ir.MemRefType(operands[i].type).element_type,
                                                                ir.IntegerType) or len(maps[i].results) != 1:
            continue
        expr = maps[i].results[0]
        if isinstance(expr, ir.AffineFloorDivExpr) and isinstance(expr.rhs, ir.AffineConstantExpr) \
                and expr.rhs.value == 8:
            bitpos_expr = expr.lhs
        elif dtype.bits == 8:
            bitpos_expr = expr * 8
        else:
            continue
        grid = [np.zeros((n, k), np.int64), *np.indices((n, k), dtype=np.int64)]
        bitpos = np.broadcast_to(affine_eval(bitpos_expr, grid), (n, k))
        packed_index = i
        break
    if packed_index is None:
        raise NotTilus("no packed-code operand read at (bit position) floordiv 8")
    values = {i: globals_.constant_value(operands[i]) for i in (packed_index, s_index, z_index) if i is not None}
    if any(v is None for v in values.values()):
        raise NotTilus("the codes, scales or zero points are not constants")
    packed = values[packed_index].reshape(-1).view(np.uint8).astype(np.uint16)
    byte, shift = bitpos // 8, (bitpos % 8).astype(np.uint16)
    word = packed[byte] | (np.where(byte + 1 < packed.size, packed[np.minimum(byte + 1, packed.size - 1)], 0) << 8)
    codes = ((word >> shift) & ((1 << dtype.bits) - 1)).astype(np.uint8)
    scales_nk = values[s_index][tuple(_per_nk(maps, s_index, n, k))].astype(np.float32)
    zeros_nk = None if z_index is None else values[z_index][tuple(_per_nk(maps, z_index, n, k))].astype(np.float32)
    group = _group(scales_nk, *([zeros_nk] if zeros_nk is not None else []))
    qweight = QuantizedWeight(dtype, group, codes, np.ascontiguousarray(scales_nk[:, ::group]),
                              None if zeros_nk is None else np.ascontiguousarray(zeros_nk[:, ::group]))
    consts = [operands[i] for i in values]
    return QuantisedContraction(op, qweight, x, y, consts)


@dataclass(frozen=True)
class TilusChoice:
    schedule: str              # "tilus-mma" or "tilus-fma"
    reason: str                # the mma rule's verdict
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    layout: str                # the B-tile register layout the codes are packed for
    tiles: tuple[int, int]     # mma: warps (m, n) per block; fma: rows, columns per block
    shared_bytes: int

    def describe(self) -> str:
        if self.schedule == "tilus-mma":
            wm, wn = self.tiles
            return (f"mma.sync m16n8k16, {wm}x{wn} warps per block, packed B tiles staged in "
                    f"{self.shared_bytes} B of shared memory; {self.reason}")
        tm, tn = self.tiles
        return f"f32 FMA, {tn} threads x {tm} rows per block; mma: {self.reason}"


def choose(contraction: QuantisedContraction, allow_f16_activations: bool, chip: str) -> TilusChoice:
    """The Tilus kernel for `contraction`: mma where the rule holds (and the activations are f16 or
    may be rounded to f16), FMA otherwise (K % 4 = 0); `NotTilus` where neither fits."""
    m, n, k = contraction.shape
    w = contraction.weight
    refusal = mma_refusal(w, m)
    f32_x = isinstance(ir.MemRefType(contraction.x.type).element_type, ir.F32Type)
    if refusal is None and f32_x and not allow_f16_activations:
        refusal = ("f32 activations: mma.sync would round them to f16 (allow_tf32=True allows reduced-precision "
                   "activations)")
    if refusal is None:
        wm, wn = largest_divisor(m // MMA_TILE_M, 4), largest_divisor(n // MMA_TILE_N, 2)
        stride = MMA_TILE_K * MMA_TILE_N * w.dtype.bits // 8 + 8
        reason = "the mma rule holds" + (" (f32 activations rounded to f16: allow_tf32)" if f32_x else "")
        return TilusChoice("tilus-mma", reason, (n // (MMA_TILE_N * wn), m // (MMA_TILE_M * wm), 1),
                           (32 * wm * wn, 1, 1), MMA_B_LAYOUT, (wm, wn), wn * stride)
    if k % FMA_TILE_K:
        raise NotTilus(f"mma: {refusal}; FMA: needs K % {FMA_TILE_K} == 0, K = {k}")
    tm, tn = largest_divisor(m, 16), largest_divisor(n, 128)
    target = gpu_target(chip)
    sms = target.sms if target is not None else 108
    # Few outputs (a batch-1 matvec): narrower blocks (down to one warp) spread the columns over
    # more SMs; each thread still walks all of K.
    while tn > 32 and n % (tn // 2) == 0 and (n // tn) * (m // tm) < sms:
        tn //= 2
    return TilusChoice("tilus-fma", refusal, (n // tn, m // tm, 1), (tn, 1, 1), fma_b_layout(tn), (tm, tn), 0)


def _global(globals_: Globals, base: str, data: np.ndarray, element_type: ir.Type) -> ir.Value:
    """A `memref.get_global` (at the insertion point) of a new private constant global of `data`."""
    name, i = base, 0
    while name in globals_.symbols:
        i += 1
        name = f"{base}_{i}"
    data = np.ascontiguousarray(data)
    mtype = ir.MemRefType.get(list(data.shape), element_type)
    attr = ir.DenseResourceElementsAttr.get_from_buffer(data, name, ir.RankedTensorType.get(list(data.shape),
                                                                                           element_type))
    with ir.InsertionPoint.at_block_begin(globals_.module_op.regions[0].blocks[0]):
        glob = memref.GlobalOp(name, ir.TypeAttr.get(mtype), sym_visibility="private", initial_value=attr,
                               constant=True, alignment=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64))
    globals_.symbols[name] = glob.operation
    return memref.GetGlobalOp(mtype, name).result


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def lower_contraction(contraction: QuantisedContraction, choice: TilusChoice, globals_: Globals, kid: int,
                      module_op) -> ir.Operation:
    """Replace the contraction's generic by a launch of its Tilus kernel; returns the launch."""
    m, n, k = contraction.shape
    w = contraction.weight
    i8, f32 = ir.IntegerType.get_signless(8), ir.F32Type.get()
    packed = pack_for_layout(w, choice.layout)
    name = f"tilus_{choice.schedule.split('-')[1]}_{w.dtype.name}_{kid}"
    while f"{name}_module" in globals_.symbols:
        name += "_"
    x_type, y_type = ir.MemRefType(contraction.x.type), ir.MemRefType(contraction.y.type)
    fill = zero_fill_before(contraction.op, contraction.y)
    common = dict(x_type=x_type, y_type=y_type, accumulate=fill is None)
    if choice.schedule == "tilus-mma":
        built = mma_kernel(name, w.dtype, m, n, k, w.group_size, packed.size, w.zeros is not None, *choice.tiles,
                           **common)
    else:
        built = fma_kernel(name, w.dtype, m, n, k, w.group_size, packed.size, w.zeros is not None, *choice.tiles,
                           **common)
    body = module_op.regions[0].blocks[0]
    gpu_module = built.body.operations[0].operation
    gpu_module.move_before(body.operations[0])
    globals_.symbols[f"{name}_module"] = gpu_module
    module_op.attributes["gpu.container_module"] = ir.UnitAttr.get()
    op = contraction.op
    with ir.InsertionPoint(op), op.location:
        operands = [contraction.x, _global(globals_, f"{name}_codes", packed.view(np.int8), i8),
                    _global(globals_, f"{name}_scales", w.scales.astype(np.float32), f32)]
        if w.zeros is not None:
            operands.append(_global(globals_, f"{name}_zeros", w.zeros.astype(np.float32), f32))
        operands.append(contraction.y)
        launch = gpu.LaunchFuncOp([f"{name}_module", name], tuple(_index(v) for v in choice.grid),
                                  tuple(_index(v) for v in choice.block), operands)
    x_bytes = m * k * ir.FloatType(x_type.element_type).width // 8
    y_bytes = m * n * ir.FloatType(y_type.element_type).width // 8
    moved = x_bytes + packed.size + 4 * w.scales.size + (4 * w.zeros.size if w.zeros is not None else 0) \
        + y_bytes * (1 if fill is not None else 2)
    threads = choice.block[0] * choice.block[1] * choice.block[2]
    blocks = choice.grid[0] * choice.grid[1] * choice.grid[2]
    launch.attributes[LAUNCH_ATTR] = launch_plan_attr(
        schedule=choice.schedule, detail=choice.describe(),
        description=f"quantised contraction {m}x{n}x{k} ({w.dtype.name}, group {w.group_size})",
        threads=threads, grid=blocks, flops=2 * m * n * k, bytes=moved, shared_bytes=choice.shared_bytes)
    op.erase()
    if fill is not None:
        fill.erase()
    return launch.operation


def subbyte_cuda_kernels(module_op, chip: str = "sm_80", overrides=()) -> list[str]:
    """Replace every `lowbit.fused` contraction the Tilus kernels take by a launch of its kernel; one
    report line per contraction."""
    table = resolve_gpu_schedules(list(overrides))
    contraction_schedule = table.get("contraction")
    allow_f16 = bool(getattr(contraction_schedule, "allow_tf32", False))
    lines = []
    with module_op.context, ir.Location.unknown():
        found = [op for op in walk_ops(module_op, "linalg.generic") if FUSED_ATTR in op.attributes
                 and op.parent is not None and op.parent.operation.name == "func.func"]
        if not found:
            return lines
        globals_ = Globals(module_op)
        for kid, op in enumerate(found):
            try:
                contraction = read_contraction(op, globals_)
                choice = choose(contraction, allow_f16, chip)
            except NotTilus as why:
                op.attributes[REFUSAL_ATTR] = ir.StringAttr.get(str(why))
                lines.append(f"subbyte-cuda-kernels: kept the naive mapping: {why}")
                continue
            for value in contraction.consts:
                owner = _owner(value)
                while owner is not None and owner.name != "memref.get_global":
                    owner = _owner(owner.operands[0])
                if owner is not None:
                    globals_.replaced.add(ir.FlatSymbolRefAttr(owner.attributes["name"]).value)
            lower_contraction(contraction, choice, globals_, kid, module_op)
            lines.append(f"subbyte-cuda-kernels: {contraction.weight.dtype.name} "
                         f"{'x'.join(map(str, contraction.shape))}: {choice.schedule} ({choice.describe()})")
        globals_.erase_unread()
    return lines


@register_pass
class SubbyteCudaKernels(Pass):
    name = "subbyte-cuda-kernels"
    summary = "Replace each quantised contraction (lowbit.fused) by a launch of the Tilus mma.sync or FMA kernel"
    description = (
        "Kernel level (memrefs). The codes are re-packed at compile time in the kernel's Fig. 8 order; mma.sync "
        "where the mma rule holds and the activations are f16 (f32 ones with the contraction schedule's "
        "allow_tf32), f32 FMA otherwise; a contraction neither fits keeps its generic, marked "
        "codegen.tilus_refusal.")
    options = (
        Option("chip", str, "sm_80", "the GPU the kernels are for"),
        Option("schedules", list[str], [], "the GPU schedule overrides (contraction.allow_tf32:true lets f32 "
               "activations be rounded to f16 for mma.sync)"),
    )

    def run(self, module):
        subbyte_cuda_kernels(module, chip=self.chip, overrides=self.schedules)
