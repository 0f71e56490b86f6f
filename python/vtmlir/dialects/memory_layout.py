"""Memory layouts of the `layout` dialect (VTensor §4/§5.1): identity, permutation, blocked.

A layout says where each element of a *logical* tensor (dims in the order the op sees them, e.g.
N, C, H, W) sits in the *physical* row-major tensor that holds it:

- `perm`: physical outer dim i holds logical dim `perm[i]` (NHWC over NCHW is perm = [0, 2, 3, 1]);
- `blocks`: (logical dim, inner size) pairs; each block splits that dim outer×inner and appends the
  inner part as a new innermost physical dim, in the listed order (NCHW16c: blocks = [(1, 16)]).
  Several blocks on one dim nest, the first listed being the more significant (OIhw4i16o4i).

Identity is perm = iota, no blocks. The logical→physical index map is an affine map (floordiv/mod
for blocks), so a `layout.convert` is the `vt` mapping `src.index_map ∘ dst.logical_index_map` —
which `layout-materialize` can turn into a free virtual view where VTC applies.

Attribute encoding (a builtin dictionary; see dialects/README.md):

    {perm = array<i64: 0, 2, 3, 1>}                                  // NHWC
    {perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>,
     block_sizes = array<i64: 16>}                                   // NCHW16c

Register layouts (Tilus §4: local, spatial, column variants, composition, division) are in
`register_layout.py`, with their own encoding; their decoder sits in front of this one in
`LAYOUT_DECODERS`, so `layout_from_attr` returns either kind.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from torch_mlir import ir

from .affine_eval import compose_maps

_DYNAMIC = ir.ShapedType.get_dynamic_size()


class LayoutFormatError(ValueError):
    """The attribute is not a well-formed layout encoding."""


def _static(e: int) -> bool:
    return e >= 0 and e != _DYNAMIC


@dataclass(frozen=True)
class Layout:
    """A memory layout: outer-dim permutation plus inner blocks (see the module docstring)."""

    perm: tuple[int, ...]
    blocks: tuple[tuple[int, int], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "perm", tuple(int(p) for p in self.perm))
        object.__setattr__(self, "blocks", tuple((int(d), int(s)) for d, s in self.blocks))

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def identity(cls, rank: int) -> "Layout":
        return cls(tuple(range(rank)))

    @classmethod
    def permutation(cls, perm: Sequence[int]) -> "Layout":
        return cls(tuple(perm))

    @classmethod
    def blocked(cls, rank: int, dim: int, inner: int, perm: Sequence[int] | None = None) -> "Layout":
        """Logical `dim` split outer×`inner`, inner innermost (NCHW16c = blocked(4, 1, 16))."""
        return cls(tuple(perm) if perm is not None else tuple(range(rank)), ((dim, inner),))

    @classmethod
    def from_name(cls, name: str, logical: str = "NCHW") -> "Layout":
        """oneDNN-style names over the letters of `logical`: "NHWC", "NCHW16c" (= oneDNN nChw16c),
        "OIhw4i16o4i": a letter alone is an outer dim (either case), a number then a lower-case
        letter an inner block of that dim."""
        logical = logical.upper()
        perm, blocks, i = [], [], 0
        while i < len(name):
            if name[i].isdigit():
                j = i
                while j < len(name) and name[j].isdigit():
                    j += 1
                if j == len(name) or not name[j].islower():
                    raise LayoutFormatError(f"'{name}': a block size must precede a lower-case dim")
                blocks.append((_letter(logical, name[j], name), int(name[i:j])))
                i = j + 1
            elif name[i].isalpha():
                perm.append(_letter(logical, name[i], name))
                i += 1
            else:
                raise LayoutFormatError(f"'{name}': unexpected '{name[i]}'")
        layout = cls(tuple(perm), tuple(blocks))
        error = layout.validate()
        if error:
            raise LayoutFormatError(f"'{name}': {error}")
        if layout.rank != len(logical):
            raise LayoutFormatError(f"'{name}' names {layout.rank} dims, '{logical}' has {len(logical)}")
        return layout

    def name(self, logical: str = "NCHW") -> str:
        """Inverse of `from_name`."""
        outer = "".join(logical[p].upper() for p in self.perm)
        return outer + "".join(f"{s}{logical[d].lower()}" for d, s in self.blocks)

    # -- attribute encoding -------------------------------------------------------------------

    def to_attr(self) -> ir.DictAttr:
        entries = {"perm": ir.DenseI64ArrayAttr.get(list(self.perm))}
        if self.blocks:
            entries["block_dims"] = ir.DenseI64ArrayAttr.get([d for d, _ in self.blocks])
            entries["block_sizes"] = ir.DenseI64ArrayAttr.get([s for _, s in self.blocks])
        return ir.DictAttr.get(entries)

    @classmethod
    def from_attr(cls, attr: ir.Attribute) -> "Layout":
        try:
            d = ir.DictAttr(attr)
        except ValueError:
            raise LayoutFormatError(f"expected a layout dictionary, got {attr}") from None
        names = {d[i].name for i in range(len(d))}
        unknown = names - {"perm", "block_dims", "block_sizes"}
        if unknown:
            raise LayoutFormatError(f"unknown layout key(s) {sorted(unknown)}")
        if "perm" not in names:
            raise LayoutFormatError("layout lacks 'perm'")

        def array(key):
            try:
                return list(ir.DenseI64ArrayAttr(d[key]))
            except (ValueError, TypeError):  # TypeError: an array of another element type
                raise LayoutFormatError(f"'{key}' must be an array<i64>") from None

        perm = array("perm")
        if ("block_dims" in names) != ("block_sizes" in names):
            raise LayoutFormatError("'block_dims' and 'block_sizes' must be given together")
        blocks = []
        if "block_dims" in names:
            dims, sizes = array("block_dims"), array("block_sizes")
            if len(dims) != len(sizes):
                raise LayoutFormatError("'block_dims' and 'block_sizes' differ in length")
            blocks = list(zip(dims, sizes))
        layout = cls(tuple(perm), tuple(blocks))
        error = layout.validate()
        if error:
            raise LayoutFormatError(error)
        return layout

    def validate(self) -> str | None:
        """What is wrong with this layout on its own (no shape), or None."""
        if sorted(self.perm) != list(range(len(self.perm))):
            return f"perm {list(self.perm)} is not a permutation of 0..{len(self.perm) - 1}"
        for d, s in self.blocks:
            if not 0 <= d < len(self.perm):
                return f"block dim {d} out of range for rank {len(self.perm)}"
            if s < 1:
                return f"block size {s} of dim {d} must be positive"
        return None

    # -- queries ------------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """Logical rank."""
        return len(self.perm)

    @property
    def physical_rank(self) -> int:
        return len(self.perm) + len(self.blocks)

    @property
    def is_identity(self) -> bool:
        return not self.blocks and self.perm == tuple(range(self.rank))

    def block_factor(self, dim: int) -> int:
        f = 1
        for d, s in self.blocks:
            if d == dim:
                f *= s
        return f

    def check_shape(self, logical_shape: Sequence[int]) -> str | None:
        """What stops this layout holding a tensor of `logical_shape`, or None."""
        if len(logical_shape) != self.rank:
            return f"layout has logical rank {self.rank} but the shape {list(logical_shape)} has " \
                   f"rank {len(logical_shape)}"
        for d in range(self.rank):
            f = self.block_factor(d)
            if f > 1 and _static(logical_shape[d]) and logical_shape[d] % f:
                return f"logical dim {d} of size {logical_shape[d]} is not divisible by its block {f}"
        return None

    def physical_shape(self, logical_shape: Sequence[int]) -> list[int]:
        error = self.check_shape(logical_shape)
        if error:
            raise ValueError(error)
        outer = [self._outer(logical_shape[p], p) for p in self.perm]
        return outer + [s for _, s in self.blocks]

    def logical_shape(self, physical_shape: Sequence[int]) -> list[int]:
        if len(physical_shape) != self.physical_rank:
            raise ValueError(f"layout has physical rank {self.physical_rank} but the shape "
                             f"{list(physical_shape)} has rank {len(physical_shape)}")
        for (d, s), e in zip(self.blocks, physical_shape[self.rank:]):
            if _static(e) and e != s:
                raise ValueError(f"inner block of dim {d} has size {e}, the layout says {s}")
        logical = [0] * self.rank
        for i, p in enumerate(self.perm):
            e = physical_shape[i]
            logical[p] = e * self.block_factor(p) if _static(e) else _DYNAMIC
        return logical

    def _outer(self, extent: int, dim: int) -> int:
        return extent // self.block_factor(dim) if _static(extent) else _DYNAMIC

    def index_map(self) -> ir.AffineMap:
        """Logical index -> physical index (needs a context)."""
        x = [ir.AffineDimExpr.get(i) for i in range(self.rank)]
        results = []
        for p in self.perm:
            f = self.block_factor(p)
            results.append(x[p] if f == 1 else ir.AffineExpr.get_floor_div(x[p], f))
        for j, (d, s) in enumerate(self.blocks):
            below = 1
            for d2, s2 in self.blocks[j + 1:]:
                if d2 == d:
                    below *= s2
            e = x[d] if below == 1 else ir.AffineExpr.get_floor_div(x[d], below)
            results.append(ir.AffineExpr.get_mod(e, s))
        return ir.AffineMap.get(self.rank, 0, results)

    def logical_index_map(self) -> ir.AffineMap:
        """Physical index -> logical index (needs a context)."""
        p = [ir.AffineDimExpr.get(i) for i in range(self.physical_rank)]
        terms: list[ir.AffineExpr | None] = [None] * self.rank
        for i, d in enumerate(self.perm):
            terms[d] = p[i] * self.block_factor(d)
        for j, (d, s) in enumerate(self.blocks):
            below = 1
            for d2, s2 in self.blocks[j + 1:]:
                if d2 == d:
                    below *= s2
            terms[d] = terms[d] + p[self.rank + j] * below
        return ir.AffineMap.get(self.physical_rank, 0, terms)

    def apply(self, logical_index: Sequence[int]) -> tuple[int, ...]:
        """Physical index of a logical index (pure Python)."""
        out = []
        for p in self.perm:
            out.append(logical_index[p] // self.block_factor(p))
        for j, (d, s) in enumerate(self.blocks):
            below = 1
            for d2, s2 in self.blocks[j + 1:]:
                if d2 == d:
                    below *= s2
            out.append((logical_index[d] // below) % s)
        return tuple(out)

    def expansion(self, logical_shape: Sequence[int]) -> tuple[list[int], list[list[int]], list[int]]:
        """How a row-major logical array becomes this layout's physical array by a reshape and a
        transpose: `(sizes, reassociation, order)` — the logical array expanded to `sizes` (each
        logical dim `d` to the group `reassociation[d]`: its outer part, then its blocks in listed
        order), then transposed by `order` (`tensor.expand_shape` + `linalg.transpose`)."""
        error = self.check_shape(logical_shape)
        if error:
            raise ValueError(error)
        sizes: list[int] = []
        reassociation: list[list[int]] = []
        outer_axis: dict[int, int] = {}
        block_axis: dict[int, int] = {}
        for d in range(self.rank):
            group = [len(sizes)]
            outer_axis[d] = len(sizes)
            sizes.append(self._outer(logical_shape[d], d))
            for j, (bd, bs) in enumerate(self.blocks):
                if bd == d:
                    block_axis[j] = len(sizes)
                    group.append(len(sizes))
                    sizes.append(bs)
            reassociation.append(group)
        order = [outer_axis[p] for p in self.perm] + [block_axis[j] for j in range(len(self.blocks))]
        return sizes, reassociation, order

    def physical_array(self, logical):
        """The physical array (numpy) holding the row-major logical numpy array `logical`."""
        sizes, _, order = self.expansion(list(logical.shape))
        return np.ascontiguousarray(np.asarray(logical).reshape(sizes).transpose(order))

    def conversion_map(self, dst: "Layout") -> ir.AffineMap:
        """Index map of converting from `self` to `dst`: dst physical index -> src physical index
        (a `vt` mapping piece for a view of the source in the destination layout)."""
        if dst.rank != self.rank:
            raise ValueError(f"layouts of logical rank {self.rank} and {dst.rank} do not convert")
        return compose_maps(self.index_map(), dst.logical_index_map())


def _letter(logical: str, ch: str, name: str) -> int:
    i = logical.find(ch.upper())
    if i < 0:
        raise LayoutFormatError(f"'{name}': '{ch}' is not a dim of '{logical}'")
    return i


LayoutDecoder = Callable[[ir.Attribute], object | None]

#: Decoders tried in order by `layout_from_attr`; each returns a layout object or None when the
#: attribute is not its kind. The memory decoder (last) claims every dictionary, so register layouts
#: (Tilus) either use another encoding or insert their decoder in front of it.
LAYOUT_DECODERS: list[LayoutDecoder] = []


def _decode_memory(attr: ir.Attribute):
    try:
        d = ir.DictAttr(attr)
    except ValueError:
        return None
    return Layout.from_attr(d)


LAYOUT_DECODERS.append(_decode_memory)


def layout_from_attr(attr: ir.Attribute):
    """The layout object an attribute encodes, trying each registered decoder."""
    for decode in LAYOUT_DECODERS:
        result = decode(attr)
        if result is not None:
            return result
    raise LayoutFormatError(f"not a layout attribute: {attr}")

