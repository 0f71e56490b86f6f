"""`subbyte-pack`: pack constant low-bit weights of matmuls at compile time (Tilus §6.1, Fig. 8).

For every `linalg.matmul` whose right operand B [K, N] is a quantised weight (recognize.py: codes of
an n-bit type held in a packed `i8` constant, a conversion, per-group scales / zero points — what a
`vtmlir.quantize`d model imports to), the whole constant dequantisation subgraph (dozens of
elementwise generics, slices, a concat, a transpose) is replaced by

    %packed = arith.constant dense<...> : tensor<Bxi8>          // compact, no bit gaps (§6.1)
    %codes  = "lowbit.unpack"(%packed) {dtype = "i3", position = affine_map<(d0, d1) -> (...)>,
                tile_layout = ""} : (tensor<Bxi8>) -> tensor<KxNxi3>   // the sub-byte tensor
    %w = linalg.generic ins(%codes, %scales, ...) {lowbit.dequantize = "i3"}  // one generic
           ^bb0(%c: i3, %s: f32, %o: f32):
             %v = arith.sitofp %c : i3 to f32 {lowbit.value}   // conversion (extf for f4E2M1FN...)
             ... the imported dequantisation bodies, cloned (bit-identical) ...
    linalg.matmul ins(%x, %w)

`%codes` is the logical sub-byte tensor (builtin element type where MLIR has one: `iN`, `f8E4M3FN`,
`f6E3M2FN`, `f4E2M1FN`, ...; `iN` codes for the float splits MLIR has no type for; the
`lowbit` dialect, dialects/lowbit.py); `lowbit.unpack` records where element (k, n) lives: stream
position `position(k, n)` (code at stream bits
[pos·n, pos·n + n), storage.py). Scales / zero points are compacted to [N, K / G] and read through
`(k, n) -> (n, k floordiv G)`.

Weight re-layout (Fig. 8). The position map is derived from the register layout of the consuming
matmul's weight tile (option `tile-layout`, a `vtmlir.dialects.register_layout` expression over the
tile's (k, n)): tiles are ordered n-tile-major, and inside a tile thread t's m registers are
consecutive, `pos = tile · (Kt·Nt) + t · m + i` with (t, i) = layout⁻¹(k mod Kt, n mod Nt) — so each
thread's codes are one contiguous run of m·n bits, loadable with one vector load. The default,
`local(K, 1)`, is the CPU loop nest's view (one output column reads its K codes in order): the
plain [N, K] order. For an mma.m16n8k16 B fragment use
`local(2, 1).column_spatial(4, 8).local(2, 1)` (16 x 8, 32 threads x 4 registers).

`subbyte-lower` must follow: it turns the sub-byte tensor into byte loads, shift/mask/or and the
conversion, fused into the matmul. One slack byte follows the data when a code can span two bytes
(8 mod n != 0), so the two-byte window of the last code stays in bounds.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

from ..dialects.vt import lowbit_mlir_type
from ..dialects.lowbit import DEQUANTIZE_ATTR, VALUE_ATTR, UnpackOp
from ..dialects.register_layout import local, parse_register_layout
from ..ir_utils import walk_ops
from ..passes.registry import Option, Pass, PassFailure, register_pass, report_option
from ..ir_constants import make_constant
from .evaluate import ConstantEvaluator, EvaluationError, affine_eval
from .recognize import NotQuantized, QuantizedOperand, backward_slice, recognize_weight
from ..dialects.lowbit_storage import pack_bits



def position_map(k: int, n: int, tile_layout: str = "") -> ir.AffineMap:
    """The weight re-layout `(d0 = k, d1 = n) -> stream position` derived from a tile layout (built
    in the current context)."""
    layout = parse_register_layout(tile_layout) if tile_layout else local(k, 1)
    if layout.rank != 2:
        raise PassFailure(f"subbyte-pack: tile-layout {tile_layout!r} has rank {layout.rank}, expected 2 (k, n)")
    kt, nt = layout.shape
    if k % kt or n % nt:
        raise PassFailure(f"subbyte-pack: the {k}x{n} weight is not a whole number of {kt}x{nt} tiles "
                          f"of tile-layout {tile_layout!r}")
    d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
    t, i = layout.locate_affine([d0 if kt == k else d0 % kt, d1 if nt == n else d1 % nt])
    size = kt * nt
    pos = ir.AffineConstantExpr.get(0)
    if nt != n:  # tiles n-tile-major
        pos = pos + ir.AffineExpr.get_floor_div(d1, nt) * ((k // kt) * size)
    if kt != k:
        pos = pos + ir.AffineExpr.get_floor_div(d0, kt) * size
    return ir.AffineMap.get(2, 0, [pos + t * layout.local_size + i])


def element_type(q: QuantizedOperand) -> ir.Type:
    """The sub-byte tensor's element type: the builtin float where MLIR has one, else `iN` codes."""
    if q.dtype is not None and q.dtype.is_float and q.dtype.mlir_builtin_name:
        return lowbit_mlir_type(q.dtype)
    return ir.IntegerType.get_signless(q.bits)


