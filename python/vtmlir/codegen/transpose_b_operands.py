"""`codegen-transpose-b-operands`: a contraction's B operand laid out with its vector dimension innermost.

The contraction schedule runs its vectors along C's contiguous dimension n, reading B's rows. A
Linear layer's weight is `W[n, k]` (`x @ W^T`): its contiguous dimension is k, so every vector of B
would be a strided gather, in the packed panel too (the packing copy keeps the layout). This pass
gives such a contraction a B whose innermost dimension is n, the other dimensions in their order:

- a constant B (a weight: `memref.get_global` of a constant global, possibly reshaped) is
  transposed once, at compile time, into a new constant global (oneDNN and IREE pre-pack weights
  the same way);
- any other B (attention's K in `Q @ K^T`) is copied, transposed, into a new buffer by a
  data-movement kernel before the contraction (N·K elements moved for M·N·K multiply-adds).

The contraction reads the same values and sums them in the same order: results are bitwise those of
the untransposed kernel.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import linalg, memref

from ..ir_constants import elements_array
from ..passes.registry import Pass, register_pass
from .bodies import iterator_attr
from .kernels import KernelKind, classify, rewrite_generics

_RESHAPES = ("memref.expand_shape", "memref.collapse_shape")


def _is_identity_layout(t: ir.MemRefType) -> bool:
    strides, offset = t.get_strides_and_offset()
    expected, size = [], 1
    for extent in reversed(list(t.shape)):
        expected.insert(0, size)
        size *= extent
    return offset == 0 and list(strides) == expected


def _constant_value(value, symbols) -> np.ndarray | None:
    """The value of `value` when it is a constant global read whole (possibly reshaped), else None."""
    t = value.type
    if not isinstance(t, ir.MemRefType) or not t.has_static_shape or not _is_identity_layout(t):
        return None
    if isinstance(value, ir.BlockArgument):
        return None
    op = value.owner.operation  # (the op view of memref.get_global has a `name` attribute of its own)
    if op.name in _RESHAPES:
        source = _constant_value(op.operands[0], symbols)
        return None if source is None else source.reshape(list(t.shape))
    if op.name != "memref.get_global":
        return None
    name = ir.FlatSymbolRefAttr(op.attributes["name"]).value
    glob = symbols.get(name)
    if glob is None or "constant" not in glob.attributes or "initial_value" not in glob.attributes:
        return None
    return elements_array(glob.attributes["initial_value"])


def _symbol_table(module_op) -> dict[str, ir.Operation]:
    return {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
            for op in module_op.regions[0].blocks[0].operations if "sym_name" in op.attributes}


def _new_global(module_op, symbols, base: str, data: np.ndarray, element_type) -> str:
    name, i = f"{base}_transposed", 0
    while name in symbols:
        i += 1
        name = f"{base}_transposed_{i}"
    mtype = ir.MemRefType.get(list(data.shape), element_type)
    ttype = ir.RankedTensorType.get(list(data.shape), element_type)
    attr = ir.DenseResourceElementsAttr.get_from_buffer(np.ascontiguousarray(data), name, ttype)
    with ir.InsertionPoint.at_block_begin(module_op.regions[0].blocks[0]):
        glob = memref.GlobalOp(name, ir.TypeAttr.get(mtype), sym_visibility="private", initial_value=attr,
                               constant=True, alignment=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64))
    symbols[name] = glob.operation
    return name


def transpose_b_operand(op, module_op, symbols, folded: set[str] | None = None) -> bool:
    """Give one contraction (`op`, a linalg.generic on memrefs) a B with n innermost. The names of
    the constant globals transposed at compile time are added to `folded`."""
    kernel = classify(op)
    if kernel.kind is not KernelKind.CONTRACTION or not kernel.b_transposed:
        return False
    op = op.operation
    b = kernel.b_operand
    value, bmap = op.operands[b], kernel.maps[b]
    results = list(bmap.results)
    position = next(i for i, e in enumerate(results) if isinstance(e, ir.AffineDimExpr) and e.position == kernel.n[-1])
    perm = [i for i in range(len(results)) if i != position] + [position]
    new_map = ir.AffineMap.get(bmap.n_dims, bmap.n_symbols, [results[i] for i in perm])
    source_type = ir.MemRefType(value.type)
    shape = [source_type.shape[i] for i in perm]
    with op.location:
        data = _constant_value(value, symbols)
        if data is not None:
            base = ir.FlatSymbolRefAttr(_root_global(value).attributes["name"]).value
            if folded is not None:
                folded.add(base)
            name = _new_global(module_op, symbols, base, data.transpose(perm), source_type.element_type)
            with ir.InsertionPoint(op):
                new_value = memref.GetGlobalOp(ir.MemRefType.get(shape, source_type.element_type), name).result
        else:
            new_value = _transposed_copy(op, value, perm, shape, source_type.element_type)
    op.operands[b] = new_value
    if data is not None:
        _erase_if_unused(value)
    maps = list(kernel.maps)
    maps[b] = new_map
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    return True


def _root_global(value):
    op = value.owner.operation
    while op.name in _RESHAPES:
        op = op.operands[0].owner.operation
    return op


def _transposed_copy(op, value, perm: list[int], shape: list[int], element_type) -> ir.Value:
    """A buffer holding `value` with its dimensions in the order `perm`, written by a copy kernel
    before `op` and freed after it."""
    rank = len(perm)
    # The copy iterates over the new buffer: its dimension j is the source's dimension perm[j].
    source_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(perm.index(p)) for p in range(rank)])
    with ir.InsertionPoint(op):
        buffer = memref.AllocOp(ir.MemRefType.get(shape, element_type), [], [], alignment=64).result
        copy = linalg.GenericOp([], [value], [buffer],
                                ir.ArrayAttr.get([ir.AffineMapAttr.get(source_map),
                                                  ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                                ir.ArrayAttr.get([iterator_attr(op.context, "parallel")] * rank))
        body = copy.regions[0].blocks.append(element_type, element_type)
        with ir.InsertionPoint(body):
            linalg.YieldOp([body.arguments[0]])
    with ir.InsertionPoint.after(op):
        memref.DeallocOp(buffer)
    return buffer


def _erase_if_unused(value) -> None:
    """Erase the reads of a weight (get_global and reshapes) that nothing uses any more."""
    while not isinstance(value, ir.BlockArgument) and not list(value.uses):
        op = value.owner.operation
        if op.name not in _RESHAPES and op.name != "memref.get_global":
            return
        source = op.operands[0] if op.name in _RESHAPES else None
        op.erase()
        if source is None:
            return
        value = source


def transpose_b_operands(module_op) -> int:
    """Transpose the B operand of every contraction that reads it along k; returns how many. A
    weight global that nothing reads untransposed any more is erased (the JIT would keep it)."""
    symbols = _symbol_table(module_op)
    folded: set[str] = set()
    count = rewrite_generics(module_op, lambda op: transpose_b_operand(op, module_op, symbols, folded))
    read = set()

    def visit(op):
        if op.name == "memref.get_global":
            read.add(ir.FlatSymbolRefAttr(op.attributes["name"]).value)
        return ir.WalkResult.ADVANCE

    if folded:
        module_op.walk(visit)
    for name in folded - read:
        symbols.pop(name).erase()
    return count


@register_pass
class TransposeBOperands(Pass):
    name = "codegen-transpose-b-operands"
    summary = "Give contractions a B operand whose innermost dimension is n (weights transposed at compile time)"

    def run(self, module):
        transpose_b_operands(module)
