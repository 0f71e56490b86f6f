"""bf16 data through upstream's f16 tensor-core conversion, as 16-bit payload.

`convert-vector-to-gpu{use-nvgpu=true}` builds `nvgpu.ldmatrix` / `nvgpu.mma.sync` fragments for
f16 but not for bf16: its fragment table (`nvgpu::getMmaSyncRegisterType`, MMAUtils.cpp) has no bf16
entry, so the first bf16 `vector.transfer_read` feeding a `vector.contract` fails ("failed to
convert op during vector-to-nvgpu conversion"). Everything after it takes bf16: `nvgpu.mma.sync`
verifies with bf16 operands and `convert-nvgpu-to-nvvm` gives `nvvm.mma.sync` with
`multiplicandAPtxType = bf16` (`mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`).

PTX gives m16n8k16 bf16 the fragment layout of f16 (A: four .b32 registers of two elements each, B:
two, C/D: four f32; the same `ldmatrix` loads), so the conversion's work -- which thread holds
which elements, how they are loaded -- is the same for both types: it moves 16-bit values and never
computes with them. `retype_payload` therefore renames the type for the conversion and back:

- *payload* ops (`PAYLOAD_OPS`: memref and vector data movement, loop structure, thread ids,
  `ub.poison`, `arith.select`, nvgpu loads and copies) only move values: their results and their
  regions' block arguments (the kernel's arguments, the loops' iter_args) are retyped `src -> dst`;
- the op the conversion consumes (`vector.contract` on the way in, `nvgpu.mma.sync` on the way
  out, `retyped_compute`) is retyped with its operands;
- every other op computes with the values (`arith.extf` / `arith.truncf` of an epilogue, a constant)
  and keeps its own types: an `arith.bitcast` (the same bits) stands between it and each retyped
  value it uses or defines, so no arithmetic ever sees bf16 bits as f16.

On the way in, the module must hold no `dst` (f16) value at all: then every f16 value on the way
back is one this renaming made or the conversion built from one, and on the way back only payload
ops, `nvgpu.mma.sync` and constants (bit-preserving `arith.bitcast`, folded by canonicalisation) may
hold one -- an op computing on one refuses (`RetypeRefused`). The `arith.bitcast`s of the way in
become `bf16 -> bf16` on the way back and are dropped.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith

# Ops that only move, view or order values, whatever their element type.
PAYLOAD_OPS = frozenset({
    "memref.alloc", "memref.alloca", "memref.dealloc", "memref.subview", "memref.load", "memref.store",
    "memref.cast", "memref.reinterpret_cast", "memref.expand_shape", "memref.collapse_shape", "memref.copy",
    "memref.transpose", "memref.get_global",
    "vector.transfer_read", "vector.transfer_write", "vector.load", "vector.store", "vector.maskedload",
    "vector.maskedstore", "vector.broadcast", "vector.splat", "vector.extract", "vector.insert",
    "vector.extract_strided_slice", "vector.insert_strided_slice", "vector.shape_cast", "vector.transpose",
    "vector.from_elements", "vector.to_elements", "vector.extractelement", "vector.insertelement", "vector.shuffle",
    "scf.for", "scf.if", "scf.yield", "scf.while", "scf.condition", "scf.forall", "scf.forall.in_parallel",
    "scf.execute_region",
    "gpu.barrier", "gpu.return", "gpu.thread_id", "gpu.block_id", "gpu.block_dim", "gpu.grid_dim",
    "gpu.lane_id",
    "ub.poison", "arith.select", "arith.bitcast",
    "nvgpu.ldmatrix", "nvgpu.device_async_copy", "nvgpu.device_async_create_group",
    "nvgpu.device_async_wait",
    "affine.apply", "affine.min", "affine.max",
})


class RetypeRefused(Exception):
    """The kernel holds something `retype_payload` cannot rename without changing what it computes."""


def swap_type(t: ir.Type, src: ir.Type, dst: ir.Type) -> ir.Type:
    """`t` with its element type `src` replaced by `dst` (scalars, vectors, memrefs); others as they are."""
    if t == src:
        return dst
    if isinstance(t, ir.VectorType):
        if any(t.scalable_dims):
            return t
        element = swap_type(t.element_type, src, dst)
        return t if element == t.element_type else ir.VectorType.get(t.shape, element)
    if isinstance(t, ir.MemRefType):
        element = swap_type(t.element_type, src, dst)
        if element == t.element_type:
            return t
        return ir.MemRefType.get(t.shape, element, t.layout, t.memory_space)
    return t


def _all_ops(root) -> list:
    found = []

    def visit(op):
        found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def _attribute_types(attr: ir.Attribute) -> list[ir.Type]:
    if isinstance(attr, ir.TypeAttr):
        return [attr.value]
    if isinstance(attr, ir.ArrayAttr):
        return [t for a in attr for t in _attribute_types(a)]
    try:
        t = attr.type
    except Exception:   # not a typed attribute
        return []
    return [t] if isinstance(t, ir.Type) else []


def _block_arguments(op) -> list:
    return [arg for region in op.regions for block in region.blocks for arg in block.arguments]


def _bitcast(value: ir.Value, to: ir.Type, point: ir.InsertionPoint, location) -> ir.Value:
    with point, location:
        return arith.BitcastOp(to, value).result


def retype_payload(gpu_module, src: ir.Type, dst: ir.Type, retyped_compute: frozenset[str],
                   require_absent: bool) -> int:
    """Rename `src` to `dst` in the payload of `gpu_module` (the module docstring); returns how many
    values were retyped. `retyped_compute`: the ops retyped with their operands although they
    compute (the contraction the conversion takes); `require_absent`: refuse a module already
    holding `dst` (the way in). Raises `RetypeRefused` before changing anything where it cannot."""
    with gpu_module.location:  # types built with a location for their diagnostics
        return _retype(gpu_module, src, dst, retyped_compute, require_absent)


def _retype(gpu_module, src, dst, retyped_compute, require_absent) -> int:
    swap = lambda t: swap_type(t, src, dst)  # noqa: E731
    ops = _all_ops(gpu_module)
    funcs = [op for op in ops if op.name == "gpu.func"]
    body = [op for op in ops if op.name not in ("gpu.module", "gpu.func")]
    if require_absent:
        has_dst = lambda t: swap_type(t, dst, src) != t  # noqa: E731
        values = [v for op in body for v in list(op.results) + _block_arguments(op)]
        values += [a for f in funcs for a in _block_arguments(f)]
        if any(has_dst(v.type) for v in values):
            raise RetypeRefused(f"the kernel holds {dst} values already")
    retyped = lambda op: op.name in PAYLOAD_OPS or op.name in retyped_compute  # noqa: E731
    for op in body:
        if retyped(op) or op.name != "arith.constant":
            # A type in an attribute (a memref.global's) would have to change with the values.
            for name in op.attributes:
                if any(swap(t) != t for t in _attribute_types(op.attributes[name])):
                    raise RetypeRefused(f"'{op.name}' has a {src} attribute '{name}'")
        if not retyped(op):
            if any(swap(a.type) != a.type for a in _block_arguments(op)):
                raise RetypeRefused(f"'{op.name}' has {src} block arguments")
            if not require_absent and op.name != "arith.constant" and \
                    any(swap(v.type) != v.type for v in list(op.operands) + list(op.results)):
                raise RetypeRefused(f"'{op.name}' computes with {src} values made by the conversion")
            for v in list(op.results):
                if swap(v.type) != v.type and not isinstance(v.type, (ir.VectorType, ir.FloatType)):
                    raise RetypeRefused(f"'{op.name}' defines a {v.type} value, which no bitcast takes")
    # Computing ops read retyped values through a bitcast back to their own type (found now,
    # inserted once the producers are retyped).
    reads = [(op, number, operand.type) for op in body if not retyped(op)
             for number, operand in enumerate(op.operands)
             if swap(operand.type) != operand.type and _retyped_owner(operand, retyped)]
    # Computing ops keep their results' types; retyped users read them through a bitcast.
    for op in body:
        if retyped(op):
            continue
        for result in op.results:
            if swap(result.type) == result.type:
                continue
            uses = [(use.owner, use.operand_number) for use in result.uses if retyped(use.owner)]
            if not uses:
                continue
            cast = _bitcast(result, swap(result.type), ir.InsertionPoint.after(op), op.location)
            for owner, number in uses:
                owner.operands[number] = cast
    # The payload retyped in place.
    count = 0
    for op in body:
        if not retyped(op):
            continue
        for value in list(op.results) + _block_arguments(op):
            if swap(value.type) != value.type:
                value.set_type(swap(value.type))
                count += 1
    for func in funcs:
        for arg in _block_arguments(func):
            if swap(arg.type) != arg.type:
                arg.set_type(swap(arg.type))
                count += 1
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([swap(t) for t in ftype.inputs], [swap(t) for t in ftype.results]))
    for op, number, own_type in reads:
        op.operands[number] = _bitcast(op.operands[number], own_type, ir.InsertionPoint(op), op.location)
    # Bitcasts of the way in that are now `t -> t`.
    for op in _all_ops(gpu_module):
        if op.name == "arith.bitcast" and op.operands[0].type == op.results[0].type:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
    return count


def _retyped_owner(value: ir.Value, retyped) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block):
        parent = owner.owner
        return parent.name == "gpu.func" or retyped(parent)
    return retyped(owner)
