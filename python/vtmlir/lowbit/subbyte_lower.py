"""`subbyte-lower`: sub-byte tensors → packed byte loads, shift/mask/or and conversion, fused into the
matmul (Tilus §6.1 Fig. 7(b), §6.2 casting, the "no dequantised weight in memory" of §3).

Input: what `subbyte-pack` writes — a sub-byte tensor `lowbit.unpack %packed : tensor<Bxi8> ->
tensor<KxNxiN>` (its `dtype` and `position`, dialects/lowbit.py), read by `linalg.generic`s whose body
starts with its conversion (the op marked `lowbit.value`).

1. Every generic reading the sub-byte tensor through map M reads `%packed` instead, once or twice:
   byte `(pos · n) floordiv 8` and, when a code can span two bytes (8 mod n ≠ 0), the next byte, with
   pos = position ∘ M; the shift `(pos · n) mod 8` is computed in the body from `linalg.index`
   (`affine.apply`). The body becomes: word = zext(lo) | zext(hi) << 8, code = (word >> shift) &
   (2^n - 1) — convert.emit_unpack —, then the conversion of convert.emit_code_to_f32 (sign
   extension, `uitofp`, exponent/mantissa rebuild, or the table) replaces the old one, and the rest of
   the body (scales, zero points) is kept. No sub-byte type is left.
2. Every `linalg.matmul` whose right operand is such a dequantisation generic (`lowbit.dequantize`,
   used once) becomes one `linalg.generic` over (m, n, k): the dequantisation body is inlined in the
   reduction loop, followed by the matmul's own `mulf`/`addf`, so the dequantised weight is never
   materialised — each weight element is unpacked and converted where it is multiplied.

Both the CPU and the CUDA code generation lower the result (it is plain linalg/arith/affine).

Option `cpu-vectorize` (CPU only): before 1 and 2, each quantised matmul that fits is replaced by
cpu_matmul.py's word-at-a-time vector loops (8 codes unpacked at once, reused by a block of rows);
the others take the portable path above. `report` says which lowering each matmul got, and why not
the vector loops.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import affine, arith, linalg

from ..dialects.lowbit import DEQUANTIZE_ATTR, FUSED_ATTR, dequantized_type, is_code_conversion, unpack_op
from ..ir_utils import walk_ops
from ..passes.registry import Option, Pass, PassFailure, register_pass, report_option
from . import cpu_matmul
from .convert import emit_code_to_f32, emit_unpack
from .subbyte_pack import iterator_type
from ..dialects.lowbit_types import parse_dtype


def _clone_remapped(op, mapping: dict) -> None:
    """Clone `op` at the insertion point with its operands renamed through `mapping`, and record
    its results' clones in `mapping`."""
    new_op = op.clone()
    for j, v in enumerate(op.operands):
        if v in mapping:
            new_op.operands[j] = mapping[v]
    for old, new in zip(op.results, new_op.results):
        mapping[old] = new


def _maps(op):
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _index(dim: int) -> ir.Value:
    """`linalg.index dim` (the generated `linalg.index` helper is the OpDSL one, not the op builder)."""
    i64 = ir.IntegerType.get_signless(64)
    return linalg.IndexOp(ir.IntegerAttr.get(i64, dim)).result


def _map_attr(n_dims: int, exprs) -> ir.AffineMapAttr:
    return ir.AffineMapAttr.get(ir.AffineMap.get(n_dims, 0, list(exprs)))


def _widens_to(narrow: ir.Type, wide: ir.Type) -> bool:
    """Whether `narrow` is `wide` or a float type `arith.extf` widens to the float type `wide`."""
    if narrow == wide:
        return True
    floats = (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type)
    return (isinstance(narrow, floats) and isinstance(wide, floats)
            and ir.FloatType(narrow).width < ir.FloatType(wide).width)


def _widening_producer(x: ir.Value):
    """The elementwise generic that makes `x` by widening another tensor (`arith.extf`, identity
    maps: a half model's activations cast to f32 for an f32-accumulating matmul), or None. The fused
    matmul then reads the narrow activations and widens each in its body: the kernel keeps the
    `lowbit.fused` mark (elementwise fusion at bufferization would otherwise rebuild it without it)
    and the wide copy of the activations is never made."""
    owner = x.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "linalg.generic":
        return None
    op = owner.operation
    if len(op.operands) != 2 or len(op.results) != 1 or len(list(op.results[0].uses)) != 1:
        return None
    if any(a != iterator_type("parallel") for a in ir.ArrayAttr(op.attributes["iterator_types"])):
        return None
    if any(m != ir.AffineMap.get_identity(m.n_dims) for m in _maps(op)):
        return None
    body = [o.operation for o in op.regions[0].blocks[0].operations]
    if len(body) != 2 or body[0].name != "arith.extf" or body[0].operands[0] != op.regions[0].blocks[0].arguments[0] \
            or body[1].operands[0] != body[0].results[0]:
        return None
    return op


