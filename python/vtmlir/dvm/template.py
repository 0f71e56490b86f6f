"""Per-kernel bytecode templates: a new shape costs guards + tiling + filling words (Fang et al., DVM,
§4.2 and Fig. 5: at run time "shape tiling" and "bytecode encoding" only, ≈0.1 ms per new shape).

Everything the lowering (`codegen.lower`) does that does not depend on the sizes is done once per
graph and *structure*: the schedule, the instruction sequence, the slot assignment, the record
layouts, the constant words. The first compile of a structure runs the lowering on traced sizes
(`symbolic.Sym`): every size carries an expression (`expr.Expr`) over the kernel's parameters
(input sizes ``s<i>_<d>`` and element strides ``t<i>_<d>``); every decision taken on a size is
recorded as a guard; Alg. 1 / the MatMul template are recorded as calls (`symbolic.traced_call`)
whose result fields become variables. The trace is a straight-line program, which `fill` runs
(closures over a list of slots, `expr.evaluator`; no source code is generated):

    fill(s0_0, s0_1, ..., t0_0, ...):
        <guards up to the tiling call>                 (one failing: None)
        _v3 = tile_vector((<coalesced dims>), {...}, n_max, itemsize, _target)   # Alg. 1, per shape
        _v4 = _v3.tile
        <guards after it>
        words = the traced shape's words (array.array), the shape-dependent ones overwritten
        return 0, _v3, words, (<output shapes>)

exactly the words the lowering would have encoded, because on that shape every decision the
lowering takes is the same (tested bitwise against ``compile_graph(..., template=False)`` on random
shapes). A shape that fails a template's guards is traced into a new template (one per structure:
which sizes are 1, whether a dimension is split, the number of k chunks of a matmul, ...);
`prebuild` traces every structure of a declared shape space ahead of time.

Tiling decisions are *not* cached: Alg. 1 runs for every new shape inside `fill`, as in the paper.
"""

from __future__ import annotations

import itertools
import math
import time
from array import array
from itertools import chain

import numpy as np
from tqdm import tqdm

from ..errors import VtmlirError
from .bytecode import WORD, BytecodeError, RepeatWords, check_traced, encode_words
from .codegen import lower
from .coverage import COVERAGE, coverage, record_hit
from .kernel import CompiledKernel, cached_dense_strides, dense_strides
from .expr import Const, Expr, Name, evaluator
from .graph import Graph
from .implied_guards import prune
from .native import unsupported_reason
from .native_fill import NativeFill, Unsupported
from .symbolic import Sym, Tracer, value
from .tiling import Target, tile_matmul, tile_vector

MAX_TEMPLATES = 64  # per graph, target and ranks: beyond this the set starts afresh
PRUNE_IMPLIED_GUARDS = True  # False: every traced guard is kept (what the tests compare with)


