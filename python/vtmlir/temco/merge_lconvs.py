"""`temco-merge-lconvs`: lconvs concatenated along channels become one block-diagonal lconv (TeMCO Fig. 9a).

Song et al., ICPP'24 (TeMCO), §3.3: "the
concatenation-convolution sequence can be transformed into Figure 9a by merging lconvs and applying
concatenation on input reduced tensors. To generate weights of merged lconv, the compiler locates
the weights in the diagonal positions and adds zero padding on the rest of the weight tensor." The
weights grow, but one lconv (and, after fusion, one fused kernel) replaces several.

This pass rewrites every run of two or more consecutive operands of a channel `tensor.concat` that
are lconvs — 1×1, stride-1 `linalg.conv_2d_nchw_fchw` with constant weights `W_i [F_i, R_i, 1, 1]`,
each used only by the concat, accumulating into a constant fill or a broadcast constant bias — into

    %r = tensor.concat dim(1) %r_1, ..., %r_k          // the reduced inputs (ΣR_i channels)
    %y = conv_1x1(%r, blockdiag(W_1, ..., W_k))         // ΣF_i channels, init: the inits' values

and the run's operands of the concat by `%y` (the concat disappears when the run was all of it).
Per output channel the merged conv adds, after the original products in the original order, products
of zero weights, and `s + 0·x = s` for finite inputs: the result is the same up to the sign of a zero
sum (checked bitwise on the zoo's DenseNets).

The add form (§3.3, last paragraph: "An add sequence in the form of Figure 9c can be transformed to
Figure 9a"): an elementwise add of two lconv branches,

    %y = add(affine_a(lconv_a(%r_a)), affine_b(lconv_b(%r_b)))
into
    %r = tensor.concat dim(1) %r_a, %r_b
    %y = conv_1x1(%r, [s_a·W_a | s_b·W_b]), init: s_a·b_a + t_a + s_b·b_b + t_b per channel

where each `affine` is a (possibly empty) chain of per-channel `+ c`, `- c`, `c -`, `× c` generics
with constant `c` (an inference BatchNorm after folding its square root: y = s·z + t), each used only
by the next. The weights are scaled and the biases summed in float64, then rounded to the element
type: this changes the summation order, so the result agrees with the original within fp32
tolerance, not bitwise. Only lconvs whose reduced inputs are conv results (the decomposition's core
outputs) are merged: an input computed by elementwise ops is computed tile by tile when activation
fusion takes it into the add's group (groups walk through 1×1 convs), and the concat would make it a
full-size tensor again. A ResNet block whose downsample conv is Tucker-decomposed has this form
(`bn2(lconv2(core2)) + bn_d(lconv_d(core_d))`); with the default `skip-pointwise` the zoo's ResNets
have none (identity skips end in a ReLU, downsample convs are 1×1 stride-2 and not decomposed).
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

from ..ir_utils import all_parallel, walk_ops
from ..passes.registry import Option, Pass, register_pass, report_option
from ..errors import format_location
from .fold_weight_ops import constant_input
from ..ir_constants import constant_array, make_constant

_CONV = "linalg.conv_2d_nchw_fchw"


def _producer(value):
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def _shape(value) -> list[int]:
    return list(ir.ShapedType(value.type).shape)


def _static(value) -> bool:
    t = value.type.maybe_downcast()
    return isinstance(t, ir.RankedTensorType) and t.has_static_shape


def _ints(op, name: str) -> list[int]:
    return [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])] if name in op.attributes else [1, 1]


def _init_bias(init, channels: int):
    """The per-channel values an lconv's init holds (a fill of a constant scalar, or a constant vector
    broadcast along N, H, W), or None."""
    producer = _producer(init)
    if producer is None:
        return None
    if producer.name == "linalg.fill":
        scalar = _producer(producer.operands[0])
        if scalar is None or scalar.name != "arith.constant":
            return None
        attr = scalar.attributes["value"].maybe_downcast()
        return np.full(channels, ir.FloatAttr(attr).value) if isinstance(attr, ir.FloatAttr) else None
    if producer.name == "linalg.broadcast" and list(ir.DenseI64ArrayAttr(producer.attributes["dimensions"])) == [0, 2, 3]:
        source = _producer(producer.operands[0])
        if source is not None and source.name == "arith.constant" and _shape(producer.operands[0]) == [channels]:
            return constant_array(source)
    return None


def _mergeable(value):
    """(lconv, weight array, bias vector) when `value` is an lconv result the concat alone reads."""
    conv = _producer(value)
    if (conv is None or conv.name != _CONV or len(list(value.uses)) != 1
            or not all(_static(v) for v in list(conv.operands) + list(conv.results))):
        return None
    if _shape(conv.operands[1])[2:] != [1, 1] or _ints(conv, "strides") != [1, 1] or _ints(conv, "dilations") != [1, 1]:
        return None
    weight = _producer(conv.operands[1])
    if weight is None or weight.name != "arith.constant":
        return None
    f, r = _shape(conv.operands[1])[:2]
    if f <= r:
        return None  # not an lconv (IsLConv: more outputs than inputs)
    bias = _init_bias(conv.operands[2], f)
    if bias is None:
        return None
    return conv, constant_array(weight), bias


def _merge_run(concat, run: list) -> ir.Value:
    """One block-diagonal lconv for `run` (list of (conv, weight, bias)), inserted before `concat`."""
    f_total = sum(wt.shape[0] for _, wt, _ in run)
    r_total = sum(wt.shape[1] for _, wt, _ in run)
    weight = np.zeros((f_total, r_total, 1, 1), dtype=run[0][1].dtype)
    f0 = r0 = 0
    for _, wt, _ in run:
        weight[f0:f0 + wt.shape[0], r0:r0 + wt.shape[1]] = wt
        f0, r0 = f0 + wt.shape[0], r0 + wt.shape[1]
    bias = np.concatenate([b for _, _, b in run]).astype(weight.dtype)
    return _lconv_over_concat(concat, [conv for conv, _, _ in run], weight, bias)


def _lconv_over_concat(before, convs: list, weight: np.ndarray, bias: np.ndarray) -> ir.Value:
    """`conv_1x1(concat(reduced inputs of convs), weight)` accumulating into `bias` broadcast (or a
    zero fill), inserted before `before`; marked as an lconv."""
    element_type = ir.RankedTensorType(convs[0].results[0].type).element_type
    n, _, h, w = _shape(convs[0].operands[0])
    f_total, r_total = weight.shape[:2]
    with ir.InsertionPoint(before), before.location:
        reduced = tensor.ConcatOp(ir.RankedTensorType.get([n, r_total, h, w], element_type), 1,
                                  [conv.operands[0] for conv in convs]).result
        out_type = ir.RankedTensorType.get([n, f_total, h, w], element_type)
        empty = tensor.EmptyOp([n, f_total, h, w], element_type).result
        if not bias.any():
            zero = _scalar_constant(0.0, element_type)
            init = linalg.fill(zero, outs=[empty])
        else:
            init = linalg.broadcast(make_constant(bias, element_type), outs=[empty], dimensions=[0, 2, 3])
        merged = linalg.Conv2DNchwFchwOp(result_tensors=[out_type], inputs=[reduced, make_constant(weight, element_type)],
                                         outputs=[init], strides=convs[0].attributes["strides"],
                                         dilations=convs[0].attributes["dilations"])
        fill_conv_body(merged)
        merged.operation.attributes["temco.role"] = ir.StringAttr.get("lconv")
    return merged.results[0]


# -- the add form ------------------------------------------------------------------------------------

_AFFINE_OPS = ("arith.addf", "arith.subf", "arith.mulf")


def _parallel_generic(op, inputs: int) -> bool:
    return (op.name == "linalg.generic" and len(op.results) == 1 and len(op.operands) == inputs + 1
            and all_parallel(op)
            and _static(op.results[0]))


def _body_op(op):
    """The single arith op of a generic's body whose operands are the two input block arguments and
    whose result is yielded, as (name, operand argument numbers), else None."""
    block = op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    if len(ops) != 2 or ops[1].name != "linalg.yield" or ops[0].name not in _AFFINE_OPS:
        return None
    if ops[1].operands[0] != ops[0].results[0]:
        return None
    args = list(block.arguments)
    try:
        numbers = [next(i for i, a in enumerate(args[:2]) if a == v) for v in ops[0].operands]
    except StopIteration:
        return None
    return (ops[0].name, numbers) if sorted(numbers) == [0, 1] else None


def _is_identity(amap, rank: int) -> bool:
    return amap == ir.AffineMap.get_identity(rank, context=amap.context)


def _channel_vector(value, amap, channels: int):
    """The per-channel vector an operand holds when its map reads it by d1 (the channel) and constant
    0s — BatchNorm's `[C,1,1]` constants — and it is constant, else None."""
    array = constant_input(value)
    if array is None:
        return None
    index = []
    for k, expr in enumerate(amap.results):
        expr = expr.maybe_downcast()
        if isinstance(expr, ir.AffineDimExpr) and expr.position == 1 and array.shape[k] == channels:
            index.append(slice(None))
        elif isinstance(expr, ir.AffineConstantExpr) and expr.value == 0:
            index.append(0)
        else:
            return None
    if index.count(slice(None)) != 1:
        return None
    return np.asarray(array[tuple(index)], dtype=np.float64)


