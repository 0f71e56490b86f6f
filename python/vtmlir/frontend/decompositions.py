"""FX decompositions that replace aten ops torch-mlir lowers wrongly (issue 18).

`torch_import._decomposition_table` adds these to torch-mlir's table, so the graph
torch-mlir imports holds only ops it lowers correctly. Each one is exact (same values, bit for bit):

- `aten.roll`: torch-mlir decomposes it (`DecomposeAtenRollOp` in
  lib/Dialect/Torch/Transforms/DecomposeComplexOps.cpp, llvm/torch-mlir#1170) into
  `cat(slice(x, -shift, None), slice(x, 0, -shift))` without reducing the shift modulo the size:
  a shift with |shift| >= size gives the identity or a wrong rotation (`roll(x, -8, 0)` on 3 rows)
  or an out-of-bounds slice, and a dimension of size 1 fails to compile ("offset 1 is
  out-of-bounds"). Here: `s = shift mod size`, `cat(narrow(x, d, size - s, s), narrow(x, d, 0, size - s))`,
  nothing for s = 0 (a slice and a concat: VTC turns them into one virtual tensor).
- `aten.constant_pad_nd` with a negative width (cropping, `F.pad(x, [-1, 1])`): torch-mlir makes a
  `tensor.pad` with negative low/high, which folds to the input (`F.pad(x, [-1, 1])` imported as
  `return %arg0`) or fails to compile ("expected offsets to be non-negative"). Here the negative
  widths become `narrow`s and the rest a non-negative `constant_pad_nd`; pads without a negative
  width are left to torch-mlir.
- ops along a dimension of a 0-d tensor (PyTorch treats a 0-d tensor as having one dimension 0 of
  size 1 for them): torch-mlir's `torch-decompose-complex-ops` loops forever on `_softmax` of a 0-d
  tensor (the import hangs), and has no lowering for `amax`, `amin`, `argmax`, `argmin`, `max.dim`,
  `min.dim`, `cumsum`, `_log_softmax` or `logsumexp` of one. Here the op runs on the one-element 1-d
  tensor and its result is viewed back as 0-d (`rank_zero_as_rank_one`).
A search of torch-mlir's issue tracker found no report of any of these (checked for issue 18).
Symbolic (dynamic) sizes are left to torch-mlir: the rewrite needs the size as a number.
"""

from __future__ import annotations


def add_corrections(table: dict) -> dict:
    """`table` (torch-mlir's FX decomposition table) with vtmlir's corrections on top."""
    import torch  # deferred: torch is heavy; loaded on first use

    aten = torch.ops.aten
    table[aten.roll.default] = roll
    table[aten.constant_pad_nd.default] = constant_pad_nd
    for op in (aten._softmax.default, aten._log_softmax.default, aten.amax.default, aten.amin.default,
               aten.argmax.default, aten.argmin.default, aten.max.dim, aten.min.dim, aten.cumsum.default,
               aten.cumprod.default, aten.logsumexp.default):
        table[op] = rank_zero_as_rank_one(op, table.get(op))
    return table


def rank_zero_as_rank_one(op, otherwise=None):
    """A decomposition of `op` (taking a tensor first) for 0-d tensors: `op` of the tensor viewed as
    1-d (the dimension 0 or -1 PyTorch lets a 0-d tensor have), results viewed back as 0-d. Other
    ranks get `otherwise` (the table's own decomposition of `op`), if any."""

    def decomposition(x, *args, **kwargs):
        if x.dim() != 0:
            return otherwise(x, *args, **kwargs) if otherwise is not None else NotImplemented
        out = op(x.reshape(1), *args, **kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(o.reshape(()) for o in out)
        return out.reshape(())

    return decomposition


def roll(x, shifts, dims=()):
    """`aten.roll` as narrows and a concat per rolled dimension (shift reduced modulo the size)."""
    import torch  # deferred: torch is heavy; loaded on first use

    shifts, dims = list(shifts), list(dims)
    if not dims:  # roll of the flattened tensor
        if len(shifts) != 1 or not isinstance(x.numel(), int):
            return NotImplemented
        return roll(x.flatten(), shifts, [0]).view(x.shape)
    if len(shifts) != len(dims) or not all(isinstance(x.shape[d], int) and isinstance(s, int)
                                           for s, d in zip(shifts, dims)):
        return NotImplemented
    out = x
    for shift, dim in zip(shifts, dims):
        size = x.shape[dim]
        s = shift % size if size else 0
        if s:
            out = torch.cat([out.narrow(dim, size - s, s), out.narrow(dim, 0, size - s)], dim)
    return out.clone() if out is x else out


def constant_pad_nd(x, pad, value=0):
    """`aten.constant_pad_nd` with negative widths as narrows, then a non-negative pad."""
    import torch  # deferred: torch is heavy; loaded on first use

    pad = list(pad)
    if not all(isinstance(p, int) for p in pad) or all(p >= 0 for p in pad):
        return NotImplemented
    out = x
    for i in range(len(pad) // 2):
        dim = x.dim() - 1 - i
        low, high = pad[2 * i], pad[2 * i + 1]
        if not isinstance(out.shape[dim], int):
            return NotImplemented
        if low < 0:
            out = out.narrow(dim, -low, out.shape[dim] + low)
        if high < 0:
            out = out.narrow(dim, 0, out.shape[dim] + high)
    rest = [max(p, 0) for p in pad]
    if any(rest):
        return torch.ops.aten.constant_pad_nd(out, rest, value)
    return out.clone()