class KernelTemplate:
    """One traced structure of a graph: `stmts` (guards and assignments over the parameters
    `params`, see `symbolic.Tracer`) and the code that writes its words. The words are
    ``pre + block * count + post`` (`block` only where a matmul's k loop has a run of full chunks,
    see `isa.Repeat`): each part the traced shape's words, whose shape-dependent positions receive
    the `holes` expressions; in the block, the words at the step positions advance by their step
    per repetition. `reads` is every name the words, the tiling and the output shapes read (for
    dead-statement removal)."""

    __slots__ = ("graph", "params", "ranks", "stmts", "reads", "tiling", "output_dtypes", "parts", "count", "steps",
                 "out_shapes", "point", "native_reason", "traced_guards")

    def __init__(self, graph: Graph, params, tracer: Tracer, tiling: str, parts, count, steps, out_shapes,
                 point=None, native_reason=None):
        self.graph, self.params, self.tiling = graph, params, tiling
        self.point = point  # (shapes, strides) it was traced at
        # the input ranks: `params` are the sizes of every input, then its strides, in order
        self.ranks = tuple(len(s) for s in point[0]) if point is not None else ()
        # why the native VM cannot run this structure (None: it can), decided once from the
        # structure (`native.unsupported_reason` reads opcodes, dtypes and counts: constant words)
        self.native_reason = native_reason
        self.output_dtypes = tuple(graph.nodes[o].dtype for o in graph.outputs)
        self.parts, self.count, self.steps = parts, _expr(count), [_expr(x) for x in steps]
        self.out_shapes = tuple(tuple(_expr(d) for d in shp) for shp in out_shapes)
        (_, pre_holes), block, post = parts
        holes = pre_holes + (block[0][1] + post[1] if block is not None else [])
        self.reads = {tiling}.union(*(e.names() for e in [self.count, *self.steps, *chain(*self.out_shapes)]),
                                    *(e.names() for _, e in holes))
        # the guards the ones before them imply are dropped (`implied_guards`: the same shapes
        # pass, the same words are written); `traced_guards` counts them all
        self.traced_guards = sum(1 for st in tracer.stmts if st[0] == "guard")
        self.stmts = _live(prune(tracer.stmts) if PRUNE_IMPLIED_GUARDS else tracer.stmts, self.reads)

    def writer(self, i: int, compile_expr):
        """The closure that ends template `i`'s branch of `fill`: copy the traced words
        (array.array: copies and the block's repetition run in C), write the holes, return
        ``(i, tiling, bytecode, output shapes)``. `compile_expr` turns an `Expr` into its closure."""
        (pre, pre_holes), block, post = self.parts
        pre_fs = [(j, compile_expr(e)) for j, e in pre_holes]
        tiling = compile_expr(Name(self.tiling))
        shapes = [[compile_expr(d) for d in shp] for shp in self.out_shapes]

        def finish(env, c):
            return i, tiling(env), np.frombuffer(c, WORD), tuple(tuple(f(env) for f in shp) for shp in shapes)

        if block is None:
            def write(env):
                c = pre.__copy__()
                for j, f in pre_fs:
                    c[j] = f(env)
                return finish(env, c)
            return write
        (blk, blk_holes), step_pos = block
        start, nb = len(pre), len(blk)
        count = compile_expr(self.count)
        blk_fs = [(j, compile_expr(e)) for j, e in blk_holes]
        # word p of repetition r is its first value + r * step
        step_fs = [(p, compile_expr(st)) for p, st in zip(step_pos, self.steps) if st != Const(0)]
        (post_words, post_holes) = post
        post_fs = [(j, compile_expr(e)) for j, e in post_holes]

        def write(env):
            c = pre.__copy__()
            for j, f in pre_fs:
                c[j] = f(env)
            n = count(env)
            b = blk.__copy__()
            for j, f in blk_fs:
                b[j] = f(env)
            c.extend(b * n)
            for p, f in step_fs:
                s = f(env)
                if n > 1 and s:
                    x = b[p]
                    c[start + p::nb] = array("q", range(x, x + n * s, s))
            e = start + n * nb
            c.extend(post_words)
            for j, f in post_fs:
                c[e + j] = f(env)
            return finish(env, c)
        return write


def _part(words):
    """(the words' values, [(position, expression)] of the shape-dependent ones) of a list of ints
    and `Sym`s."""
    return array("q", [value(w) for w in words]), [(i, w.e) for i, w in enumerate(words) if type(w) is Sym]


def build_template(graph: Graph, shapes, strides, target: Target) -> KernelTemplate:
    """Trace the lowering of `graph` at one concrete shape into its template."""
    tr = Tracer()
    params = []

    def sym(prefix, i, d, v):
        name = f"{prefix}{i}_{d}"
        params.append(name)
        return tr.param(name, v)

    sshapes = [tuple(sym("s", i, d, v) for d, v in enumerate(shp)) for i, shp in enumerate(shapes)]
    sstrides = [tuple(sym("t", i, d, v) for d, v in enumerate(st)) for i, st in enumerate(strides)]
    for st in sstrides:  # the strides' sign first: what `decode` requires of every stride it reads
        for t in st:     # (`t>=0`), and what lets `implied_guards` bound every offset after it
            bool(t >= 0)
    program, _, node_shapes = lower(graph, graph.infer_shapes_of(sshapes), sstrides, target)
    words = encode_words(program)
    # `decode`'s checks: on the constant words decided now, on the holes recorded as guards of the
    # trace, so that no shape gets these words unless they pass `decode` (`bytecode.check_traced`)
    structure = check_traced(words)
    out_shapes = tuple(node_shapes[o] for o in graph.outputs)
    if len(tr.calls) != 1:  # pragma: no cover - every kernel tiles exactly once
        raise AssertionError(f"{graph.name}: expected one tiling call, traced {len(tr.calls)}")
    runs = [i for i, w in enumerate(words) if type(w) is RepeatWords]
    if len(runs) > 1:  # pragma: no cover - one matmul per kernel
        raise AssertionError(f"{graph.name}: more than one repeated run")
    if runs:
        rw = words[runs[0]]
        step_pos = sorted(rw.deltas)
        parts = (_part(words[: runs[0]]), (_part(rw.words), step_pos), _part(words[runs[0] + 1 :]))
        count, steps = rw.count, [rw.deltas[p] for p in step_pos]
    else:
        parts, count, steps = (_part(words), None, None), 0, []
    return KernelTemplate(graph, params, tr, tr.calls[0], parts, count, steps, out_shapes,
                          (tuple(map(tuple, shapes)), tuple(map(tuple, strides))), unsupported_reason(structure))


