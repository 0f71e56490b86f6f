"""`temco-decompose`: Tucker-2 decomposition of constant-weight convs at graph level (TeMCO §2.1).

TeMCO (Song et al., ICPP'24) starts from a Tucker-decomposed model (§4.1: Tucker [39], decomposition
ratio 0.1) and then optimises its memory. This pass produces that model inside the compiler: every
`linalg.conv_2d_nchw_fchw` whose filter is an `arith.constant` becomes the decomposed convolution
sequence of Fig. 2b::

    %x  = tensor.pad %in low[0,0,p,p] ...           (the original padding, if any)
    %y  = linalg.conv_2d_nchw_fchw {strides, dilations} ins(%x, %W) outs(%init)

  becomes

    %r1 = linalg.conv_2d_nchw_fchw ins(%in, %U_in^T)  outs(zero-filled NxR1xHxW)    temco.role = "fconv"
    %p  = tensor.pad %r1 low[0,0,p,p] ...            (same padding, now on R1 channels)
    %r2 = linalg.conv_2d_nchw_fchw {strides, dilations} ins(%p, %G) outs(zero-filled) temco.role = "core"
    %y  = linalg.conv_2d_nchw_fchw ins(%r2, %U_out) outs(%init)                       temco.role = "lconv"

- The fconv runs before the padding when the padding is zero on spatial dims only: a 1×1 conv without
  bias maps zero to zero, so `fconv(pad(x)) = pad(fconv(x))` and the pad copies R1 channels instead
  of C. Any other input (non-zero pad value, no pad) gets the fconv directly.
- The original accumulator `%init` (the bias broadcast, or a zero fill) becomes the lconv's, so the bias
  is added once, on the last conv; fconv and core accumulate into fresh zero fills.
- The three convs carry `temco.role` (`"fconv"`, `"core"`, `"lconv"`) and `temco.layer` (index of the
  decomposed conv in its function) so later TeMCO passes (skip-connection rematerialisation, lconv–
  activation–fconv fusion) find them without pattern guessing (Alg. 2's IsLConv still holds: lconvs
  are 1×1, stride 1, and widen the channels whenever R2 < F).

Ranks: `ceil(rank-ratio · channels)`, at least 1 (`tucker.tucker2_ranks`). Pointwise (1×1) convs are
left alone by default: Tucker-2 of a 1×1 conv is a product of three 1×1 convs, more work and more
layers for nothing (`skip-pointwise=false` decomposes them too). Weight values come out of
`dense_resource` blobs through `weights.constant_array`; new weights are `dense<...>` constants.

The report lists every conv: its weight shape, the ranks, the relative Frobenius reconstruction error
`‖W − Ŵ‖_F / ‖W‖_F`, and the parameter counts before and after (or why it was skipped).
"""

from __future__ import annotations

import json as _json
from dataclasses import asdict, dataclass, field

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

from ..passes.registry import Option, Pass, register_pass, report_option
from ..errors import format_location
from ..ir_utils import walk_ops
from .tucker import relative_error, tucker2_decompose, tucker2_ranks
from ..ir_constants import constant_array, make_constant

CONV_OP = "linalg.conv_2d_nchw_fchw"
ROLE_ATTR = "temco.role"
LAYER_ATTR = "temco.layer"
_FLOAT_TYPES = ("f16", "bf16", "f32", "f64")


@dataclass
class LayerDecomposition:
    """One conv that was decomposed (or `skipped` with a reason)."""

    function: str
    layer: int
    location: str
    weight_shape: tuple
    ranks: tuple | None = None
    relative_error: float | None = None
    params_before: int = 0
    params_after: int | None = None
    skipped: str | None = None

    def to_text(self) -> str:
        shape = "x".join(map(str, self.weight_shape))
        if self.skipped:
            return f"  conv {shape:<14} skipped: {self.skipped}  {self.location}".rstrip()
        r1, r2 = self.ranks
        return (
            f"  layer {self.layer:<3} conv {shape:<14} ranks ({r1}, {r2})  rel-error {self.relative_error:.6f}  "
            f"params {self.params_before} -> {self.params_after}  {self.location}"
        ).rstrip()


