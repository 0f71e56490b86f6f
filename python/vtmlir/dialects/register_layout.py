"""Register layouts of the `layout` dialect (Tilus §4 and Appendix A).

A register layout (Tilus Def. 1) is a function f(t, i) -> I from a thread index 0 <= t < T and a
local (register) index 0 <= i < m to the logical index I of a tile of shape S. The primitives are

- `local(n1, ..., nr)`   (Def. 2): one thread holds the whole tile, row-major: f(0, i) = unravel(i, S);
- `spatial(n1, ..., nr)` (Def. 3): one element per thread, threads row-major: f(t, 0) = unravel(t, S);
- `column_local(...)`, `column_spatial(...)` (§4.2, used in Appendix B): the same with the first
  dimension varying fastest (column-major);

and every other layout is a *composition* (Def. 4)

    (f ∘ g)(t, i) = f(t / T_g, i / m_g) ⊙ S_g + g(t % T_g, i % m_g),   T = T_f T_g, m = m_f m_g,
                                                                        S = S_f ⊙ S_g,

written `f * g` or, as in the paper, by chaining: `local(2, 1).spatial(8, 4).local(1, 2)` is the
mma.m16n8k8 operand-A layout of Fig. 3. Layouts of different ranks are broadcast first (Def. 5:
leading dimensions of extent 1). Division (Def. 6): `f / g` is the h with f = h ∘ g (right division,
the paper's `f/g`); `f.left_divide(g)` is the h with f = g ∘ h. Both raise `LayoutDivisionError`
when no such layout exists. `local(1)` is the identity (Theorem 2: a monoid).

Representation. Internally a layout is held in a canonical *mode form*: every logical dimension is
split into modes (factors, outer to inner); each mode is either a *spatial* mode (a digit of the
thread index) or a *local* mode (a digit of the register index); `spatial` / `local` list the modes
most significant first. Composition concatenates the per-dimension mode lists and the
spatial/local lists (f's first), which is exactly Def. 4; the canonical form drops extent-1 modes and
merges a mode with the next one when they are adjacent both in their dimension and in their
spatial/local list. Two layouts are equal iff their canonical forms are (the tests check this against
the function tables). These layouts are bijections: T·m = |S| (the `reduce(...)` replication of
Appendix B is not modelled).

Reinterpretation (§3, Fig. 2(c), Table 1 `View`): a register tensor of `src_bits`-bit elements in
layout `a` may be viewed at no cost as `dst_bits`-bit elements in layout `b` iff both use the same
threads and every thread holds the same number of bits: T_a = T_b and m_a·src_bits = m_b·dst_bits.
Thread t's bits are its registers' codes concatenated compactly, register 0 first, little-endian
(the §6.1 storage order of `vtmlir.lowbit.pack_bits`); `reinterpret()` computes the view.

Attribute encoding (a builtin dictionary, so any MLIR tool parses it; `layout_from_attr` decodes it
because `register_layout` puts its decoder in front of the memory-layout one):

    {shape = array<i64: 16, 8>, modes = array<i64: 2, 8, 4, 2>,
     spatial = array<i64: 1, 2>, local = array<i64: 0, 3>}       // local(2,1).spatial(8,4).local(1,2)

`modes` lists the mode extents dimension by dimension, outer to inner (their products per dimension
give `shape`, each mode >= 2); `spatial` and `local` hold mode indices, most significant first,
together a permutation of all modes. The canonical form is required (`to_attr` always writes it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from torch_mlir import ir

from .lowbit_storage import pack_bits, unpack_bits
from .memory_layout import LAYOUT_DECODERS, LayoutFormatError


class LayoutDivisionError(ValueError):
    """The layout is not divisible by the other one (no h with f = h ∘ g, resp. f = g ∘ h)."""


_KEYS = ("shape", "modes", "spatial", "local")


@dataclass(frozen=True)
class RegisterLayout:
    """A Tilus register layout in canonical mode form (see the module docstring)."""

    shape: tuple[int, ...]
    modes: tuple[int, ...]          # extents, dimension by dimension, outer to inner
    mode_dims: tuple[int, ...]      # the dimension each mode belongs to (non-decreasing)
    spatial_modes: tuple[int, ...]  # thread-index digits, most significant first
    local_modes: tuple[int, ...]    # register-index digits, most significant first

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def _build(cls, shape, dim_lists, sizes, spatial, local) -> "RegisterLayout":
        """Canonicalise a working form: `dim_lists[d]` = mode ids of dim d (outer first), `sizes`
        id -> extent, `spatial`/`local` id lists (most significant first)."""
        dim_lists = [[m for m in ms if sizes[m] != 1] for ms in dim_lists]
        spatial = [m for m in spatial if sizes[m] != 1]
        local = [m for m in local if sizes[m] != 1]
        sizes = dict(sizes)
        changed = True
        while changed:
            changed = False
            for lst in (spatial, local):
                for k in range(len(lst) - 1):
                    a, b = lst[k], lst[k + 1]
                    ms = next(ms for ms in dim_lists if a in ms)
                    j = ms.index(a)
                    if j + 1 < len(ms) and ms[j + 1] == b:
                        sizes[a] *= sizes[b]
                        del ms[j + 1]
                        del lst[k + 1]
                        changed = True
                        break
                if changed:
                    break
        order = [m for ms in dim_lists for m in ms]
        index = {m: k for k, m in enumerate(order)}
        return cls(tuple(int(s) for s in shape), tuple(int(sizes[m]) for m in order),
                   tuple(d for d, ms in enumerate(dim_lists) for _ in ms),
                   tuple(index[m] for m in spatial), tuple(index[m] for m in local))

    def _working(self, rank: int | None = None):
        """(shape, dim_lists, sizes, spatial, local) with fresh-id-able int ids, broadcast to `rank`
        (Def. 5: leading extent-1 dimensions)."""
        pad = (rank or self.rank) - self.rank
        if pad < 0:
            raise ValueError(f"cannot broadcast a rank-{self.rank} layout to rank {rank}")
        dim_lists = [[] for _ in range(pad + self.rank)]
        for k, d in enumerate(self.mode_dims):
            dim_lists[pad + d].append(k)
        return ((1,) * pad + self.shape, dim_lists, dict(enumerate(self.modes)),
                list(self.spatial_modes), list(self.local_modes))

    @classmethod
    def _primitive(cls, shape: Sequence[int], kind: str, column: bool) -> "RegisterLayout":
        shape = tuple(int(n) for n in shape)
        if not shape:
            raise ValueError(f"{kind}() needs at least one extent")
        if any(n < 1 for n in shape):
            raise ValueError(f"{kind}{shape}: extents must be positive")
        ids = list(range(len(shape)))
        order = ids[::-1] if column else ids
        spatial, local = (order, []) if kind == "spatial" else ([], order)
        return cls._build(shape, [[k] for k in ids], dict(enumerate(shape)), spatial, local)

    # -- properties ---------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_threads(self) -> int:
        """T: the number of threads."""
        return math.prod(self.modes[k] for k in self.spatial_modes)

    @property
    def local_size(self) -> int:
        """m: the number of elements (registers) each thread holds."""
        return math.prod(self.modes[k] for k in self.local_modes)

    # -- the algebra --------------------------------------------------------------------------

    def compose(self, other: "RegisterLayout") -> "RegisterLayout":
        """self ∘ other (Def. 4; ranks broadcast by Def. 5): each element of self is a tile laid
        out by other."""
        rank = max(self.rank, other.rank)
        fs, fd, fz, fsp, flo = self._working(rank)
        gs, gd, gz, gsp, glo = other._working(rank)
        off = len(fz)
        sizes = dict(fz)
        sizes.update({k + off: v for k, v in gz.items()})
        dim_lists = [a + [k + off for k in b] for a, b in zip(fd, gd)]
        shape = tuple(a * b for a, b in zip(fs, gs))
        return RegisterLayout._build(shape, dim_lists, sizes, fsp + [k + off for k in gsp],
                                     flo + [k + off for k in glo])

    __mul__ = compose

    # Paper-style chaining: spatial(2, 3).local(3, 2) == spatial(2, 3) ∘ local(3, 2).
    def local(self, *shape: int) -> "RegisterLayout":
        return self.compose(local(*shape))

    def spatial(self, *shape: int) -> "RegisterLayout":
        return self.compose(spatial(*shape))

    def column_local(self, *shape: int) -> "RegisterLayout":
        return self.compose(column_local(*shape))

    def column_spatial(self, *shape: int) -> "RegisterLayout":
        return self.compose(column_spatial(*shape))

    def canonical_at_rank(self, rank: int) -> "RegisterLayout":
        """This layout broadcast to `rank` (Def. 5)."""
        return RegisterLayout._build(*self._working(rank))

    def __truediv__(self, other: "RegisterLayout") -> "RegisterLayout":
        """Right division (Def. 6, the paper's f / g): the h with self = h ∘ other."""
        return _divide(self, other, right=True)

    def left_divide(self, other: "RegisterLayout") -> "RegisterLayout":
        """Left division: the h with self = other ∘ h."""
        return _divide(self, other, right=False)

    def divisible_by(self, other: "RegisterLayout", *, right: bool = True) -> bool:
        try:
            _divide(self, other, right=right)
        except LayoutDivisionError:
            return False
        return True

    # -- the function -------------------------------------------------------------------------

    def __call__(self, t: int, i: int) -> tuple[int, ...]:
        """The logical index f(t, i) of register i of thread t."""
        if not (0 <= t < self.num_threads and 0 <= i < self.local_size):
            raise IndexError(f"(t={t}, i={i}) outside T={self.num_threads}, m={self.local_size}")
        return tuple(int(v) for v in self.table()[t, i])

    def table(self) -> np.ndarray:
        """int64 [T, m, rank]: f(t, i) for every thread and register."""
        T, m = self.num_threads, self.local_size
        digit = [None] * len(self.modes)
        for lst, n, axis in ((self.spatial_modes, T, 0), (self.local_modes, m, 1)):
            idx = np.arange(n, dtype=np.int64)
            for k in reversed(lst):
                d = idx % self.modes[k]
                idx = idx // self.modes[k]
                digit[k] = d.reshape((-1, 1)) if axis == 0 else d.reshape((1, -1))
        out = np.zeros((T, m, self.rank), dtype=np.int64)
        for k, dim in enumerate(self.mode_dims):
            out[:, :, dim] = out[:, :, dim] * self.modes[k] + digit[k]
        return out

    def inverse_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(thread, register) arrays of the tile's shape: where each logical element lives."""
        tab = self.table()
        thread = np.empty(self.shape, dtype=np.int64)
        reg = np.empty(self.shape, dtype=np.int64)
        idx = tuple(tab[:, :, d] for d in range(self.rank))
        thread[idx] = np.arange(self.num_threads)[:, None]
        reg[idx] = np.arange(self.local_size)[None, :]
        return thread, reg

    def locate(self, index: Sequence[int]) -> tuple[int, int]:
        """(t, i) holding the logical element `index` (the inverse of f)."""
        index = tuple(int(v) for v in index)
        if len(index) != self.rank or any(not 0 <= v < n for v, n in zip(index, self.shape)):
            raise IndexError(f"{list(index)} outside shape {list(self.shape)}")
        t = i = 0
        digits = {}
        for dim in range(self.rank):
            v = index[dim]
            for k in reversed([k for k, d in enumerate(self.mode_dims) if d == dim]):
                digits[k] = v % self.modes[k]
                v //= self.modes[k]
        for k in self.spatial_modes:
            t = t * self.modes[k] + digits[k]
        for k in self.local_modes:
            i = i * self.modes[k] + digits[k]
        return t, i

    def locate_affine(self, index: Sequence[ir.AffineExpr]) -> tuple[ir.AffineExpr, ir.AffineExpr]:
        """`locate` as affine expressions of the logical index (one `ir.AffineExpr` per dimension,
        built in the current context): (thread expr, register expr). Every mode digit is
        `(x floordiv inner) mod extent`, so the inverse of any layout is affine with constant
        floordiv/mod; subbyte-pack uses it to turn a tile layout into the weight re-layout map (Fig. 8)."""
        if len(index) != self.rank:
            raise ValueError(f"{len(index)} index expressions for a rank-{self.rank} layout")
        digits = {}
        for dim in range(self.rank):
            inner = 1
            members = [k for k, d in enumerate(self.mode_dims) if d == dim]
            for pos, k in enumerate(reversed(members)):
                e = index[dim] if inner == 1 else ir.AffineExpr.get_floor_div(index[dim], inner)
                outermost = pos == len(members) - 1 and inner * self.modes[k] == self.shape[dim]
                digits[k] = e if outermost else ir.AffineExpr.get_mod(e, self.modes[k])
                inner *= self.modes[k]

        def combine(modes):
            expr, stride = ir.AffineConstantExpr.get(0), 1
            for k in reversed(modes):
                expr = expr + digits[k] * stride
                stride *= self.modes[k]
            return expr

        return combine(self.spatial_modes), combine(self.local_modes)

    def distribute(self, x: np.ndarray) -> np.ndarray:
        """[T, m]: register i of thread t holds x[f(t, i)]."""
        x = np.asarray(x)
        if tuple(x.shape) != self.shape:
            raise ValueError(f"tile of shape {list(x.shape)} does not fit layout shape {list(self.shape)}")
        tab = self.table()
        return x[tuple(tab[:, :, d] for d in range(self.rank))]

    def gather(self, regs: np.ndarray) -> np.ndarray:
        """The tile whose `distribute` is `regs` ([T, m])."""
        regs = np.asarray(regs)
        out = np.empty(self.shape, dtype=regs.dtype)
        tab = self.table()
        out[tuple(tab[:, :, d] for d in range(self.rank))] = regs
        return out

    # -- attribute encoding -------------------------------------------------------------------

    def to_attr(self) -> ir.DictAttr:
        a = ir.DenseI64ArrayAttr.get
        return ir.DictAttr.get({"shape": a(list(self.shape)), "modes": a(list(self.modes)),
                                "spatial": a(list(self.spatial_modes)), "local": a(list(self.local_modes))})

    @classmethod
    def from_attr(cls, attr: ir.Attribute) -> "RegisterLayout":
        try:
            d = ir.DictAttr(attr)
        except ValueError:
            raise LayoutFormatError(f"a register layout is a dictionary, got {attr}") from None
        fields = {}
        for named in d:
            if named.name not in _KEYS:
                raise LayoutFormatError(f"unknown register layout key '{named.name}'")
            try:
                fields[named.name] = [int(v) for v in ir.DenseI64ArrayAttr(named.attr)]
            except (ValueError, TypeError):  # TypeError: an array of another element type
                raise LayoutFormatError(f"'{named.name}' must be array<i64: ...>") from None
        missing = [k for k in _KEYS if k not in fields]
        if missing:
            raise LayoutFormatError(f"register layout misses {', '.join(missing)}")
        return cls.from_fields(**fields)

    @classmethod
    def from_fields(cls, shape, modes, spatial, local) -> "RegisterLayout":
        """Check and build from the four encoded lists (see the module docstring)."""
        shape, modes, spatial, local = map(tuple, (shape, modes, spatial, local))
        if not shape or any(n < 1 for n in shape):
            raise LayoutFormatError(f"shape {list(shape)} must be non-empty and positive")
        if any(s < 2 for s in modes):
            raise LayoutFormatError(f"modes {list(modes)} must all be >= 2")
        dims, pos = [], 0
        for dim, n in enumerate(shape):
            prod = 1
            while prod < n and pos < len(modes):
                prod *= modes[pos]
                dims.append(dim)
                pos += 1
            if prod != n:
                raise LayoutFormatError(f"modes {list(modes)} do not factor shape {list(shape)} "
                                        f"(dimension {dim})")
        if pos != len(modes):
            raise LayoutFormatError(f"modes {list(modes)} do not factor shape {list(shape)}")
        if sorted(spatial + local) != list(range(len(modes))):
            raise LayoutFormatError(f"spatial {list(spatial)} and local {list(local)} must together "
                                    f"list every mode 0..{len(modes) - 1} once")
        layout = cls(shape, modes, tuple(dims), spatial, local)
        canon = cls._build(*layout._working())
        if canon != layout:
            raise LayoutFormatError(f"register layout is not in canonical form (expected modes "
                                    f"{list(canon.modes)}, spatial {list(canon.spatial_modes)}, local "
                                    f"{list(canon.local_modes)})")
        return layout

    def __repr__(self) -> str:
        return (f"RegisterLayout(shape={list(self.shape)}, T={self.num_threads}, "
                f"m={self.local_size}, modes={list(self.modes)}, spatial={list(self.spatial_modes)}, "
                f"local={list(self.local_modes)})")


# -- primitives (Tilus Defs. 2-3, §4.2) ---------------------------------------------------------


def local(*shape: int) -> RegisterLayout:
    """local(n1, ..., nr): one thread, row-major registers (Def. 2)."""
    return RegisterLayout._primitive(shape, "local", column=False)


def spatial(*shape: int) -> RegisterLayout:
    """spatial(n1, ..., nr): one element per thread, row-major threads (Def. 3)."""
    return RegisterLayout._primitive(shape, "spatial", column=False)


def column_local(*shape: int) -> RegisterLayout:
    """column_local(n1, ..., nr): one thread, column-major registers: f(0, i) = (i % n1, i / n1)."""
    return RegisterLayout._primitive(shape, "local", column=True)


def column_spatial(*shape: int) -> RegisterLayout:
    """column_spatial(n1, ..., nr): one element per thread, column-major threads."""
    return RegisterLayout._primitive(shape, "spatial", column=True)


def identity() -> RegisterLayout:
    """local(1), the identity of composition (Theorem 2)."""
    return local(1)


_EXPR = re.compile(r"\s*(column_local|column_spatial|local|spatial)\s*\(([\d\s,]*)\)\s*")


def parse_register_layout(text: str) -> RegisterLayout:
    """Parse the paper's notation, e.g. "local(2, 1).spatial(8, 4).local(1, 2)"."""
    result, pos = None, 0
    builders = {"local": local, "spatial": spatial, "column_local": column_local,
                "column_spatial": column_spatial}
    while True:
        m = _EXPR.match(text, pos)
        if not m:
            raise ValueError(f"cannot parse register layout {text!r} at offset {pos}")
        args = [int(a) for a in m.group(2).split(",") if a.strip()]
        part = builders[m.group(1)](*args)
        result = part if result is None else result.compose(part)
        pos = m.end()
        if pos == len(text):
            return result
        if text[pos] != ".":
            raise ValueError(f"cannot parse register layout {text!r} at offset {pos}")
        pos += 1


# -- division (Def. 6) ---------------------------------------------------------------------------


class _Work:
    """A mutable mode form in which modes can be split (refined) without changing the function."""

    def __init__(self, layout: RegisterLayout, rank: int, first_id: int):
        shape, dims, sizes, sp, lo = layout._working(rank)
        self.shape = shape
        self.dims = [[m + first_id for m in ms] for ms in dims]
        self.sizes = {m + first_id: s for m, s in sizes.items()}
        self.lists = {"spatial": [m + first_id for m in sp], "local": [m + first_id for m in lo]}
        self.next = first_id + len(sizes)

    def dim_of(self, m: int) -> int:
        return next(d for d, ms in enumerate(self.dims) if m in ms)

    def split(self, m: int, outer: int, inner: int) -> tuple[int, int]:
        """Replace mode m by (outer, inner), adjacent in both its dimension and its list."""
        o, n = self.next, self.next + 1
        self.next += 2
        self.sizes[o], self.sizes[n] = outer, inner
        for lst in (*self.dims, *self.lists.values()):
            if m in lst:
                k = lst.index(m)
                lst[k:k + 1] = [o, n]
        del self.sizes[m]
        return o, n


def _divide(f: RegisterLayout, g: RegisterLayout, right: bool) -> RegisterLayout:
    rank = max(f.rank, g.rank)
    F = _Work(f, rank, 0)
    G = _Work(g, rank, 1 << 20)
    what = "f = h ∘ g" if right else "f = g ∘ h"
    for n_f, n_g in zip(F.shape, G.shape):
        if n_f % n_g:
            raise LayoutDivisionError(f"no layout h with {what}: shape {list(F.shape)} is not a "
                                      f"multiple of {list(G.shape)}")
    pair = {}   # g mode -> f mode
    for kind in ("spatial", "local"):
        fl, gl = F.lists[kind], G.lists[kind]
        used = 0
        while used < len(gl):
            if used >= len(fl):
                raise LayoutDivisionError(f"no layout h with {what}: g has more {kind} extent")
            # position of the next candidate, from the inner end (right) or the outer end (left)
            kf = len(fl) - 1 - used if right else used
            kg = len(gl) - 1 - used if right else used
            a, b = gl[kg], fl[kf]
            sa, sb = G.sizes[a], F.sizes[b]
            if sb % sa == 0 and sb != sa:
                o, n = F.split(b, sb // sa, sa) if right else F.split(b, sa, sb // sa)
                b = n if right else o
            elif sa % sb == 0 and sa != sb:
                o, n = G.split(a, sa // sb, sb) if right else G.split(a, sb, sa // sb)
                a = n if right else o
            elif sa != sb:
                raise LayoutDivisionError(f"no layout h with {what}: {kind} extents {sa} and {sb} "
                                          f"do not divide one another")
            if G.dim_of(a) != F.dim_of(b):
                raise LayoutDivisionError(f"no layout h with {what}: a {kind} mode of g lies in "
                                          f"dimension {G.dim_of(a)}, f has dimension {F.dim_of(b)}")
            pair[a] = b
            used += 1
    for d in range(rank):
        want = [pair[a] for a in G.dims[d]]
        have = F.dims[d][len(F.dims[d]) - len(want):] if right else F.dims[d][:len(want)]
        if want != have:
            raise LayoutDivisionError(f"no layout h with {what}: dimension {d} of g is not the "
                                      f"{'inner' if right else 'outer'} part of f's")
    matched = set(pair.values())
    keep = lambda lst: [m for m in lst if m not in matched]  # noqa: E731
    shape = tuple(n_f // n_g for n_f, n_g in zip(F.shape, G.shape))
    h = RegisterLayout._build(shape, [keep(ms) for ms in F.dims], F.sizes,
                              keep(F.lists["spatial"]), keep(F.lists["local"]))
    check = h.compose(g) if right else g.compose(h)
    if check != f.canonical_at_rank(rank):
        raise LayoutDivisionError(f"no layout h with {what}")
    return h


# -- reinterpretation (§3, Fig. 2(c), Table 1 View) -----------------------------------------------


def can_reinterpret(src: RegisterLayout, src_bits: int, dst: RegisterLayout, dst_bits: int) -> bool:
    """Same threads, same bits per thread (Tilus §3): T_src = T_dst, m_src·src_bits = m_dst·dst_bits."""
    return reinterpret_error(src, src_bits, dst, dst_bits) is None


def reinterpret_error(src: RegisterLayout, src_bits: int, dst: RegisterLayout,
                      dst_bits: int) -> str | None:
    """Why `src`/`src_bits` cannot be viewed as `dst`/`dst_bits`, or None when it can."""
    if src.num_threads != dst.num_threads:
        return f"thread counts differ ({src.num_threads} vs {dst.num_threads})"
    a, b = src.local_size * src_bits, dst.local_size * dst_bits
    if a != b:
        return (f"bits per thread differ ({src.local_size} x {src_bits} = {a} vs "
                f"{dst.local_size} x {dst_bits} = {b})")
    return None


def thread_bits(x: np.ndarray, layout: RegisterLayout, bits: int) -> np.ndarray:
    """uint8 [T, ceil(m·bits/8)]: each thread's registers packed compactly (§6.1 order)."""
    regs = layout.distribute(np.asarray(x).astype(np.uint8))
    return np.stack([pack_bits(r, bits) for r in regs])


def reinterpret(x: np.ndarray, src: RegisterLayout, src_bits: int, dst: RegisterLayout,
                dst_bits: int) -> np.ndarray:
    """View the tile `x` (codes, `src_bits` each, laid out by `src`) as a tile of `dst_bits`-bit
    codes laid out by `dst`: every thread keeps its bits. Raises ValueError when not allowed."""
    error = reinterpret_error(src, src_bits, dst, dst_bits)
    if error:
        raise ValueError(f"cannot reinterpret: {error}")
    packed = thread_bits(x, src, src_bits)
    regs = np.stack([unpack_bits(p, dst_bits, dst.local_size) for p in packed])
    return dst.gather(regs)


# -- decoding through layout_from_attr ---------------------------------------------------------------


def _decode_register(attr: ir.Attribute):
    try:
        d = ir.DictAttr(attr)
    except ValueError:
        return None
    if not any(k in d for k in ("modes", "spatial", "local")):
        return None
    return RegisterLayout.from_attr(d)


if _decode_register not in LAYOUT_DECODERS:
    LAYOUT_DECODERS.insert(0, _decode_register)