class _LastCall:
    """`fn` remembering its last call: the templates of a graph tried one after another for one
    shape make the same tiling call; it runs once (a new shape always runs it)."""

    def __init__(self, fn):
        self.fn, self.last = fn, (None, None)

    def __call__(self, *args):
        last_args, res = self.last
        if args == last_args:
            return res
        res = self.fn(*args)
        self.last = (args, res)
        return res


_TILE_VECTOR, _TILE_MATMUL = _LastCall(tile_vector), _LastCall(tile_matmul)


def forget_last_tiling() -> None:
    """Clear the remembered last tiling call, so that compiling a shape again does all the work of
    its first compile (benchmarks time a new shape's compile more than once this way)."""
    _TILE_VECTOR.last = _TILE_MATMUL.last = (None, None)


def _expr(x) -> Expr:
    return x.e if type(x) is Sym else Const(int(x))


def _live(stmts, reads: set[str]):
    """`stmts` without the assignments nothing reads."""
    needed = set(reads)
    kept = []
    for st in reversed(stmts):
        kind, a, b = st
        if kind == "set":
            if a not in needed:
                continue
            needed |= b.names()
        else:
            needed |= a.names()
        kept.append(st)
    kept.reverse()
    return kept


class TemplateSet:
    """The templates of one (graph, target, input ranks), and `fill`: ONE function that tries all
    of them. Their statement sequences are merged into a trie, so what they share (in practice
    everything up to and including the tiling call) runs once; where they diverge each branch
    returns None when a guard fails, so the next branch is tried. Returns ``(template index,
    tiling, bytecode, output_shapes)`` or None.

    Branches never clobber what a later branch reads: statements are shared only when equal, and
    a trace numbers its variables in order, so a branch assigns only variables numbered after its
    shared prefix (and assigns each before reading it)."""

    def __init__(self, target: Target, graph: Graph | None = None):
        self.target, self.graph = target, graph
        self.templates: list[KernelTemplate] = []
        self.fill = lambda *params: None
        self.native = None  # `native_fill.NativeFill` of the current templates (`compile_native`)
        self.native_error: str | None = None  # why the last `compile_native` kept Python
        # the most words a compile through this set has written (the native word buffer starts at
        # that size: growing it costs a new shape a fresh allocation and the general path)
        self.max_words = 0

    def __len__(self) -> int:
        return len(self.templates)

    def add(self, tmpl: KernelTemplate) -> None:
        if len(self.templates) >= MAX_TEMPLATES:
            self.templates.clear()
        self.templates.append(tmpl)
        self._generate()

    def order_by(self, hits: dict) -> None:
        """Put the templates that cover the most shapes first (`hits`: template -> count): the
        branches of `fill` are tried in order, so the common structure is found first."""
        self.templates.sort(key=lambda t: -hits.get(t, 0))
        self._generate()

    def compile_native(self) -> None:
        """JIT-compile `fill` through MLIR (`native_fill.NativeFill`, the same results natively)
        and make its entry point the graph's `compile_graph` path for this target; until then,
        and after any template is added, the Python `fill` runs. A template set the translation
        cannot handle stays in Python (`native_error` says why), and so does one whose native
        compile differs from the Python `fill` at any template's traced shape (checked here,
        dense and strided: this also runs each native path once, at graph compile time, rather
        than in the first new shape)."""
        if self.native is not None or not self.templates:
            return
        try:
            native = NativeFill(self)
            self._check(native)
        except (Unsupported, VtmlirError) as err:
            self.native, self.native_error = None, str(err)
            return
        self.native, self.native_error = native, None
        self.register()

    def _check(self, native) -> None:
        for t in self.templates:
            if t.point is None:
                continue
            shapes, strides = t.point
            params = _params(shapes, strides)
            forget_last_tiling()
            want = self.fill(*params)
            ways = [strides] + ([None] if strides == tuple(map(cached_dense_strides, shapes)) else [])
            for st in ways:
                got = native.kernel(shapes, st)
                same = (want is None and type(got) is int) or (
                    want is not None and type(got) is not int and got.template_index == want[0]
                    and got.tiling == want[1] and np.array_equal(got.bytecode, want[2])
                    and got.output_shapes == want[3])
                if not same:
                    raise VtmlirError(f"{t.graph.name}: the native compile differs from the Python fill at "
                                      f"{shapes} / {'dense' if st is None else st}")

    def register(self, target: Target | None = None) -> None:
        """Make the native entry point `compile_graph`'s first path for this graph and `target`
        (default: the set's own; an equal Target object gets an entry of its own)."""
        if self.native is None or self.graph is None:
            return
        target = self.target if target is None else target
        fast = self.graph.__dict__.setdefault("_dvm_fast", {})
        if len(fast) >= 16:  # targets made per call would otherwise accumulate
            fast.clear()
        # keyed by identity (a dataclass hash costs more than the rest of the lookup); the entry
        # holds the target, so its id cannot be reused while the entry exists
        fast[id(target)] = (target, self.native.fast)

    def _unregister(self) -> None:
        if self.native is not None and self.graph is not None:
            fast = self.graph.__dict__.get("_dvm_fast", {})
            for key in [k for k, (_, f) in fast.items() if f is self.native.fast]:
                del fast[key]
        self.native = None

    def _generate(self) -> None:
        self._unregister()  # stale: recompiled by the next `compile_native`
        root: dict = {}
        for i, t in enumerate(self.templates):
            node = root
            for st in t.stmts + [("ret", i, None)]:
                node = node.setdefault(st, {})
        # one slot per parameter, then one per variable: a branch assigns a variable before it
        # reads it, so branches that diverged may reuse a slot (see the class docstring)
        params = self.templates[-1].params
        slots = {p: i for i, p in enumerate(params)}
        for t in self.templates:
            for kind, a, _ in t.stmts:
                if kind == "set":
                    slots.setdefault(a, len(slots))
        calls = {"tile_vector": _TILE_VECTOR, "tile_matmul": _TILE_MATMUL}

        def compile_expr(e):
            return evaluator(e, slots, calls, self.target)

        run = _branch(root, compile_expr, slots, self.templates)
        n_params, n_slots = len(params), len(slots)

        def fill(*args):
            if len(args) != n_params:
                raise TypeError(f"fill() takes {n_params} arguments ({len(args)} given)")
            return run(list(args) + [None] * (n_slots - n_params))

        self.fill = fill


