"""Per-kernel bytecode templates: a new shape costs guards + tiling + filling words (Fang et al., DVM,
§4.2 and Fig. 5: at run time "shape tiling" and "bytecode encoding" only, ≈0.1 ms per new shape).

Everything the lowering (`codegen.lower`) does that does not depend on the sizes is done once per
graph and *structure*: the schedule, the instruction sequence, the slot assignment, the record
layouts, the constant words. The first compile of a structure runs the lowering on traced sizes
(`symbolic.Sym`): every size carries a Python expression over the kernel's parameters (input sizes
``s<i>_<d>`` and element strides ``t<i>_<d>``); every decision taken on a size is recorded as a
guard; Alg. 1 / the MatMul template are recorded as calls (`symbolic.traced_call`) whose result
fields become parameters. From the trace one Python function is generated and compiled:

    def fill(s0_0, s0_1, ..., t0_0, ...):
        if not (<guards up to the tiling call>): return None
        _v3 = tile_vector((<coalesced dims>), {...}, n_max, itemsize, _target)   # Alg. 1, per shape
        if not (<guards after it>): return None
        return _v3, (<the shape-dependent words>), (<output shapes>)

and the template keeps the encoded program with the shape-dependent positions (`index`). A new
shape whose guards hold gets ``code = base.copy(); code[index] = words``: exactly the words the
lowering would have encoded, because on that shape every decision the lowering takes is the same
(tested bitwise against ``compile_graph(..., template=False)`` on random shapes). A shape that
fails a template's guards is traced into a new template (one per structure: which sizes are 1,
whether a dimension is split, the number of k chunks of a matmul, ...); templates are kept per
graph, most recently used first.

Tiling decisions are *not* cached: Alg. 1 runs for every new shape inside `fill`, as in the paper.
"""

from __future__ import annotations

import re

import numpy as np

from .bytecode import WORD, RepeatWords, encode_words
from .codegen import CompiledKernel, lower
from .graph import Graph
from .symbolic import Sym, Tracer, f64bits, value
from .tiling import Target, tile_matmul, tile_vector

MAX_TEMPLATES = 64  # per graph, target and ranks: beyond this the set starts afresh
_VAR = re.compile(r"_v\d+")


class KernelTemplate:
    """One traced structure of a graph: `stmts` (guards and assignments over the parameters
    `params`, see `symbolic.Tracer`) ending in `ret`, the expression of ``(tiling, holes, count,
    steps, output_shapes)``. The words are ``pre + block * count + post`` (`block` only where a
    matmul's k loop has a run of full chunks, see `isa.Repeat`): each part an array of the traced
    shape's words whose shape-dependent positions (`*_index`) receive `holes` in order; in the
    block, the words at `step_index` advance by `steps` per repetition."""

    __slots__ = ("graph", "params", "stmts", "ret", "output_dtypes", "pre", "pre_index", "block",
                 "block_index", "step_index", "post", "post_index", "_cuts")

    def __init__(self, graph: Graph, params, stmts, ret: str, parts):
        self.graph, self.params, self.stmts, self.ret = graph, params, stmts, ret
        self.output_dtypes = tuple(graph.nodes[o].dtype for o in graph.outputs)
        (self.pre, self.pre_index), block, (self.post, self.post_index) = parts
        self.block, self.block_index, self.step_index = block
        a = len(self.pre_index)
        b = a + (len(self.block_index) if self.block is not None else 0)
        self._cuts = (a, b)

    def words(self, holes, count, steps) -> np.ndarray:
        if self.block is None:
            code = self.pre.copy()
            code[self.pre_index] = holes
            return code
        a, b = self._cuts
        n_pre, n_blk = len(self.pre), len(self.block)
        end = n_pre + count * n_blk
        code = np.empty(end + len(self.post), dtype=WORD)
        code[:n_pre] = self.pre
        code[self.pre_index] = holes[:a]
        reps = code[n_pre:end].reshape(count, n_blk)
        reps[:] = self.block
        reps[:, self.block_index] = holes[a:b]
        if count > 1 and len(steps):
            reps[1:, self.step_index] += np.arange(1, count, dtype=WORD)[:, None] * np.array(steps, dtype=WORD)
        code[end:] = self.post
        code[self.post_index + end] = holes[b:]
        return code

    def kernel(self, filled, shapes, strides) -> CompiledKernel:
        tiling, holes, count, steps, out_shapes = filled
        return CompiledKernel(self.graph, self.words(holes, count, steps), tiling, shapes, strides, out_shapes,
                              self.output_dtypes)