def _affine_step(op, value):
    """(input value, op name, constant vector, tensor first) when `op` computes `value` as
    `x ∘ c` / `c ∘ x` with x = its input of `value`'s type (identity map) and c per channel."""
    if not _parallel_generic(op, 2):
        return None
    body = _body_op(op)
    if body is None:
        return None
    rank = len(_shape(value))
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if not _is_identity(maps[2], rank):
        return None
    channels = _shape(value)[1]
    for k in (0, 1):
        x, c = op.operands[k], op.operands[1 - k]
        if x.type != value.type or not _is_identity(maps[k], rank):
            continue
        vector = _channel_vector(c, maps[1 - k], channels)
        if vector is not None:
            name, numbers = body
            return x, name, vector, numbers[0] == k
    return None


def _lconv_branch(value):
    """(lconv, weight, bias, scale, shift, chain) when `value` = s·lconv(r) + t through per-channel
    affine generics (`chain`, nearest the add first), each used once, and r is a conv result; else None."""
    chain, steps = [], []
    while True:
        producer = _producer(value)
        if producer is None or len(list(value.uses)) != 1:
            return None
        step = _affine_step(producer, value)
        if step is None:
            break
        chain.append(producer)
        steps.append(step[1:])
        value = step[0]
    part = _mergeable(value)
    if part is None:
        return None
    conv, weight, bias = part
    source = _producer(conv.operands[0])
    if source is None or not source.name.startswith("linalg.conv"):
        return None  # not a reduced tensor: fusion would compute it per tile
    channels = weight.shape[0]
    scale, shift = np.ones(channels), np.zeros(channels)
    for name, c, tensor_first in reversed(steps):  # program order
        if name == "arith.mulf":
            scale, shift = scale * c, shift * c
        elif name == "arith.addf":
            shift = shift + c
        elif tensor_first:  # x - c
            shift = shift - c
        else:  # c - x
            scale, shift = -scale, c - shift
    return conv, weight, bias, scale, shift, chain