def _branch(node: dict, compile_expr, slots: dict, templates):
    """The closure running one subtrie of a set's statements on the slot list: its straight-line
    part (a failing guard: None), then its template's words, or else each branch in turn."""
    steps = []
    while len(node) == 1:
        ((kind, a, b), child), = node.items()
        if kind == "ret":
            return _sequence(steps, templates[a].writer(a, compile_expr))
        steps.append((None, compile_expr(a)) if kind == "guard" else (slots[a], compile_expr(b)))
        node = child
    branches = [_branch({st: child}, compile_expr, slots, templates) for st, child in node.items()]

    def first(env):
        for br in branches:
            r = br(env)
            if r is not None:
                return r
        return None
    return _sequence(steps, first)


def _sequence(steps, then):
    """Run `steps` ((None, guard) or (slot, value)), then `then`; None as soon as a guard fails.
    Grouped as (guards, assignments) segments: the loop costs per step about what a step costs."""
    if not steps:
        return then
    segments: list[tuple[list, list]] = []
    for slot, f in steps:
        if slot is None:
            if not segments or segments[-1][1]:
                segments.append(([], []))
            segments[-1][0].append(f)
        else:
            if not segments:
                segments.append(([], []))
            segments[-1][1].append((slot, f))

    def run(env):
        for guards, sets in segments:
            for g in guards:
                if not g(env):
                    return None
            for slot, f in sets:
                env[slot] = f(env)
        return then(env)
    return run


def templates_of(graph: Graph) -> dict:
    """The graph's templates: {(graph structure, target, input ranks): TemplateSet}."""
    store = graph.__dict__.get("_dvm_templates")
    if store is None:
        store = graph.__dict__["_dvm_templates"] = {}
    return store


def _template_set(graph: Graph, shapes, target: Target) -> TemplateSet:
    store = templates_of(graph)
    # nodes, inputs and outputs are only ever appended (`Graph`): their counts identify the structure
    key = (len(graph.nodes), len(graph.outputs), target, tuple(map(len, shapes)))
    tset = store.get(key)
    if tset is None:
        tset = store[key] = TemplateSet(target, graph)
    return tset


def _params(shapes, strides) -> list:
    """The generated `fill`'s arguments: every input size, then every element stride."""
    return [*chain.from_iterable(shapes), *chain.from_iterable(strides)]