def _part(words):
    """(the words' values, positions of the shape-dependent ones) of a list of ints and `Sym`s."""
    index = [i for i, w in enumerate(words) if type(w) is Sym]
    return np.array([value(w) for w in words], dtype=WORD), np.array(index, dtype=np.intp)


def build_template(graph: Graph, shapes, strides, target: Target) -> tuple[KernelTemplate, CompiledKernel]:
    """Trace the lowering of `graph` at one concrete shape; returns its template and the kernel of
    that shape (identical to the untraced lowering's)."""
    tr = Tracer()
    params = []

    def sym(prefix, i, d, v):
        name = f"{prefix}{i}_{d}"
        params.append(name)
        return tr.param(name, v)

    sshapes = [tuple(sym("s", i, d, v) for d, v in enumerate(shp)) for i, shp in enumerate(shapes)]
    sstrides = [tuple(sym("t", i, d, v) for d, v in enumerate(st)) for i, st in enumerate(strides)]
    program, tiling, node_shapes = lower(graph, graph.infer_shapes_of(sshapes), sstrides, target)
    words = encode_words(program)
    out_shapes = tuple(node_shapes[o] for o in graph.outputs)
    if len(tr.calls) != 1:  # pragma: no cover - every kernel tiles exactly once
        raise AssertionError(f"{graph.name}: expected one tiling call, traced {len(tr.calls)}")
    runs = [i for i, w in enumerate(words) if type(w) is RepeatWords]
    if len(runs) > 1:  # pragma: no cover - one matmul per kernel
        raise AssertionError(f"{graph.name}: more than one repeated run")
    if runs:
        rw = words[runs[0]]
        pre, block, post = words[: runs[0]], rw.words, words[runs[0] + 1 :]
        step_pos = sorted(rw.deltas)
        steps = [rw.deltas[p] for p in step_pos]
        count = rw.count
        parts = (_part(pre), (*_part(block), np.array(step_pos, dtype=np.intp)), _part(post))
    else:
        pre, block, post, steps, count = words, [], [], [], 0
        parts = (_part(words), (None, None, None), (None, None))
    holes = [w for w in pre + block + post if type(w) is Sym]
    ret = (f"{tr.calls[0]}, ({''.join(w.e + ', ' for w in holes)}), {_src(count)}, "
           f"({''.join(_src(x) + ', ' for x in steps)}), "
           f"({''.join('(' + ''.join(_src(s) + ', ' for s in shp) + '), ' for shp in out_shapes)})")
    tmpl = KernelTemplate(graph, params, _live(tr.stmts, ret), ret, parts)
    filled = (tiling, [value(w) for w in holes], value(count), [value(x) for x in steps],
              tuple(tuple(value(s)) for s in out_shapes))
    return tmpl, tmpl.kernel(filled, shapes, strides)


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


def _src(x) -> str:
    return x.e if type(x) is Sym else repr(int(x))


def _live(stmts, ret: str):
    """`stmts` without the assignments nothing reads."""
    needed = set(_VAR.findall(ret))
    kept = []
    for st in reversed(stmts):
        kind, a, b = st
        if kind == "set":
            if a not in needed:
                continue
            needed.update(_VAR.findall(b))
        else:
            needed.update(_VAR.findall(a))
        kept.append(st)
    kept.reverse()
    return kept