def _add_of_lconvs(op):
    """The two branches when `op` is an elementwise add of two lconv branches of the same type."""
    if not _parallel_generic(op, 2) or (_body_op(op) or ("",))[0] != "arith.addf":
        return None
    value = op.results[0]
    rank = len(_shape(value))
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if rank != 4 or not all(_is_identity(m, rank) for m in maps) or any(v.type != value.type for v in op.operands[:2]):
        return None
    branches = [_lconv_branch(v) for v in op.operands[:2]]
    if any(b is None for b in branches) or branches[0][0] == branches[1][0]:
        return None
    return branches


def merge_add_lconvs(func_or_module) -> list[str]:
    """The add form of Fig. 9a on every matching add under `func_or_module`; one report line each."""
    lines = []
    root = func_or_module.operation if hasattr(func_or_module, "operation") else func_or_module
    for add in walk_ops(root, "linalg.generic"):
        branches = _add_of_lconvs(add)
        if branches is None:
            continue
        weights, bias = [], np.zeros(branches[0][1].shape[0])
        for _, weight, b, scale, shift, _ in branches:
            weights.append(weight.astype(np.float64) * scale[:, None, None, None])
            bias = bias + scale * b + shift
        dtype = branches[0][1].dtype
        where = format_location(add.location)
        merged = _lconv_over_concat(add, [b[0] for b in branches], np.concatenate(weights, axis=1).astype(dtype),
                                    bias.astype(dtype))
        add.results[0].replace_all_uses_with(merged)
        add.erase()
        for conv, weight, _, _, _, chain in branches:
            for op in chain:
                op.erase()
            conv.erase()
        (fa, ra), (fb, rb) = (b[1].shape[:2] for b in branches)
        lines.append(f"temco-merge-lconvs: {where}: add of 2 lconvs ({fa}x{ra}, {fb}x{rb}; "
                     f"{len(branches[0][5])}+{len(branches[1][5])} per-channel ops folded) "
                     f"-> one lconv over the concatenated reduced inputs\n")
    return lines