@dataclass
class DecompositionReport:
    rank_ratio: float
    layers: list[LayerDecomposition] = field(default_factory=list)

    @property
    def decomposed(self) -> list[LayerDecomposition]:
        return [layer for layer in self.layers if not layer.skipped]

    @property
    def skipped(self) -> list[LayerDecomposition]:
        return [layer for layer in self.layers if layer.skipped]

    def to_dict(self) -> dict:
        return {"rank_ratio": self.rank_ratio, "layers": [asdict(layer) for layer in self.layers]}

    def to_json(self, indent: int | None = 2) -> str:
        return _json.dumps(self.to_dict(), indent=indent)

    def to_text(self) -> str:
        lines = [f"temco-decompose report (rank-ratio {self.rank_ratio:g})"]
        current = None
        for layer in self.layers:
            if layer.function != current:
                current = layer.function
                lines.append(f"func @{current}")
            lines.append(layer.to_text())
        before = sum(layer.params_before for layer in self.decomposed)
        after = sum(layer.params_after for layer in self.decomposed)
        lines.append(
            f"total: {len(self.decomposed)} conv(s) decomposed, {len(self.skipped)} skipped; "
            f"decomposed weights {before} -> {after} parameters"
        )
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_text()


def decompose_convs(module, rank_ratio: float = 0.1, skip_pointwise: bool = True) -> DecompositionReport:
    """Decompose the constant-weight convs of `module` in place (see the module docstring)."""
    if not 0.0 < rank_ratio <= 1.0:
        raise ValueError(f"rank ratio must be in (0, 1], got {rank_ratio}")
    root = module.operation
    report = DecompositionReport(rank_ratio)
    for func in walk_ops(root, "func.func"):
        fname = ir.StringAttr(func.attributes["sym_name"]).value
        index = 0
        for conv in walk_ops(func, CONV_OP):
            if ROLE_ATTR in conv.attributes:
                continue  # already a decomposed sequence
            entry = _decompose_one(conv, fname, index, rank_ratio, skip_pointwise)
            report.layers.append(entry)
            if not entry.skipped:
                index += 1
    return report


def _static_shape(value) -> tuple | None:
    t = value.type
    try:
        ranked = ir.RankedTensorType(t)
    except (ValueError, TypeError):
        return None
    return tuple(ranked.shape) if ranked.has_static_shape else None


def _decompose_one(conv, fname: str, index: int, ratio: float, skip_pointwise: bool) -> LayerDecomposition:
    x, w_value, init = conv.operands[0], conv.operands[1], conv.operands[2]
    loc = format_location(conv.location)
    w_shape = _static_shape(w_value) or ()
    entry = LayerDecomposition(fname, index, loc, w_shape, params_before=int(np.prod(w_shape)) if w_shape else 0)
    if _static_shape(x) is None or _static_shape(init) is None or not w_shape:
        entry.skipped = "dynamic shape"
        return entry
    element_type = ir.RankedTensorType(w_value.type).element_type
    if str(element_type) not in _FLOAT_TYPES:
        entry.skipped = f"element type {element_type}"
        return entry
    owner = w_value.owner
    weight = None if isinstance(owner, ir.Block) else constant_array(owner)
    if weight is None:
        entry.skipped = "weight is not a constant"
        return entry
    f, c, kh, kw = w_shape
    if kh == 1 and kw == 1 and skip_pointwise:
        entry.skipped = "pointwise (1x1) conv"
        return entry

    ranks = tucker2_ranks(w_shape, ratio)
    factors = tucker2_decompose(weight, ranks)
    entry.ranks = ranks
    entry.relative_error = relative_error(weight, factors.reconstruct())
    entry.params_after = factors.parameters
    _rewrite(conv, factors, element_type, index)
    return entry


