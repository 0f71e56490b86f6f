"""The `vt` dialect: virtual tensors (VTC Def. 3), defined in Python with `torch_mlir.dialects.ext`.

Ops (graph level, tensor semantics, all `Pure`):

- `vt.view` — a virtual tensor read from physical tensors through a mapping function: result[x] =
  sources[j][y] with (j, y) = mapping(x). It replaces a data-movement op on the *input* side of its
  consumers (transpose, slice, reshape, concat, broadcast become a view). Lowering never allocates it:
  consumers index the sources through the mapping.
- `vt.store_into` — a value written straight into physical destinations through a mapping:
  updated[j][y] = value[x] for (j, y) = mapping(x), every other element of the destinations unchanged
  (destination-passing style, like `tensor.insert_slice`). It replaces data movement on the *output*
  side of a producer (the QKV projection writing Q and the K/V caches, VTC Fig. 3). The mapping must be
  one-to-one (VTC restricts F so); the verifier checks coverage of the value, not injectivity.

The `mapping` attribute and the `MappingFunction` class are described in `vt_mapping.py` and
dialects/README.md. Types: `!vt.float<exponent, mantissa, "specials">` (`FloatType`), the Tilus floats
(issue 6) MLIR has no builtin for (sub-byte ints are builtin signless `iN`). Analysis helpers over
mappings (contiguity, VTC Defs. 4–5) belong beside `MappingFunction`.

No `from __future__ import annotations` here: `ext` reads the annotations as real objects.
"""

from collections.abc import Sequence

from torch_mlir import ir
from torch_mlir.dialects import ext
from torch_mlir.dialects.ext import Operand, Result

from ._ext_support import fail, guarded_verifier, missing_attribute, ranked_shape, type_groups
from .lowbit_types import BUILTIN_FLOATS, LowBitType
from .vt_mapping import MappingFormatError, MappingFunction

MAPPING_ATTR = "mapping"


class VTDialect(ext.Dialect, name="vt"):
    pass


# -- types ------------------------------------------------------------------------------------

class FloatType(VTDialect.Type, name="float"):
    """`!vt.float<exponent, mantissa, "specials">`: a 1 + exponent + mantissa bit float the builtins
    lack (Tilus §6, issue 6: e3m3, e2m2, e1m1, ...). The value set is `vtmlir.lowbit.LowBitType.float(
    exponent, mantissa, specials)` (docs/lowbit.md): sign-magnitude, bias 2^(exponent-1) - 1,
    subnormals, `specials` one of "finite" (no inf/NaN), "nan" (E4M3FN style), "ieee" (E5M2 style).
    Printed `!vt.float<3 : i64, 3 : i64, "finite">`; `!vt.float<3, 3, "finite">` parses too. IRDL checks
    the parameter kinds; `float_type_params` checks the values."""

    exponent: ir.IntegerAttr
    mantissa: ir.IntegerAttr
    specials: ir.StringAttr


def float_type(exponent: int, mantissa: int, specials: str = "finite", *, context=None) -> FloatType:
    """`!vt.float<exponent, mantissa, specials>` (the `vt` dialect must be loaded in the context)."""
    error = _float_params_error(exponent, mantissa, specials)
    if error:
        raise ValueError(error)
    i64 = ir.IntegerType.get_signless(64, context=context)
    return FloatType.get(ir.IntegerAttr.get(i64, exponent), ir.IntegerAttr.get(i64, mantissa),
                         ir.StringAttr.get(specials, context=context), context=context)


def _float_params_error(exponent: int, mantissa: int, specials: str) -> str | None:
    """The rules of `vtmlir.lowbit.LowBitType` (docs/lowbit.md), as an error message or None."""
    try:
        LowBitType("float", 1 + exponent + mantissa, exponent, mantissa, specials)
    except ValueError as e:
        return f"invalid !vt.float<{exponent}, {mantissa}, \"{specials}\">: {e}"
    return None


def float_type_params(t: ir.Type) -> tuple[int, int, str] | None:
    """(exponent, mantissa, specials) of a `!vt.float`, None for any other type; ValueError when
    the parameters are out of range."""
    if not isinstance(t, FloatType):
        try:
            t = ir.Type(t).maybe_downcast()
        except (TypeError, ValueError):
            return None
        if not isinstance(t, FloatType):
            return None
    e, m, sp = ir.IntegerAttr(t.exponent).value, ir.IntegerAttr(t.mantissa).value, ir.StringAttr(t.specials).value
    error = _float_params_error(e, m, sp)
    if error:
        raise ValueError(error)
    return e, m, sp