@register_pass
class SubbytePack(Pass):
    name = "subbyte-pack"
    summary = "Pack constant low-bit matmul weights into compact re-laid-out i8 storage (Tilus §6.1, Fig. 8)"
    description = ("Recognises quantised weights (codes + conversion + per-group scales) by evaluating "
                   "their constant subgraph and replaces it with a packed constant, a sub-byte tensor view "
                   "and one dequantisation generic. Run subbyte-lower after it.")
    options = (
        Option("tile-layout", str, "", "register layout of the consuming matmul's weight tile over (k, n), "
               "e.g. 'local(2,1).column_spatial(4,8).local(2,1)'; empty: local(K, 1), the CPU loop order"),
        report_option("one line per packed weight"),
    )

    def run(self, module):
        evaluator = ConstantEvaluator()
        found, dead, seen = [], [], set()
        for matmul in walk_ops(module, "linalg.matmul"):
            try:
                found.append(recognize_weight(matmul, 1, evaluator))
            except (NotQuantized, EvaluationError):  # not a quantised weight: left as it is
                continue
            for op in backward_slice(matmul.operands[1]):  # collected before any edit: hashes stable
                if op not in seen:
                    seen.add(op)
                    dead.append(op)
        lines = []
        for q in found:
            self._rewrite(q)
            k, n = q.codes.shape
            groups = sorted({s.group for st in q.steps for s in st.sides.values()})
            lines.append(f"subbyte-pack: {q.type_name} weight {k}x{n}: {self._last_bytes} bytes packed "
                         f"(fp32: {4 * k * n}), group size {groups}\n")
        _erase_dead(dead)
        self.write_report(module, "".join(lines))

    def _rewrite(self, q: QuantizedOperand) -> None:
        matmul = q.matmul
        k, n = q.codes.shape
        pos_map = position_map(k, n, self.tile_layout)
        grid = list(np.indices((k, n), dtype=np.int64))
        pos = np.broadcast_to(affine_eval(pos_map.results[0], grid), (k, n))
        if not np.array_equal(np.sort(pos.reshape(-1)), np.arange(k * n)):
            raise PassFailure(f"subbyte-pack: tile-layout {self.tile_layout!r} is not a bijection onto the weight",
                              matmul.location)
        stream = np.zeros(k * n, dtype=np.uint8)
        stream[pos.reshape(-1)] = q.codes.reshape(-1)
        packed = pack_bits(stream, q.bits)
        if 8 % q.bits:
            packed = np.concatenate([packed, np.zeros(1, np.uint8)])
        self._last_bytes = packed.size
        i8, f32 = ir.IntegerType.get_signless(8), ir.F32Type.get()
        with ir.InsertionPoint(matmul), matmul.location:
            packed_v = make_constant(packed.view(np.int8), i8)
            etype = element_type(q)
            cast = UnpackOp(packed_v, ir.StringAttr.get(q.type_name), ir.AffineMapAttr.get(pos_map),
                            ir.StringAttr.get(self.tile_layout), result=ir.RankedTensorType.get([k, n], etype))
            table = make_constant(q.table, f32) if q.kind in ("table", "float") and etype == ir.IntegerType.get_signless(q.bits) else None
            d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
            inputs, maps, types = [cast.results[0]], [_map(d0, d1)], [etype]
            side_args = []
            for step in q.steps:
                for i, side in sorted(step.sides.items()):
                    inputs.append(make_constant(side.array, side.element_type))
                    maps.append(_map(d1, ir.AffineExpr.get_floor_div(d0, side.group)))
                    types.append(side.element_type)
                    side_args.append((id(step), i))
            # The element type of the last step's result: a half model's chain ends in a truncf of
            # the f32 weight to f16 (the dequantised weight torch multiplies by).
            out_etype = (ir.RankedTensorType(q.steps[-1].op.results[0].type).element_type if q.steps
                         else q.value_type)
            out_type = ir.RankedTensorType.get([k, n], out_etype)
            empty = tensor.EmptyOp([k, n], out_etype)
            generic = linalg.GenericOp([out_type], inputs, [empty.result],
                                       ir.ArrayAttr.get(maps + [_map(d0, d1)]),
                                       ir.ArrayAttr.get([iterator_type("parallel")] * 2))
            generic.attributes[DEQUANTIZE_ATTR] = ir.StringAttr.get(q.type_name)
            block = generic.regions[0].blocks.append(*types, out_etype)
            with ir.InsertionPoint(block):
                value = _emit_conversion(q, block.arguments[0], etype, table)
                value.owner.attributes[VALUE_ATTR] = ir.UnitAttr.get()
                if value.type != q.value_type:
                    # A half model's decoding table is f16 (the f32 constant holds its values
                    # exactly): the chain after the lookup computes in f16, as the graph did.
                    value = arith.truncf(q.value_type, value)
                arg_of = {key: block.arguments[1 + j] for j, key in enumerate(side_args)}
                for step in q.steps:
                    value = _clone_body(step, value, arg_of)
                linalg.YieldOp([value])
        matmul.operands[1] = generic.results[0]