def _rewrite(conv, factors, element_type, index: int) -> None:
    """Replace `conv` by fconv → (pad) → core → lconv, built right before it."""
    x, w_value, init = conv.operands[0], conv.operands[1], conv.operands[2]
    r1, r2 = factors.ranks
    pad = _zero_spatial_pad(x)
    source = pad.operands[0] if pad is not None else x
    n, _, h, w = _static_shape(source)
    i64 = ir.IntegerType.get_signless(64, context=conv.context)
    vector = ir.VectorType.get([2], i64, loc=ir.Location.unknown(context=conv.context))
    ones = ir.DenseElementsAttr.get(np.ones(2, np.int64), type=vector, context=conv.context)
    layer_attr = ir.IntegerAttr.get(ir.IntegerType.get_signless(64, context=conv.context), index)

    def zero_init(shape):
        empty = tensor.EmptyOp(list(shape), element_type).result
        zero = arith.ConstantOp(element_type, 0.0).result
        return linalg.fill(zero, outs=[empty])

    def conv_op(inp, weight, out, role, strides=ones, dilations=ones):
        result = linalg.conv_2d_nchw_fchw(inp, weight, outs=[out])
        op = result.owner
        op.attributes["strides"] = strides
        op.attributes["dilations"] = dilations
        op.attributes[ROLE_ATTR] = ir.StringAttr.get(role)
        op.attributes[LAYER_ATTR] = layer_attr
        return result

    with conv.context, conv.location, ir.InsertionPoint(conv):
        first = conv_op(source, make_constant(factors.first, element_type), zero_init((n, r1, h, w)), "fconv")
        if pad is not None:
            first = _repad(pad, first, element_type)
        _, _, ho, wo = _static_shape(conv.results[0])
        core = conv_op(
            first,
            make_constant(factors.core, element_type),
            zero_init((n, r2, ho, wo)),
            "core",
            strides=conv.attributes["strides"],
            dilations=conv.attributes["dilations"],
        )
        last = conv_op(core, make_constant(factors.last, element_type), init, "lconv")
    conv.results[0].replace_all_uses_with(last)
    conv.erase()
    for dead in (pad, w_value.owner):
        if dead is not None and _has_no_uses(dead):
            dead.erase()


def _has_no_uses(op) -> bool:
    return all(next(iter(r.uses), None) is None for r in op.results)


def _zero_spatial_pad(value):
    """The `tensor.pad` producing `value` if it pads only H/W statically with a constant zero, else None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "tensor.pad":
        return None
    pad = owner.operation
    if len(pad.operands) != 1:  # dynamic low/high
        return None
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
    if low[:2] != [0, 0] or high[:2] != [0, 0]:
        return None
    yield_op = pad.regions[0].blocks[0].operations[0]
    pad_value = yield_op.operands[0]
    const = pad_value.owner
    if isinstance(const, ir.Block) or const.name != "arith.constant":
        return None
    try:
        scalar = ir.FloatAttr(const.attributes["value"]).value
    except (ValueError, TypeError):
        return None
    return pad if scalar == 0.0 else None


def _repad(pad, value, element_type):
    """`tensor.pad` of `value` with `pad`'s static padding and padding value."""
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
    shape = [d + lo + hi for d, lo, hi in zip(_static_shape(value), low, high)]
    result_type = ir.RankedTensorType.get(shape, element_type)
    nofold = "nofold" in pad.attributes
    new = tensor.PadOp(result_type, value, [], [], low, high, nofold=nofold or None)
    block = new.regions[0].blocks.append(*([ir.IndexType.get()] * len(shape)))
    pad_value = pad.regions[0].blocks[0].operations[0].operands[0]
    with ir.InsertionPoint(block):
        tensor.YieldOp(pad_value)
    return new.result


@register_pass
class TemcoDecompose(Pass):
    name = "temco-decompose"
    summary = "Tucker-2 decompose constant-weight convs into fconv (1x1) -> core -> lconv (1x1)"
    description = (
        "TeMCO (ICPP'24) §2.1: HOSVD Tucker-2 decomposition of every linalg.conv_2d_nchw_fchw with an "
        "arith.constant filter into a 1x1 fconv, a core conv keeping the padding/stride/dilation, and a "
        "1x1 lconv that takes the original bias/accumulator. Ranks are ceil(rank-ratio * channels), at "
        "least 1. Reports each layer's relative Frobenius reconstruction error."
    )
    options = (
        Option("rank-ratio", float, 0.1, "kept fraction of input/output channels (paper: 0.1), in (0, 1]"),
        Option("skip-pointwise", bool, True, "leave 1x1 convs undecomposed"),
        Option("json", bool, False, "print the report as JSON instead of text"),
        report_option("the per-layer report"),
    )

    def run(self, module):
        if not 0.0 < self.rank_ratio <= 1.0:
            self.emit_error(module, f"temco-decompose: rank-ratio must be in (0, 1], got {self.rank_ratio:g}")
            return
        report = decompose_convs(module, self.rank_ratio, self.skip_pointwise)
        self.write_report(module, report.to_json() + "\n" if self.json else report.to_text())
        return report