def _scalar_constant(value: float, element_type):
    """An `arith.constant` scalar of `element_type` at the current insertion point."""
    return arith.ConstantOp(element_type, ir.FloatAttr.get(element_type, value)).result


def merge_lconvs(module, add_form: bool = True) -> list[str]:
    """Apply the pass under `module`: the concat form to every channel concat, then (with `add_form`)
    the add form to every add of two lconv branches; one report line per merge."""
    lines = []
    root = module.operation if hasattr(module, "operation") else module
    for concat in walk_ops(root, "tensor.concat"):
        if ir.IntegerAttr(concat.attributes["dim"]).value != 1 or not _static(concat.results[0]):
            continue
        parts = [_mergeable(v) for v in concat.operands]
        # runs of consecutive mergeable operands, length >= 2
        runs, current = [], []
        for i, part in enumerate(parts + [None]):
            if part is not None:
                current.append(i)
            else:
                if len(current) >= 2:
                    runs.append(current)
                current = []
        if not runs:
            continue
        operands = list(concat.operands)
        merged_at = {}
        for run in runs:
            merged_at[run[0]] = (_merge_run(concat, [parts[i] for i in run]), run)
            lines.append(f"temco-merge-lconvs: {format_location(concat.location)}: {len(run)} lconvs "
                         f"({', '.join(str(parts[i][1].shape[0]) + 'x' + str(parts[i][1].shape[1]) for i in run)}) "
                         f"-> one block-diagonal lconv\n")
        new_operands, skip = [], set()
        for i, value in enumerate(operands):
            if i in merged_at:
                new_operands.append(merged_at[i][0])
                skip.update(merged_at[i][1])
            elif i not in skip:
                new_operands.append(value)
        old_convs = [parts[i][0] for run in runs for i in run]
        if len(new_operands) == 1:
            concat.results[0].replace_all_uses_with(new_operands[0])
        else:
            with ir.InsertionPoint(concat), concat.location:
                joined = tensor.ConcatOp(concat.results[0].type, 1, new_operands)
            concat.results[0].replace_all_uses_with(joined.result)
        concat.erase()
        for conv in old_convs:
            conv.erase()
    if add_form:
        lines += merge_add_lconvs(root)
    return lines


@register_pass
class TemcoMergeLconvs(Pass):
    name = "temco-merge-lconvs"
    summary = "Merge lconvs that are concatenated or added into one lconv over the concatenated reduced inputs"
    description = (
        "TeMCO (ICPP'24) §3.3, Fig. 9a: a run of concat operands that are 1x1 lconvs (constant weights, "
        "fill or bias-broadcast inits, used only by the concat) becomes one lconv whose weight holds "
        "theirs on the block diagonal, reading the concat of their reduced inputs (bitwise). Add form "
        "(Fig. 9c -> 9a): add(s_a*lconv_a(r_a)+t_a, s_b*lconv_b(r_b)+t_b), the affine parts per-channel "
        "constant generics (BatchNorm), becomes one lconv over concat(r_a, r_b) with weights "
        "[s_a*W_a | s_b*W_b] and the biases summed (fp32 tolerance: the summation order changes)."
    )
    options = (
        Option("add-form", bool, True, "also merge adds of two lconv branches (not bitwise: fp32 tolerance)"),
        report_option("one line per merge"),
    )

    def run(self, module) -> None:
        self.write_report(module, "".join(merge_lconvs(module, self.add_form)))


def fill_conv_body(conv) -> None:
    """The named conv's region (the Python builder leaves it empty): out + in * w."""
    element_type = ir.ShapedType(conv.results[0].type).element_type
    block = conv.regions[0].blocks.append(element_type, element_type, element_type)
    with ir.InsertionPoint(block):
        product = arith.MulFOp(block.arguments[0], block.arguments[1])
        linalg.YieldOp([arith.AddFOp(block.arguments[2], product)])