@register_pass
class SubbyteLower(Pass):
    name = "subbyte-lower"
    summary = "Lower sub-byte tensors to packed loads + shift/mask/or + conversion fused into the matmul (Tilus §6)"
    description = ("Runs after subbyte-pack; leaves only i8/i32/f32 linalg, arith and affine ops "
                   "(with cpu-vectorize: scf loops of vector ops for the quantised matmuls, CPU only).")
    options = (
        Option("cpu-vectorize", bool, False, "lower each quantised matmul to word-at-a-time vector loops for "
               "the CPU (cpu_matmul.py); matmuls that do not fit stay portable (the report says why)"),
        report_option("one line per quantised matmul saying how it was lowered"),
    )

    def run(self, module):
        casts = [unpack_op(op) for op in walk_ops(module, "lowbit.unpack")]
        lines = []
        if self.cpu_vectorize:
            casts = [cast for cast in casts if not self._vectorize(cast, lines)]
        for cast in casts:
            for use in list(cast.results[0].uses):
                user = use.owner.operation
                if user.name != "linalg.generic":
                    raise PassFailure(f"subbyte-lower: the sub-byte tensor is used by '{user.name}'; only "
                                      "linalg.generic consumers (as subbyte-pack writes them) are lowered",
                                      user.location)
                self._lower_consumer(cast, user)
            cast.erase()
        for matmul in walk_ops(module, "linalg.matmul"):
            producer = matmul.operands[1].owner
            name = None if isinstance(producer, ir.Block) else dequantized_type(producer)
            if name is None:
                continue
            if len(list(producer.results[0].uses)) == 1:
                self._fuse(matmul, producer.operation)
                lines.append(f"subbyte-lower: {name} matmul: fused linalg.generic\n")
        self.write_report(module, "".join(lines))

    # -- 0. CPU vector loops --------------------------------------------------------------------
    def _vectorize(self, cast, lines: list) -> bool:
        """Lower the quantised matmul reading `cast` to cpu_matmul's vector loops; False (and a
        report line) where it does not apply."""
        name = cast.dtype_name
        uses = list(cast.results[0].uses)
        dequant = uses[0].owner.operation if len(uses) == 1 else None
        if dequant is None or dequantized_type(dequant) is None \
                or len(list(dequant.results[0].uses)) != 1:
            lines.append(f"subbyte-lower: {name} weight: not vectorized: not one dequantisation feeding one matmul\n")
            return False
        matmul = next(iter(dequant.results[0].uses)).owner.operation
        try:
            if matmul.name != "linalg.matmul" or matmul.operands[1] != dequant.results[0]:
                raise cpu_matmul.NotVectorizable("the dequantised weight is not the right operand of a linalg.matmul")
            cpu_matmul.check(matmul, dequant, cast)
        except cpu_matmul.NotVectorizable as e:
            lines.append(f"subbyte-lower: {name} matmul: not vectorized: {e}\n")
            return False
        cpu_matmul.vectorize(matmul, dequant, cast)
        lines.append(f"subbyte-lower: {name} matmul: CPU vector loops\n")
        return True

    # -- 1. packed loads ------------------------------------------------------------------------
    def _lower_consumer(self, cast, generic) -> None:
        bits, name, position = cast.bits, cast.dtype_name, cast.position_map
        dtype = None if name.startswith("table") else parse_dtype(name)
        packed = cast.operands[0]
        n_out = len(generic.results)
        operands = list(generic.operands)
        n_in = len(operands) - n_out
        idx = next(i for i, v in enumerate(operands[:n_in]) if v == cast.results[0])
        maps = _maps(generic)
        m = maps[idx]
        pos = position.results[0].compose(m)
        n_dims = m.n_dims
        start = pos * bits
        spans = 8 % bits != 0
        byte_maps = [_map_attr(n_dims, [ir.AffineExpr.get_floor_div(start, 8)])]
        if spans:
            byte_maps.append(_map_attr(n_dims, [ir.AffineExpr.get_floor_div(start, 8) + 1]))
        new_inputs = operands[:idx] + [packed] * len(byte_maps) + operands[idx + 1:n_in]
        new_maps = ([ir.AffineMapAttr.get(x) for x in maps[:idx]] + byte_maps
                    + [ir.AffineMapAttr.get(x) for x in maps[idx + 1:]])
        old_block = generic.regions[0].blocks[0]
        old_args = list(old_block.arguments)
        i8 = ir.IntegerType.get_signless(8)
        arg_types = ([a.type for a in old_args[:idx]] + [i8] * len(byte_maps) + [a.type for a in old_args[idx + 1:]])
        with ir.InsertionPoint(generic), generic.location:
            new = linalg.GenericOp([r.type for r in generic.results], new_inputs, operands[n_in:],
                                   ir.ArrayAttr.get(new_maps), generic.attributes["iterator_types"])
            if DEQUANTIZE_ATTR in generic.attributes:
                new.attributes[DEQUANTIZE_ATTR] = generic.attributes[DEQUANTIZE_ATTR]
            block = new.regions[0].blocks.append(*arg_types)
            args = list(block.arguments)
            lo = args[idx]
            hi = args[idx + 1] if spans else None
            rest = args[:idx] + args[idx + len(byte_maps):]
            mapping = {old: nw for old, nw in zip(old_args[:idx] + old_args[idx + 1:], rest)}
            table = None
            with ir.InsertionPoint(block):
                dims = [_index(d) for d in range(n_dims)]
                shift_index = affine.apply(ir.AffineMap.get(n_dims, 0, [start % 8]), dims)
                shift = arith.index_cast(ir.IntegerType.get_signless(32), shift_index)
                code = emit_unpack(lo, hi, shift, bits)
                converted = False
                for inner in old_block.operations:
                    inner = inner.operation
                    if not converted:
                        if inner.name == "tensor.extract":
                            table = inner.operands[0]
                        if is_code_conversion(inner):
                            mapping[inner.results[0]] = emit_code_to_f32(code, dtype, table)
                            converted = True
                        continue
                    _clone_remapped(inner, mapping)
                if not converted:
                    raise PassFailure("subbyte-lower: a consumer of the sub-byte tensor does not start with "
                                      "its conversion (an op marked lowbit.value)", generic.location)
        generic.results[0].replace_all_uses_with(new.results[0])
        generic.erase()

    # -- 2. fusion into the matmul ----------------------------------------------------------------
    def _fuse(self, matmul, dequant) -> None:
        x, w = matmul.operands[0], matmul.operands[1]
        acc = matmul.operands[2]
        acc_etype = ir.RankedTensorType(acc.type).element_type
        if not all(_widens_to(ir.RankedTensorType(v.type).element_type, acc_etype) for v in (x, w)):
            return  # an integer or narrowing matmul: left unfused (still correct)
        d = [ir.AffineExpr.get_dim(i) for i in range(3)]  # (m, n, k)
        to_mnk = ir.AffineMap.get(3, 0, [d[2], d[1]])      # dequant (k, n) in the matmul's loops
        deq_maps = _maps(dequant)
        n_in = len(dequant.operands) - 1
        maps = [_map_attr(3, [d[0], d[2]])]
        maps += [_map_attr(3, [e.compose(to_mnk) for e in m.results]) for m in deq_maps[:n_in]]
        maps.append(_map_attr(3, [d[0], d[1]]))
        old_block = dequant.regions[0].blocks[0]
        widened = _widening_producer(x)
        x_in = widened.operands[0] if widened is not None else x
        with ir.InsertionPoint(matmul), matmul.location:
            fused = linalg.GenericOp([matmul.results[0].type], [x_in] + list(dequant.operands[:n_in]), [acc],
                                     ir.ArrayAttr.get(maps),
                                     ir.ArrayAttr.get([iterator_type("parallel")] * 2 + [iterator_type("reduction")]))
            fused.attributes[FUSED_ATTR] = dequant.attributes[DEQUANTIZE_ATTR]
            x_etype = ir.RankedTensorType(x_in.type).element_type
            block = fused.regions[0].blocks.append(x_etype, *[a.type for a in list(old_block.arguments)[:n_in]],
                                                   acc_etype)
            args = list(block.arguments)
            mapping = {old: new for old, new in zip(list(old_block.arguments)[:n_in], args[1:1 + n_in])}
            with ir.InsertionPoint(block):
                # Operands narrower than the accumulator are widened before the product, as
                # linalg.matmul does (a half model's f16 x and weight, f32 sums).
                x_value = args[0] if x_etype == acc_etype else arith.extf(acc_etype, args[0])
                for inner in old_block.operations:
                    inner = inner.operation
                    if inner.name == "linalg.yield":
                        weight = mapping[inner.operands[0]]
                        break
                    if inner.name == "linalg.index":
                        dim = ir.IntegerAttr(inner.attributes["dim"]).value
                        mapping[inner.results[0]] = _index([2, 1][dim])
                        continue
                    _clone_remapped(inner, mapping)
                if weight.type != acc_etype:
                    weight = arith.extf(acc_etype, weight)
                prod = arith.mulf(x_value, weight)
                linalg.YieldOp([arith.addf(args[-1], prod)])
        matmul.results[0].replace_all_uses_with(fused.results[0])
        matmul.erase()
        if widened is not None and not list(widened.results[0].uses):
            widened_init = widened.operands[1].owner
            widened.erase()
            if not isinstance(widened_init, ir.Block) and widened_init.operation.name == "tensor.empty" \
                    and not list(widened_init.results[0].uses):
                widened_init.operation.erase()
        empty = dequant.operands[-1].owner
        dequant.erase()
        if not isinstance(empty, ir.Block) and empty.operation.name == "tensor.empty" \
                and not list(empty.results[0].uses):
            empty.operation.erase()
