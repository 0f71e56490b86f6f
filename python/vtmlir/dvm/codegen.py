"""The DVM bytecode compiler: graph + concrete shapes -> tiled bytecode (Fang et al., DVM, §4.2,
Fig. 5: "shape tiling ... then encodes the tiled computation graph into bytecode").

Per new shape `compile_graph` does only integer work: shape inference, dimension coalescing,
Alg. 1 (or the MatMul template), local-memory allocation and encoding. Nothing is generated or
loaded as machine code; the VM (`vm.execute`, later one compiled once through MLIR) interprets the
result.

Vector kernels (`KernelType.VECTOR`): all values live in one iteration space, the dominant shape
S_d (Alg. 1 line 1). Adjacent dimensions are coalesced when every value is either whole or
broadcast on both, every reduction covers both or neither, and every argument is laid out densely
across them; Fig. 6's [32, 1024] add thus becomes one dimension of 32768 and is tiled by 832.
Operands are loaded right before their first use and tiles are freed after their last, so the live
count n_max (Alg. 1 line 2) is the peak of that schedule; every tile gets one of n_max equal local
slots, hence ``n_max * T_max <= M``. Broadcast operands get an explicit Broadcast instruction
(Table 1) into a temporary slot, reductions one Sum/Max/Min per run of adjacent reduced dimensions.

Cube-vector kernels (`KernelType.CUBE_VECTOR`): one MatMul of two kernel arguments followed by an
elementwise epilogue in the [m, n] output space (§5.1 cube-vector fusion). The k loop is unrolled
in the body in chunks of the template's tk; the accumulator and the epilogue share slots of
tm x tn elements.
"""

from __future__ import annotations

import functools
import math
import weakref

import numpy as np

from .bytecode import encode
from .symbolic import tracer_of, traced_call
from .graph import Graph, GraphError
from .isa import ArgDesc, DType, GridDim, Instr, KernelType, Opcode, Program, Repeat, make
from .tiling import MatmulTiling, Target, TilingError, VectorTiling, tile_matmul, tile_vector