def _map(*results: ir.AffineExpr) -> ir.AffineMapAttr:
    """``(d0, d1) -> (results)``."""
    return ir.AffineMapAttr.get(ir.AffineMap.get(2, 0, list(results)))


def iterator_type(kind: str) -> ir.Attribute:
    """``#linalg.iterator_type<kind>`` ("parallel" or "reduction") through its attribute builder."""
    return ir.AttrBuilder.get("linalg.IteratorTypeEnum")(getattr(linalg.IteratorType, kind), ir.Context.current)


def _emit_conversion(q: QuantizedOperand, code: ir.Value, etype: ir.Type, table) -> ir.Value:
    f32 = ir.F32Type.get()
    if table is not None:
        index = arith.index_castui(ir.IndexType.get(), code)
        return tensor.extract(table, [index])
    if q.kind == "int":
        return arith.sitofp(f32, code)
    if q.kind == "uint":
        return arith.uitofp(f32, code)
    return arith.extf(f32, code)


def _clone_body(step, value: ir.Value, arg_of) -> ir.Value:
    """Clone the body of a dequantisation step, its path argument bound to `value`."""
    old_block = step.op.regions[0].blocks[0]
    mapping = {old_block.arguments[step.path]: value}
    for i in step.sides:
        mapping[old_block.arguments[i]] = arg_of[(id(step), i)]
    for inner in old_block.operations:
        inner = inner.operation
        if inner.name == "linalg.yield":
            return mapping[inner.operands[0]]
        operands = []
        for v in inner.operands:
            if v not in mapping:
                owner = v.owner
                if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
                    raise PassFailure(f"subbyte-pack: a dequantisation step uses a non-constant outer value "
                                      f"in '{inner.name}'", step.op.location)
                mapping[v] = owner.operation.clone().results[0]
            operands.append(mapping[v])
        new = inner.clone()
        for j, v in enumerate(operands):
            new.operands[j] = v
        for old_r, new_r in zip(inner.results, new.results):
            mapping[old_r] = new_r
    raise PassFailure("subbyte-pack: a dequantisation step has no linalg.yield", step.op.location)


def _erase_dead(ops: list) -> None:
    """Erase ops of replaced weight subgraphs once nothing uses them (users first)."""
    alive = list(ops)
    changed = True
    while changed:
        changed = False
        for j, op in enumerate(alive):
            if op is None:
                continue
            if all(not list(r.uses) for r in op.results) and op.parent is not None and op.parent.name != "linalg.generic":
                alive[j] = None
                op.erase()
                changed = True
