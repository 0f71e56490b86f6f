"""`temco-merge-lconvs`: lconvs concatenated along channels become one block-diagonal lconv (TeMCO Fig. 9a).

Song et al., ICPP'24 (../shared/papers/temco-decomposition-memory.txt), §3.3: "the
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
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ..ir_utils import walk_ops
from ..passes.registry import Option, Pass, register_pass
from ..passes.vt_stats import format_loc
from .weights import constant_array, make_constant

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
    element_type = ir.RankedTensorType(concat.results[0].type).element_type
    n, _, h, w = _shape(run[0][0].operands[0])
    f_total = sum(wt.shape[0] for _, wt, _ in run)
    r_total = sum(wt.shape[1] for _, wt, _ in run)
    weight = np.zeros((f_total, r_total, 1, 1), dtype=run[0][1].dtype)
    f0 = r0 = 0
    for _, wt, _ in run:
        weight[f0:f0 + wt.shape[0], r0:r0 + wt.shape[1]] = wt
        f0, r0 = f0 + wt.shape[0], r0 + wt.shape[1]
    bias = np.concatenate([b for _, _, b in run]).astype(weight.dtype)
    with ir.InsertionPoint(concat), concat.location:
        reduced = tensor.ConcatOp(ir.RankedTensorType.get([n, r_total, h, w], element_type), 1,
                                  [conv.operands[0] for conv, _, _ in run]).result
        out_type = ir.RankedTensorType.get([n, f_total, h, w], element_type)
        empty = tensor.EmptyOp([n, f_total, h, w], element_type).result
        if not bias.any():
            zero = _scalar_constant(0.0, element_type)
            init = linalg.fill(zero, outs=[empty])
        else:
            init = linalg.broadcast(make_constant(bias, element_type), outs=[empty], dimensions=[0, 2, 3])
        merged = linalg.Conv2DNchwFchwOp(result_tensors=[out_type], inputs=[reduced, make_constant(weight, element_type)],
                                         outputs=[init], strides=run[0][0].attributes["strides"],
                                         dilations=run[0][0].attributes["dilations"])
        from .fuse import _fill_conv_body

        _fill_conv_body(merged)
        merged.operation.attributes["temco.role"] = ir.StringAttr.get("lconv")
    return merged.results[0]


def _scalar_constant(value: float, element_type):
    """An `arith.constant` scalar of `element_type` at the current insertion point."""
    from torch_mlir.dialects import arith

    return arith.ConstantOp(element_type, ir.FloatAttr.get(element_type, value)).result


def merge_lconvs(module) -> list[str]:
    """Apply the pass to every channel concat under `module`; one report line per merged run."""
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
            lines.append(f"temco-merge-lconvs: {format_loc(concat.location)}: {len(run)} lconvs "
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
    return lines


@register_pass
class TemcoMergeLconvs(Pass):
    name = "temco-merge-lconvs"
    summary = "Merge lconvs concatenated along channels into one block-diagonal lconv over the concatenated reduced inputs"
    description = (
        "TeMCO (ICPP'24) §3.3, Fig. 9a: a run of concat operands that are 1x1 lconvs (constant weights, "
        "fill or bias-broadcast inits, used only by the concat) becomes one lconv whose weight holds "
        "theirs on the block diagonal, reading the concat of their reduced inputs."
    )
    options = (Option("output", str, "none", "one line per merged run: stderr ('-'), a file, or 'none'"),)

    def run(self, module) -> None:
        self.write_report(module, self.output, "".join(merge_lconvs(module)))