# --------------------------------------------------------------------------------- results
class _Unchecked:
    """`CompiledKernel.native_reason` not known yet: the bytecode was not made by a template."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHECKED"


UNCHECKED = _Unchecked()

class CompiledKernel:
    """One compiled kernel instance: its bytecode and what is needed to call it (`graph`,
    `bytecode`, `tiling`, `input_shapes`, `input_strides`, `output_shapes`, `output_dtypes`).

    A new shape builds only the words, the shapes and this object (`template.py`,
    `native_fill.py`); what running does not need is derived when first read: `program` (the
    bytecode decoded, when read), `tiling` (the dataclass of the tiling fields the native compile
    wrote into `info`, an info record of `native_fill`) and the `input_strides` of dense inputs
    (None given: `__call__` checks contiguity instead). A plain class with slots: its constructor
    is part of every new shape's cost.

    `native_reason` says why the native VM cannot run the kernel (None: it can). A template gives
    it with the words: its guards hold `decode`'s checks (`bytecode.check_traced`) and the reason
    depends on the structure only, so such a kernel is never decoded before it runs. Any other
    kernel (``template=False``) is decoded -- validated -- at its first native run."""

    __slots__ = ("graph", "bytecode", "_tiling", "input_shapes", "_input_strides", "output_shapes",
                 "output_dtypes", "_tiling_of", "info", "_program", "_native", "_header")

    def __init__(self, graph: Graph, bytecode: np.ndarray, tiling, input_shapes, input_strides, output_shapes,
                 output_dtypes, tiling_of=None, info=None, native_reason=UNCHECKED):
        self.graph, self.bytecode, self._tiling = graph, bytecode, tiling
        self.input_shapes, self._input_strides = input_shapes, input_strides
        self.output_shapes, self.output_dtypes = output_shapes, output_dtypes
        self._tiling_of, self.info, self._program = tiling_of, info, None
        self._native = native_reason
        self._header = None  # `native.launch_header` of the bytecode, read at the first native run

    @property
    def tiling(self) -> VectorTiling | MatmulTiling:
        t = self._tiling
        if t is None:
            t = self._tiling = self._tiling_of(self.info)
        return t

    @property
    def input_strides(self) -> tuple[tuple[int, ...], ...]:
        st = self._input_strides
        if st is None:
            st = self._input_strides = tuple(map(_cached_dense_strides, self.input_shapes))
        return st

    @property
    def template_index(self) -> int | None:
        """The template of its set that compiled it (natively compiled kernels)."""
        return None if self.info is None else self.info[0]

    @property
    def program(self) -> Program:
        p = self._program
        if p is None:
            from .bytecode import decode

            p = self._program = decode(self.bytecode)
        return p

    @property
    def native_reason(self) -> str | None:
        """Why the native VM cannot run this kernel (None: it can). Known without decoding for a
        kernel a template made; else the bytecode is decoded (validated) here, once."""
        r = self._native
        if r is UNCHECKED:
            from .native import unsupported_reason

            r = self._native = unsupported_reason(self.program)
        return r

    def __repr__(self) -> str:
        return (f"CompiledKernel({self.graph.name}, inputs={list(self.input_shapes)}, "
                f"outputs={list(self.output_shapes)}, words={self.bytecode.size})")

    def __call__(self, *inputs, cores: int | None = None, native: bool = False):
        """Run on numpy arrays (of the compiled shapes and strides); returns the outputs.
        `native=True` runs the VM compiled once through MLIR (`native.py`) instead of the numpy
        reference; `cores` is N of Alg. 2 (native default 1)."""
        from .vm import execute

        if len(inputs) != len(self.input_shapes):
            raise GraphError(f"{self.graph.name}: expected {len(self.input_shapes)} inputs, got {len(inputs)}")
        dense = self._input_strides is None  # compiled for dense inputs: numpy's C-contiguity is that
        flat = []
        for i, (a, shp) in enumerate(zip(inputs, self.input_shapes)):
            a = np.asarray(a)
            if a.shape != shp or not (a.flags.c_contiguous if dense else _element_strides(a) == self.input_strides[i]):
                raise GraphError(f"{self.graph.name}: input {i} has shape {list(a.shape)} and strides "
                                 f"{list(_element_strides(a))}, compiled for {list(shp)} / {list(self.input_strides[i])}")
            # a C-contiguous array's span is all of it: a reshape is a view, cheaper than as_strided
            flat.append(a.reshape(-1) if a.flags.c_contiguous and a.size else _flat_span(a))
        outs = [np.empty(s, dtype=d.numpy) for s, d in zip(self.output_shapes, self.output_dtypes)]
        if native:
            from .native import BytecodeError, launch_header, native_vm

            reason = self.native_reason  # a template's kernel: known, no decode (see the class doc)
            if reason is not None:
                raise BytecodeError(f"dvm native vm: error: unsupported program: {reason}")
            header = self._header
            if header is None:  # the words never change: read their header once
                header = self._header = launch_header(self.bytecode)
            native_vm()._launch(self.bytecode, flat + [o.reshape(-1) for o in outs], cores or 1, *header)
        else:
            execute(self.bytecode, flat + [o.reshape(-1) for o in outs], cores=cores)
        return outs


def _element_strides(a: np.ndarray) -> tuple[int, ...]:
    st = []
    for s, n in zip(a.strides, a.shape):
        if n == 1:
            st.append(0)
            continue
        if s < 0 or s % a.itemsize:
            raise GraphError(f"unsupported array strides {a.strides} (negative or not element-aligned)")
        st.append(s // a.itemsize)
    return tuple(st)


def _flat_span(a: np.ndarray) -> np.ndarray:
    """The 1-d element range a strided array spans, starting at its first element (a view)."""
    span = 1 + sum((n - 1) * s for n, s in zip(a.shape, _element_strides(a)))
    return np.lib.stride_tricks.as_strided(a, shape=(span,), strides=(a.itemsize,))


def _dense_strides(shape) -> tuple[int, ...]:
    st, acc = [], 1
    for n in reversed(shape):
        st.append(0 if n == 1 else acc)
        acc *= n
    st.reverse()
    return tuple(st)


# concrete shapes only (a traced `Sym` must not be hashed: that pins its value); the shapes of a new
# shape's inputs mostly recur (weights, biases), so their strides are looked up, not recomputed
_cached_dense_strides = functools.lru_cache(maxsize=4096)(_dense_strides)


# --------------------------------------------------------------------------- entry point
def compile_graph(graph: Graph, input_shapes, target: Target | None = None, input_strides=None, *,
                  template: bool = True) -> CompiledKernel:
    """Tile and encode `graph` for concrete input shapes (and element strides; default dense).

    By default through the graph's bytecode templates (`template.py`: guards, Alg. 1, the
    shape-dependent words); ``template=False`` runs the lowering itself (the reference the
    templates are tested against, bitwise)."""
    if target is None:
        target = default_target()
    if template:  # the template set's native entry point, once a compile of this graph registered it
        fast = graph.__dict__.get("_dvm_fast")
        if fast is not None:
            entry = fast.get(id(target))
            if entry is not None and entry[0] is target:
                strides = None if input_strides is None else _normalised_strides(graph, input_shapes, input_strides)
                try:
                    k = entry[1](input_shapes, strides)
                except (TypeError, ValueError):  # wrong ranks or sizes: the general path below says what
                    k = None
                if k is not None and type(k) is not list:  # a list: the native code decided nothing
                    return k
    input_shapes = tuple([tuple(map(int, shp)) for shp in input_shapes])
    if not graph.outputs:
        raise GraphError(f"{graph.name}: the graph has no outputs")
    if input_strides is None:
        input_strides = tuple(map(_cached_dense_strides, input_shapes))
    else:
        input_strides = _normalised_strides(graph, input_shapes, input_strides)
    if template:
        return _compile_templated()(graph, input_shapes, input_strides, target)
    program, tiling, shapes = lower(graph, graph.infer_shapes(input_shapes), input_strides, target)
    return CompiledKernel(
        graph, encode(program), tiling, input_shapes, input_strides,
        tuple(shapes[o] for o in graph.outputs), tuple(graph.nodes[o].dtype for o in graph.outputs))


@functools.cache
def default_target() -> Target:
    """`Target()`, made once (it asks the OS for the CPU count: microseconds per call)."""
    return Target()


def _normalised_strides(graph: Graph, input_shapes, input_strides) -> tuple[tuple[int, ...], ...]:
    """Element strides as the compile keys them: ints, 0 along size-1 dimensions."""
    if len(input_strides) != len(input_shapes) or any(len(a) != len(b) for a, b in zip(input_strides, input_shapes)):
        raise GraphError(f"{graph.name}: one stride per input dimension expected")
    return tuple([tuple([0 if n == 1 else int(x) for x, n in zip(st, shp)]) for st, shp in zip(input_strides, input_shapes)])


@functools.cache
def _compile_templated():
    from .template import compile_templated  # template.py builds on this module

    return compile_templated


def lower(graph: Graph, shapes, input_strides, target: Target):
    """The lowering of `graph` for node `shapes` (from `Graph.infer_shapes`) and input element
    strides: ``(program, tiling, shapes)``. Sizes may be traced `symbolic.Sym`s."""
    matmuls = [i for i, n in enumerate(graph.nodes) if n.kind == "matmul"]
    lowering = _Lowering(graph, shapes, input_strides, target)
    if matmuls:
        program, tiling = lowering.cube_vector(matmuls)
    else:
        program, tiling = lowering.vector()
    return program, tiling, shapes


# ------------------------------------------------------------------------------- lowering
class _Slots:
    """Equal-sized local slots, reused after a tile's last use (Alg. 1's n_max slots)."""

    def __init__(self, base: int, slot_bytes: int):
        self.base, self.slot_bytes, self.free, self.count = base, slot_bytes, [], 0

    def alloc(self) -> int:
        if self.free:
            return self.free.pop()
        self.count += 1
        return self.base + (self.count - 1) * self.slot_bytes

    def release(self, addr: int) -> None:
        self.free.append(addr)

    @property
    def end(self) -> int:
        return self.base + self.count * self.slot_bytes


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


_ANALYSES: dict = {}  # id(graph) -> (weakref, structure key, analyses)


class _Lowering:
    def __init__(self, graph: Graph, shapes, input_strides, target: Target):
        self.g, self.target = graph, target
        self.nodes = graph.nodes
        self.rank = max(len(s) for s in shapes)
        # every value padded to the common rank (broadcasting is right-aligned)
        self.shapes = [(1,) * (self.rank - len(s)) + tuple(s) for s in shapes]
        self.arg_of = {nid: i for i, nid in enumerate(graph.inputs)}
        self.arg_strides = {}
        for nid, st in zip(graph.inputs, input_strides):
            self.arg_strides[nid] = (0,) * (self.rank - len(st)) + st
        self.outputs = list(dict.fromkeys(graph.outputs))
        self.out_arg = {nid: len(graph.inputs) + i for i, nid in enumerate(graph.outputs)}
        self.out_args = [(len(graph.inputs) + i, nid) for i, nid in enumerate(graph.outputs)]
        self.args = tuple(
            [ArgDesc(self.nodes[n].dtype, _span(shapes[n], input_strides[i])) for i, n in enumerate(graph.inputs)]
            + [ArgDesc(self.nodes[n].dtype, math.prod(shapes[n])) for n in graph.outputs])
        # shape-independent analyses, cached per graph (and padded rank): uses, reduction axes,
        # live order and the schedules of `_schedule`
        key = (len(graph.nodes), tuple(graph.inputs), tuple(graph.outputs), self.rank)
        hit = _ANALYSES.get(id(graph))
        if hit is not None and hit[0]() is graph and hit[1] == key:
            self.uses, self.red_axes, self.order, self._schedules = hit[2]
            return
        self.uses: dict[int, list[int]] = {i: [] for i in range(len(self.nodes))}
        for nid, node in enumerate(self.nodes):
            for i in node.inputs:
                self.uses[i].append(nid)
        # reduction axes in the padded rank
        self.red_axes = {nid: tuple(a + self.rank - node.rank for a in node.attrs[1])
                         for nid, node in enumerate(self.nodes) if node.kind == "reduce"}
        live = self._needed()
        self.order = [n for n in range(len(self.nodes)) if n in live]
        self._schedules = {}
        if len(_ANALYSES) > 256:
            _ANALYSES.clear()
        _ANALYSES[id(graph)] = (weakref.ref(graph), key,
                                (self.uses, self.red_axes, self.order, self._schedules))

    def _needed(self) -> set[int]:
        need, stack = set(), list(self.outputs)
        while stack:
            n = stack.pop()
            if n not in need:
                need.add(n)
                stack.extend(self.nodes[n].inputs)
        return need

    # ---- schedule and liveness (shared by both kernel kinds) ----
    def _schedule(self, skip=()):
        """Steps in execution order: ('load', nid) before first use, ('op', nid), and for each value
        the index of its last use; stores follow the producing step. Shape-independent: cached
        (callers only read the result)."""
        key = frozenset(skip)
        if key not in self._schedules:
            self._schedules[key] = self._compute_schedule(skip)
        return self._schedules[key]

    def _compute_schedule(self, skip):
        steps, loaded = [], set()
        for nid in self.order:
            node = self.nodes[nid]
            if nid in skip:
                continue
            if node.kind == "input":
                if nid in self.out_arg:
                    steps.append(("load", nid))
                    loaded.add(nid)
                continue
            for i in node.inputs:
                if self.nodes[i].kind == "input" and i not in loaded and i not in skip:
                    steps.append(("load", i))
                    loaded.add(i)
            steps.append(("op", nid))
        last = {}
        for k, (kind, nid) in enumerate(steps):
            last.setdefault(nid, k)
            if kind == "op":
                for i in self.nodes[nid].inputs:
                    last[i] = k
        for nid in self.outputs:
            last[nid] = max(last.get(nid, 0), next(k for k, s in enumerate(steps) if s[1] == nid))
        return steps, last

    @staticmethod
    def _peak(steps, last, temps_per_op) -> int:
        live, peak = set(), 0
        for k, (kind, nid) in enumerate(steps):
            live.add(nid)
            peak = max(peak, len(live) + temps_per_op(kind, nid))
            live -= {v for v in live if last.get(v, k) <= k}
        return max(peak, 1)

    def _broadcast_temps(self, kind, nid) -> int:
        if kind != "op" or self.nodes[nid].kind == "matmul":  # matmul operands have their own regions
            return 0
        node, res = self.nodes[nid], self.shapes[nid]
        n = sum(1 for i in node.inputs if self.shapes[i] != res) if node.kind != "reduce" else 0
        if node.kind == "reduce" and len(node.attrs[1]) > 1:
            n = 1
        return n

    # ---- vector kernels ----
    def vector(self):
        shapes = self.shapes
        dom = tuple(max(s[d] for s in (shapes[n] for n in self.order)) for d in range(self.rank))
        reduces = [self.red_axes[n] for n in self.order if self.nodes[n].kind == "reduce"]
        groups = self._coalesce(dom, reduces)
        cshape = {n: tuple(math.prod(shapes[n][d] for d in grp) for grp in groups) for n in self.order}
        cdom = tuple(math.prod(dom[d] for d in grp) for grp in groups)
        cstride = {}
        for n in self.order:
            if n in self.arg_strides:
                cstride[n] = tuple(0 if cshape[n][j] == 1 else self.arg_strides[n][grp[-1]]
                                   for j, grp in enumerate(groups))
            if n in self.out_arg:
                cstride.setdefault(("out", n), _dense_strides(cshape[n]))
        creduce = {n: tuple(j for j, grp in enumerate(groups) if grp[0] in self.red_axes[n])
                   for n in self.order if self.nodes[n].kind == "reduce"}
        itemsize = max(self.nodes[n].dtype.itemsize for n in self.order)
        steps, last = self._schedule()
        n_max = self._peak(steps, last, self._broadcast_temps)
        reduce_dims = {d for axes in creduce.values() for d in axes}
        tiling, tv = traced_call(tile_vector, (cdom, reduce_dims, n_max, itemsize, self.target),
                                 ("tile",), ("dim",), target=4)
        dim, t = tv.dim, tv.tile
        grid = tuple(GridDim(cdom[d], 1, cdom[d]) for d in range(dim)) + (
            GridDim(-(-cdom[dim] // t), t, cdom[dim]),)
        tshape = {n: tuple(1 if d < dim else (t if s != 1 else 1) if d == dim else s
                           for d, s in enumerate(cshape[n])) for n in self.order}
        slot = _align(max(math.prod(ts) * self.nodes[n].dtype.itemsize for n, ts in tshape.items()),
                      self.target.vector_bytes)
        em = _Emitter(self, _Slots(0, slot), tshape, steps, last)

        def mem(n, arg, strides, is_load):
            vs, ts = cshape[n], tshape[n]
            gstr = tuple(strides[d] for d in range(dim + 1))
            tdims = range(dim, len(vs))
            sizes = [ts[d] for d in tdims]
            binds = [dim if (d == dim and vs[d] != 1 and grid[dim].count > 1) else -1 for d in tdims]
            return _mem_instr(is_load, self.nodes[n].dtype, em.addr[n], arg, 0, gstr, sizes,
                              [strides[d] for d in tdims], binds, grid)

        em.run(lambda n: mem(n, self.arg_of[n], cstride[n], True),
               lambda n, arg: mem(n, arg, cstride[("out", n)], False),
               creduce)
        if em.slots.end > self.target.local_memory_bytes:  # pragma: no cover - n_max bounds it
            raise TilingError(f"local memory overflow: {em.slots.end} > {self.target.local_memory_bytes}")
        program = Program(KernelType.VECTOR, em.slots.end, self.args, grid, tuple(em.body))
        return program, tiling

    def _coalesce(self, dom, reduces):
        kept = [d for d in range(self.rank) if dom[d] > 1] or [self.rank - 1]
        groups = [[kept[0]]]
        for d in kept[1:]:
            p = groups[-1][-1]
            ok = all((d in axes) == (p in axes) for axes in reduces)
            for n in self.order:
                s = self.shapes[n]
                if (s[p] == 1) != (s[d] == 1):
                    ok = False
                    break
                if n in self.arg_strides and s[d] != 1:
                    st = self.arg_strides[n]
                    if st[p] != st[d] * s[d]:
                        ok = False
                        break
            if ok:
                groups[-1].append(d)
            else:
                groups.append([d])
        # dims of size 1 everywhere are dropped; reduce axes are tested on the first dim of a group
        return [tuple(g) for g in groups]

    # ---- cube-vector kernels ----
    def cube_vector(self, matmuls):
        if len(matmuls) != 1:
            raise GraphError(f"{self.g.name}: a kernel holds one matmul (cube-vector fusion), found {len(matmuls)}")
        mm = matmuls[0]
        a, b = self.nodes[mm].inputs
        for x in (a, b):
            if self.nodes[x].kind != "input":
                raise GraphError(f"{self.g.name}: matmul operands must be kernel inputs (%{x} is a {self.nodes[x].kind})")
            if any(u != mm for u in self.uses[x]) or x in self.out_arg:
                raise GraphError(f"{self.g.name}: matmul operand %{x} has other uses")
        for n in self.order:
            nd = self.nodes[n]
            if nd.kind == "reduce":
                raise GraphError(f"{self.g.name}: reductions cannot follow a matmul in one kernel")
            if n in (a, b):
                continue
            if self.nodes[n].kind != "input" and any(i < mm and self.nodes[i].kind != "input" for i in nd.inputs):
                raise GraphError(f"{self.g.name}: only an elementwise epilogue may be fused with a matmul")
        if self.rank != 2:
            raise GraphError(f"{self.g.name}: values of a matmul kernel have rank <= 2")
        m, n_ = self.shapes[mm]
        k = self.shapes[a][1]
        for n in self.order:
            if n in (a, b):
                continue
            s = self.shapes[n]
            if (s[0] not in (1, m)) or (s[1] not in (1, n_)):
                raise GraphError(f"{self.g.name}: epilogue value %{n} of shape {list(s)} is not in the [{m}, {n_}] output space")
        dtype = self.nodes[mm].dtype
        itemsize = max(self.nodes[x].dtype.itemsize for x in self.order)
        steps, last = self._schedule(skip={a, b})
        n_live = self._peak(steps, last, self._broadcast_temps)
        tiling, tv = traced_call(tile_matmul, (m, n_, k, n_live, itemsize, self.target),
                                 ("tm", "tn", "tk"), (), target=5)
        tm, tn, tk = tv.tm, tv.tn, tv.tk
        grid = (GridDim(-(-m // tm), tm, m), GridDim(-(-n_ // tn), tn, n_))
        va = self.target.vector_bytes
        a_bytes, b_bytes = _align(tm * tk * dtype.itemsize, va), _align(tk * tn * dtype.itemsize, va)
        slot = _align(tm * tn * itemsize, va)
        tshape = {x: (tm if self.shapes[x][0] != 1 else 1, tn if self.shapes[x][1] != 1 else 1)
                  for x in self.order if x not in (a, b)}
        em = _Emitter(self, _Slots(a_bytes + b_bytes, slot), tshape, steps, last)
        sa, sb = self.arg_strides[a], self.arg_strides[b]

        def bind(d, vs):
            return d if vs[d] != 1 and grid[d].count > 1 else -1

        def mem(x, arg, strides, is_load):
            vs = self.shapes[x]
            return _mem_instr(is_load, self.nodes[x].dtype, em.addr[x], arg, 0, strides, tshape[x], strides,
                              [bind(0, vs), bind(1, vs)], grid)

        def chunk(dst, k0, kc, accumulate):
            return (_mem_instr(True, dtype, 0, self.arg_of[a], k0 * sa[1], (sa[0], 0), (tm, kc),
                               (sa[0], sa[1]), (bind(0, self.shapes[mm]), -1), grid),
                    _mem_instr(True, dtype, a_bytes, self.arg_of[b], k0 * sb[0], (0, sb[1]),
                               (kc, tn), (sb[0], sb[1]), (-1, bind(1, self.shapes[mm])), grid),
                    make(Opcode.MATMUL, dtype=dtype, dst=dst, lhs=0, rhs=a_bytes, m=tm, k=kc, n=tn,
                         accumulate=accumulate))

        def matmul_op(nid, dst):
            # the k loop, unrolled (tk <= k): chunk 0, the full chunks 1 .. full-1 (the records of
            # chunk 1 but for the two offsets), then the tail chunk of k % tk
            full, tail = k // tk, k % tk
            em.body.extend(chunk(dst, 0, tk, False))
            if full >= 2:
                rep = Repeat(full - 1, chunk(dst, tk, tk, True),
                             {(0, "offset"): tk * sa[1], (1, "offset"): tk * sb[0]})
                # a traced program keeps the run as one item: the chunk count is no structure
                em.body.extend((rep,) if tracer_of(full) is not None else rep.expand())
            if tail != 0:
                em.body.extend(chunk(dst, full * tk, tail, True))

        em.run(lambda x: mem(x, self.arg_of[x], self.arg_strides[x], True),
               lambda x, arg: mem(x, arg, _dense_strides(self.shapes[x]), False),
               {}, matmul=matmul_op)
        program = Program(KernelType.CUBE_VECTOR, em.slots.end, self.args, grid, tuple(em.body))
        return program, tiling


def _span(shape, strides) -> int:
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def _mem_instr(is_load, dtype, local, arg, offset, grid_strides, sizes, strides, binds, grid) -> Instr:
    """Load/Store when the tile is one contiguous run (only its first dimension may be clamped by a
    tail), else ViewLoad/ViewStore."""
    dims = [(s, st, b) for s, st, b in zip(sizes, strides, binds) if s > 1 or b != -1]
    gs = tuple(grid_strides)
    contiguous = all(b == -1 for _, _, b in dims[1:])
    inner = 1
    for s, st, _ in reversed(dims[1:]):
        contiguous &= st == inner
        inner *= s
    if dims:
        contiguous &= dims[0][1] == inner or dims[0][0] == 1
    if contiguous:
        rows, bind = (dims[0][0], dims[0][2]) if dims else (1, -1)
        return make(Opcode.LOAD if is_load else Opcode.STORE, dtype=dtype, local=local, arg=arg, offset=offset,
                    grid_strides=gs, rows=rows, row=inner, bind=bind)
    return make(Opcode.VIEW_LOAD if is_load else Opcode.VIEW_STORE, dtype=dtype, local=local, arg=arg,
                offset=offset, grid_strides=gs, sizes=sizes, strides=strides, binds=binds)


class _Emitter:
    """Walks the schedule and emits instructions with slot allocation."""

    def __init__(self, low: _Lowering, slots: _Slots, tshape, steps, last):
        self.low, self.slots, self.tshape, self.steps, self.last = low, slots, tshape, steps, last
        self.addr: dict[int, int] = {}
        self.body: list[Instr] = []
        self.release_at: dict[int, list[int]] = {}
        for v, k in last.items():
            self.release_at.setdefault(k, []).append(v)

    def run(self, load, store, creduce, matmul=None):
        nodes = self.low.nodes
        for k, (kind, nid) in enumerate(self.steps):
            self.addr[nid] = self.slots.alloc()
            if kind == "load":
                self.body.append(load(nid))
            elif nodes[nid].kind == "matmul":
                matmul(nid, self.addr[nid])
            else:
                self._op(nid, creduce)
            for arg, out in self.low.out_args:
                if out == nid:
                    self.body.append(store(nid, arg))
            for v in self.release_at.get(k, ()):
                if v in self.addr:  # matmul operands live in their own regions
                    self.slots.release(self.addr[v])

    def _broadcast(self, src: int, from_shape, to_shape, dtype: DType, temps: list) -> int:
        """Broadcast instructions turning a tile of `from_shape` into `to_shape` (one per run of
        adjacent stretched dimensions); returns the address of the result."""
        cur, addr = list(from_shape), src
        d = 0
        while d < len(cur):
            if cur[d] == 1 and to_shape[d] != 1:
                e = d
                while e < len(cur) and cur[e] == 1:
                    e += 1
                m, size, n = math.prod(cur[:d]), math.prod(to_shape[d:e]), math.prod(cur[e:])
                dst = self.slots.alloc()
                temps.append(dst)
                self.body.append(make(Opcode.BROADCAST, dtype=dtype, dst=dst, src=addr, m=m, size=size, n=n))
                cur[d:e] = to_shape[d:e]
                addr = dst
                d = e
            else:
                d += 1
        return addr

    def _op(self, nid, creduce):
        node, ts = self.low.nodes[nid], self.tshape
        dst, res = self.addr[nid], ts[nid]
        size = math.prod(res)
        temps: list[int] = []

        def operand(i):
            if ts[i] == res:
                return self.addr[i]
            return self._broadcast(self.addr[i], ts[i], res, self.low.nodes[i].dtype, temps)

        if node.kind == "unary":
            self.body.append(make(node.op, dtype=node.dtype if node.op != Opcode.IS_FINITE else self.low.nodes[node.inputs[0]].dtype,
                                  dst=dst, src=self.addr[node.inputs[0]], size=size))
        elif node.kind == "scalar":
            self.body.append(make(node.op, dtype=node.dtype, dst=dst, src=self.addr[node.inputs[0]],
                                  scalar=node.attrs[0], size=size))
        elif node.kind == "binary":
            lhs, rhs = (operand(i) for i in node.inputs)
            self.body.append(make(node.op, dtype=node.dtype, dst=dst, lhs=lhs, rhs=rhs, size=size))
        elif node.kind == "cmp":
            lhs, rhs = (operand(i) for i in node.inputs)
            self.body.append(make(Opcode.CMP, dtype=self.low.nodes[node.inputs[0]].dtype, dst=dst, lhs=lhs,
                                  rhs=rhs, size=size, cmp=node.attrs[0]))
        elif node.kind == "select":
            cond, lhs, rhs = (operand(i) for i in node.inputs)
            self.body.append(make(Opcode.SELECT, dtype=node.dtype, dst=dst, cond=cond, lhs=lhs, rhs=rhs, size=size))
        elif node.kind == "cast":
            src = self.low.nodes[node.inputs[0]].dtype
            self.body.append(make(Opcode.CAST, dst=dst, src=self.addr[node.inputs[0]], size=size,
                                  src_dtype=src, dst_dtype=node.dtype))
        elif node.kind == "reduce":
            self._reduce(nid, node, creduce[nid], dst, temps)
        else:  # pragma: no cover
            raise GraphError(f"cannot lower {node.kind}")
        for tmp in temps:
            self.slots.release(tmp)

    def _reduce(self, nid, node, axes, dst, temps):
        op, _, mean = node.attrs
        x = node.inputs[0]
        cur, addr = list(self.tshape[x]), self.addr[x]
        runs, d = [], 0
        while d < len(cur):
            if d in axes:
                e = d
                while e < len(cur) and e in axes:
                    e += 1
                runs.append((d, e))
                d = e
            else:
                d += 1
        count = 1
        for r, (d, e) in enumerate(runs):
            m, size, n = math.prod(cur[:d]), math.prod(cur[d:e]), math.prod(cur[e:])
            count *= size
            out = dst if r == len(runs) - 1 else self.slots.alloc()
            if out != dst:
                temps.append(out)
            self.body.append(make(op, dtype=node.dtype, dst=out, src=addr, m=m, size=size, n=n))
            cur[d:e] = [1] * (e - d)
            addr = out
        if not runs:  # reducing size-1 dimensions: a copy
            self.body.append(make(Opcode.COPY, dtype=node.dtype, dst=dst, src=addr, size=math.prod(cur)))
        if mean and count != 1:
            self.body.append(make(Opcode.MULS, dtype=node.dtype, dst=dst, src=dst, scalar=1.0 / count,
                                  size=math.prod(cur)))