def lowbit_mlir_type(t: LowBitType, context=None) -> ir.Type:
    """The MLIR type of the low-bit type `t` (needs an active context or `context`): the builtin type
    where one has exactly this value set (signless `iN` for ints), else `!vt.float<exponent, mantissa,
    "specials">` (the `vt` dialect must be loaded, as in every `vtmlir.context.make_context()` context)."""
    if t.kind in ("int", "uint"):
        return ir.IntegerType.get_signless(t.bits, context=context)
    entry = BUILTIN_FLOATS.get((t.exponent, t.mantissa, t.specials))
    if entry is None:
        return float_type(t.exponent, t.mantissa, t.specials, context=context)
    return getattr(ir, entry[1]).get(context=context)


def lowbit_type_of(t: ir.Type, signed: bool = True) -> LowBitType:
    """The low-bit type of a builtin low-bit float or `!vt.float`, or the int of an `iN` (N <= 8;
    signless, so `signed` picks int or uint). ValueError for anything else."""
    t = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
    if isinstance(t, ir.IntegerType) and t.width <= 8:
        return LowBitType.int(t.width) if signed and t.width >= 2 else LowBitType.uint(t.width)
    params = float_type_params(t)
    if params is not None:
        return LowBitType.float(*params)
    for (e, m, sp), (_name, cls) in BUILTIN_FLOATS.items():
        if isinstance(t, getattr(ir, cls)):
            return LowBitType.float(e, m, sp)
    raise ValueError(f"{t} is not a 1-8 bit type vtmlir.lowbit models")


def element_bits(t: ir.Type) -> int | None:
    """Bit width of one element of type `t`: builtin ints and floats, `index` (64, as vtmlir's
    backends store it), complex (twice its part), `!vt.float`; None for anything else."""
    t = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
    if isinstance(t, (ir.IntegerType, ir.FloatType)):
        return t.width
    if isinstance(t, ir.IndexType):
        return 64
    if isinstance(t, ir.ComplexType):
        inner = element_bits(t.element_type)
        return None if inner is None else 2 * inner
    params = float_type_params(t)
    if params is not None:
        return 1 + params[0] + params[1]
    return None


def _check_mapping(op, attr, virtual_type, physical: Sequence[ir.Value], what: str) -> bool:
    try:
        mapping = MappingFunction.from_attr(attr)
    except (MappingFormatError, ValueError) as e:
        return fail(op, f"invalid mapping: {e}")
    error = mapping.verify(ranked_shape(virtual_type), [ranked_shape(v) for v in physical], what)
    if error:
        return fail(op, f"invalid mapping: {error}")
    return True


def _element_type(t) -> ir.Type:
    return ir.RankedTensorType(t).element_type


class ViewOp(VTDialect.Operation, name="view", traits=[ext.Pure]):
    """result[x] = sources[j][y], (j, y) = mapping(x).

    Build with `ViewOp(sources, mapping, result_type)`; `sources` is the flat operand list (the
    `sources_<k>` groups only carry IRDL typing, see `_ext_support`)."""

    sources_0: Sequence[Operand[ir.RankedTensorType]]
    sources_1: Sequence[Operand[ir.RankedTensorType]]
    sources_2: Sequence[Operand[ir.RankedTensorType]]
    sources_3: Sequence[Operand[ir.RankedTensorType]]
    sources_4: Sequence[Operand[ir.RankedTensorType]]
    sources_5: Sequence[Operand[ir.RankedTensorType]]
    sources_6: Sequence[Operand[ir.RankedTensorType]]
    sources_7: Sequence[Operand[ir.RankedTensorType]]
    mapping: ir.ArrayAttr
    result: Result[ir.RankedTensorType]

    @property
    def sources(self) -> list[ir.Value]:
        return list(self.operation.operands)

    @property
    def mapping_function(self) -> MappingFunction:
        return MappingFunction.from_attr(self.mapping)

    @guarded_verifier
    def verify_invariants(op) -> bool:
        if missing_attribute(op, MAPPING_ATTR):
            return False
        sources = list(op.sources)
        if not sources:
            return fail(op, "expects at least one source")
        result_type = op.result.type
        if ranked_shape(result_type) is None:
            return fail(op, f"result must be a ranked tensor, got {result_type}")
        elt = _element_type(result_type)
        for j, s in enumerate(sources):
            if ranked_shape(s) is None:
                return fail(op, f"source #{j} must be a ranked tensor, got {s.type}")
            if _element_type(s.type) != elt:
                return fail(op, f"source #{j} has element type {_element_type(s.type)} but the "
                                f"result has {elt}")
        return _check_mapping(op, op.mapping, result_type, sources, "source")