class TemplateSet:
    """The templates of one (graph, target, input ranks), and `fill`: ONE generated function that
    tries all of them. Their statement sequences are merged into a trie, so what they share (in
    practice everything up to and including the tiling call) runs once; where they diverge each
    branch is a function of its own returning None when a guard fails, so the next branch is
    tried. Returns ``(template index, tiling, holes, count, steps, output_shapes)`` or None.

    Branches never clobber what a later branch reads: statements are shared only when textually
    equal, and a trace numbers its variables in order, so a branch assigns only variables
    numbered after its shared prefix (and assigns each before reading it)."""

    def __init__(self, target: Target):
        self.target = target
        self.templates: list[KernelTemplate] = []
        self.fill = lambda *params: None
        self.source = ""

    def __len__(self) -> int:
        return len(self.templates)

    def add(self, tmpl: KernelTemplate) -> None:
        if len(self.templates) >= MAX_TEMPLATES:
            self.templates.clear()
        self.templates.append(tmpl)
        root: dict = {}
        for i, t in enumerate(self.templates):
            node = root
            for st in t.stmts + [("ret", f"{i}, {t.ret}", None)]:
                node = node.setdefault(st, {})
        params = ", ".join(tmpl.params)
        funcs: list[list[str]] = []
        self._function("fill", params, root, [], funcs)
        self.source = "\n\n".join("\n".join(f) for f in reversed(funcs)) + "\n"
        namespace = {"tile_vector": _TILE_VECTOR, "tile_matmul": _TILE_MATMUL, "_target": self.target,
                     "_f64bits": f64bits}
        exec(compile(self.source, f"<dvm templates {tmpl.graph.name}>", "exec"), namespace)
        self.fill = namespace["fill"]

    def _function(self, name: str, params: str, node: dict, defined: list, funcs: list) -> None:
        lines = [f"def {name}({', '.join([params] + defined) if defined else params}):"]
        funcs.append(lines)
        guards: list[str] = []

        def flush():
            if guards:
                lines.append(f"    if not ({' and '.join(guards)}):\n        return None")
                guards.clear()

        while len(node) == 1:
            ((kind, a, b), child), = node.items()
            if kind == "guard":
                guards.append(a)
            elif kind == "set":
                flush()
                lines.append(f"    {a} = {b}")
                defined = defined + [a]
            else:
                flush()
                lines.append(f"    return {a}")
                return
            node = child
        flush()
        for st, child in node.items():
            sub = f"_b{len(funcs)}"
            self._function(sub, params, {st: child}, defined, funcs)
            args = ", ".join([params] + defined) if defined else params
            lines.append(f"    r = {sub}({args})\n    if r is not None:\n        return r")
        lines.append("    return None")


def templates_of(graph: Graph) -> dict:
    """The graph's templates: {(graph structure, target, input ranks): TemplateSet}."""
    store = graph.__dict__.get("_dvm_templates")
    if store is None:
        store = graph.__dict__["_dvm_templates"] = {}
    return store


def compile_templated(graph: Graph, shapes, strides, target: Target) -> CompiledKernel:
    """`codegen.compile_graph` through the graph's templates (a new structure is traced once)."""
    store = templates_of(graph)
    key = (len(graph.nodes), tuple(graph.inputs), tuple(graph.outputs), target, tuple(map(len, shapes)))
    tset = store.get(key)
    if tset is None:
        tset = store[key] = TemplateSet(target)
    params = [x for s in shapes for x in s]
    params += [x for s in strides for x in s]
    filled = tset.fill(*params)
    if filled is not None:
        return tset.templates[filled[0]].kernel(filled[1:], shapes, strides)
    tmpl, kernel = build_template(graph, shapes, strides, target)
    tset.add(tmpl)
    return kernel