def compile_templated(graph: Graph, shapes, strides, target: Target) -> CompiledKernel:
    """`compile.compile_graph` through the graph's templates (a new structure is traced once):
    natively where the template set is compiled (`NativeFill.kernel`, registered for the next
    calls), else the Python `fill`."""
    tset = _template_set(graph, shapes, target)
    params = _params(shapes, strides)
    native = tset.native
    if native is not None:
        k = native.kernel(shapes, strides)
        if type(k) is not int:
            tset.register(target)
            return k
    # no template matched natively, or Python must decide (`NativeFill`: a native guard that read
    # a value wider than i64 may have failed where Python's exact integers hold): the Python fill
    filled = _fill(tset, params)
    if filled is None:
        tset.add(build_template(graph, shapes, strides, target))
        filled = _fill(tset, params)  # the traced shape passes its own guards
    i, tiling, code, out_shapes = filled
    if COVERAGE:
        record_hit(tset, i)
    if code.size > tset.max_words:
        tset.max_words = code.size
    code.flags.writeable = False  # valid as made (the template's guards): keep it so
    tmpl = tset.templates[i]
    return CompiledKernel(graph, code, tiling, shapes, strides, out_shapes, tmpl.output_dtypes, None, None,
                          tmpl.native_reason)


def _fill(tset: TemplateSet, params):
    """``tset.fill(*params)``; a word that does not fit int64 (sizes far beyond any memory) is
    refused as bytecode, not left to raise from `array`."""
    try:
        return tset.fill(*params)
    except OverflowError:
        raise BytecodeError(f"dvm bytecode: error: {tset.graph.name if tset.graph else 'kernel'}: "
                            f"a bytecode word of shape {params} does not fit int64") from None


def prebuild(graph: Graph, shapes_of, space: dict, target: Target | None = None, *, strides_of=None,
             limit: int = 1_000_000, progress: bool = False, native: bool = True) -> dict:
    """Build, ahead of time, every template the shapes in `space` need, so that no shape in it is
    ever traced at run time: a new shape then costs the guards, the tiling and the words only (the
    paper's per-shape cost, §4.2), never a trace.

    `space` maps a symbol name to the values it may take (e.g. ``{"m": range(1, 8193),
    "nk": [(128, 344), ...]}``); ``shapes_of(**point)`` gives the input shapes of one point (and
    ``strides_of(**point)`` their element strides, default dense). The walk is exhaustive over the
    product of the ranges -- every point runs the guards and the tiling (Alg. 1 / the MatMul
    template, ~10-30 µs) and only a point that no template covers is traced -- so its cost is that
    of the tiling over the whole space (seconds for ~10^5 points); above `limit` points it refuses
    rather than sample (a sample would leave structures out). The templates are then ordered by
    how many points of the space each covers (`fill` tries them in order) and, with `native`, every
    template set used is JIT-compiled (`TemplateSet.compile_native`, ≈1 s each). Returns
    ``{"points", "built", "templates", "native" (template sets now native), "seconds"}``."""

    target = target or Target()
    names = list(space)
    values = [list(space[n]) for n in names]
    total = math.prod(len(v) for v in values)
    if total > limit:
        raise ValueError(f"{graph.name}: the shape space has {total} points, more than limit={limit}; "
                         "narrow the ranges or raise the limit")
    t0, built = time.perf_counter(), 0
    points = itertools.product(*values)
    if progress:
        points = tqdm(points, total=total, desc=f"dvm prebuild {graph.name}", unit="shape")
    with coverage() as hits:
        for point in points:
            kw = dict(zip(names, point))
            shapes = tuple(tuple(map(int, s)) for s in shapes_of(**kw))
            strides = (tuple(map(dense_strides, shapes)) if strides_of is None
                       else tuple(tuple(0 if n == 1 else int(x) for x, n in zip(st, shp))
                                  for st, shp in zip(strides_of(**kw), shapes)))
            tset = _template_set(graph, shapes, target)
            filled = _fill(tset, _params(shapes, strides))  # guards and tiling only: no words kept
            if filled is None:
                tset.add(build_template(graph, shapes, strides, target))
                built += 1
                filled = _fill(tset, _params(shapes, strides))
            record_hit(tset, filled[0])
            tset.max_words = max(tset.max_words, filled[2].size)
    if native:
        for tset in hits:
            tset.compile_native()
    sets = templates_of(graph).values()
    return {"points": total, "built": built, "templates": sum(len(ts) for ts in sets),
            "native": sum(ts.native is not None for ts in sets), "seconds": time.perf_counter() - t0}