class StoreIntoOp(VTDialect.Operation, name="store_into", traits=[ext.Pure]):
    """updated[j][y] = value[x] for (j, y) = mapping(x); the rest of each destination unchanged.

    Build with `StoreIntoOp(value, dests, mapping)`; `dests` and `updated` are flat lists (the
    `dests_<k>`/`updated_<k>` groups only carry IRDL typing, see `_ext_support`)."""

    value: Operand[ir.RankedTensorType]
    dests_0: Sequence[Operand[ir.RankedTensorType]]
    dests_1: Sequence[Operand[ir.RankedTensorType]]
    dests_2: Sequence[Operand[ir.RankedTensorType]]
    dests_3: Sequence[Operand[ir.RankedTensorType]]
    dests_4: Sequence[Operand[ir.RankedTensorType]]
    dests_5: Sequence[Operand[ir.RankedTensorType]]
    dests_6: Sequence[Operand[ir.RankedTensorType]]
    dests_7: Sequence[Operand[ir.RankedTensorType]]
    mapping: ir.ArrayAttr
    updated_0: Sequence[Result[ir.RankedTensorType]]
    updated_1: Sequence[Result[ir.RankedTensorType]]
    updated_2: Sequence[Result[ir.RankedTensorType]]
    updated_3: Sequence[Result[ir.RankedTensorType]]
    updated_4: Sequence[Result[ir.RankedTensorType]]
    updated_5: Sequence[Result[ir.RankedTensorType]]
    updated_6: Sequence[Result[ir.RankedTensorType]]
    updated_7: Sequence[Result[ir.RankedTensorType]]

    @property
    def dests(self) -> list[ir.Value]:
        return list(self.operation.operands)[1:]

    @property
    def updated(self) -> list[ir.Value]:
        return list(self.operation.results)

    @property
    def mapping_function(self) -> MappingFunction:
        return MappingFunction.from_attr(self.mapping)

    @guarded_verifier
    def verify_invariants(op) -> bool:
        if missing_attribute(op, MAPPING_ATTR):
            return False
        dests = list(op.dests)
        updated = list(op.updated)
        if not dests:
            return fail(op, "expects at least one destination")
        if len(updated) != len(dests):
            return fail(op, f"has {len(dests)} destination(s) but {len(updated)} result(s); "
                            f"expects one updated tensor per destination")
        if ranked_shape(op.value) is None:
            return fail(op, f"value must be a ranked tensor, got {op.value.type}")
        for j, (d, r) in enumerate(zip(dests, updated)):
            if d.type != r.type:
                return fail(op, f"result #{j} has type {r.type} but destination #{j} has {d.type}")
        elt = _element_type(op.value.type)
        for j, d in enumerate(dests):
            if ranked_shape(d) is None:
                return fail(op, f"destination #{j} must be a ranked tensor, got {d.type}")
            if _element_type(d.type) != elt:
                return fail(op, f"destination #{j} has element type {_element_type(d.type)} but "
                                f"the value has {elt}")
        return _check_mapping(op, op.mapping, op.value.type, dests, "destination")


def _install_builders():
    view_init = ViewOp.__init__
    store_init = StoreIntoOp.__init__

    def view__init__(self, sources, mapping, result, *, loc=None, ip=None):
        groups = type_groups(list(sources), what="sources")
        kwargs = {f"sources_{k}": g for k, g in enumerate(groups)}
        view_init(self, **kwargs, mapping=mapping, result=result, loc=loc, ip=ip)

    def store__init__(self, value, dests, mapping, updated=None, *, loc=None, ip=None):
        dests = list(dests)
        groups = type_groups(dests, what="destinations")
        types = list(updated) if updated is not None else [d.type for d in dests]
        kwargs = {f"dests_{k}": g for k, g in enumerate(groups)}
        # Results are grouped like the destinations they update (same types when valid).
        pos = 0
        for k, g in enumerate(groups):
            kwargs[f"updated_{k}"] = types[pos:pos + len(g)]
            pos += len(g)
        kwargs[f"updated_{len(groups) - 1}"] = kwargs[f"updated_{len(groups) - 1}"] + types[pos:]
        store_init(self, value, **kwargs, mapping=mapping, loc=loc, ip=ip)

    ViewOp.__init__ = view__init__
    StoreIntoOp.__init__ = store__init__


_install_builders()


# -- builders ---------------------------------------------------------------------------------


def view(sources: Sequence[ir.Value], mapping: MappingFunction | ir.ArrayAttr,
         shape: Sequence[int], *, loc=None, ip=None) -> ir.Value:
    """Build `vt.view` of `shape` (element type of the first source); returns the virtual tensor."""
    sources = list(sources)
    attr = mapping.to_attr() if isinstance(mapping, MappingFunction) else mapping
    result_type = ir.RankedTensorType.get(list(shape), _element_type(sources[0].type))
    return ViewOp(sources, attr, result_type, loc=loc, ip=ip).result


def store_into(value: ir.Value, dests: Sequence[ir.Value],
               mapping: MappingFunction | ir.ArrayAttr, *, loc=None, ip=None) -> list[ir.Value]:
    """Build `vt.store_into`; returns the updated destinations."""
    dests = list(dests)
    attr = mapping.to_attr() if isinstance(mapping, MappingFunction) else mapping
    op = StoreIntoOp(value, dests, attr, loc=loc, ip=ip)
    return list(op.updated)
