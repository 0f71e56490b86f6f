"""`dvm-fuse`: symbol-deduction fusion of a linalg-on-tensors function into DVM kernels (Fang et al.,
DVM, §5.1 fusion categories, §5.2 static graphs).

The decisions use only the graph structure and the shape symbols of `symbols.SymbolTable` (the
`?` dimensions and the relations torch-mlir records, `tensor.dim`/`tensor.empty` equalities,
indexing maps), never concrete sizes, so one decision holds for every shape the function accepts.

Ops:
- *vector*: a `linalg.generic` whose operand maps are projected permutations or constant-0
  (keep-dim) results: elementwise (all loops parallel) or a reduction;
- *cube*: `linalg.matmul` (its `linalg.fill` init is folded in as the accumulator start).
Everything else (`linalg.transpose`, `linalg.broadcast`, fills, reshapes, `tensor.*`, constants,
`linalg.batch_matmul`) stays outside kernels; the runtime (`runner.py`) evaluates it.

Pattern-based fusion (§5.1), ops visited in program order: a vector op joins the group of a
producer when
  * the producer group is a vector group whose iteration domain has the same symbols, loop by
    loop (e.g. `[s77, s27, 16]`), and every value it reads from the group with the map the group
    wrote it with (so elementwise chains and reductions with their prologue/epilogue fuse), or
  * the producer group is a cube group, the op is elementwise over the `[m, n]` output symbols
    (matmul + elementwise epilogue; nothing reduces after a matmul in one kernel);
  and the merged group stays convex (no op outside it lies on a path between two members).
  Several compatible producer groups are merged into one.
Stacking-based fusion: afterwards, vector groups with equal domains and no dependency between them
are stacked into one kernel (their tiles share one grid; §5.1 spatial stacking of independent
meta-kernels with one tiling).

Output: every fused op gets `dvm.group` (i64), `dvm.kind` ("vector" | "cube-vector"),
`dvm.fusion` (the categories used: "single", "pattern", "stack", combined with "+") and
`dvm.domain` (the group's symbols); the text report lists the groups per function.
`runner.DvmFunction` turns the groups into DVM graphs (bytecode per new shape) and runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_mlir import ir

from ..ir_utils import nested_ops
from ..passes.registry import Option, Pass, register_pass, report_option
from .symbols import SymbolTable

VECTOR, CUBE = "vector", "cube-vector"


@dataclass
class FusionGroup:
    id: int
    kind: str
    domain: tuple[str, ...]
    ops: list = field(default_factory=list)  # indices into FunctionFusion.ops
    categories: set = field(default_factory=set)


@dataclass
class FunctionFusion:
    name: str
    ops: list  # every op of the body, in order
    groups: list[FusionGroup]
    group_of: dict  # op index -> group id


def classify(op) -> str | None:
    """VECTOR, CUBE or None (not fused) for one op."""
    name = op.name
    if name == "linalg.matmul":
        return CUBE
    if name != "linalg.generic" or any(not isinstance(r.type.maybe_downcast(), ir.RankedTensorType) for r in op.results):
        return None
    for m in ir.ArrayAttr(op.attributes["indexing_maps"]):
        amap = ir.AffineMapAttr(m).value
        if amap.n_symbols:
            return None
        dims = []
        for e in amap.results:
            if isinstance(e, ir.AffineDimExpr):
                dims.append(ir.AffineDimExpr(e).position)
            elif not (isinstance(e, ir.AffineConstantExpr) and ir.AffineConstantExpr(e).value == 0):
                return None
        if len(set(dims)) != len(dims):
            return None
    return VECTOR


def _iterators(op) -> list[str]:
    out = []
    for a in ir.ArrayAttr(op.attributes["iterator_types"]):
        text = str(a)
        out.append("reduction" if "reduction" in text else "parallel")
    return out


def _maps(op):
    return [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _producer(value):
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if hasattr(owner, "operation") else owner


def analyze_function(fn, stacking: bool = True) -> FunctionFusion:
    """Fusion groups of one func.func (no IR change)."""
    fn = fn.operation if hasattr(fn, "operation") else fn
    syms = SymbolTable(fn)
    ops = [op.operation for op in fn.regions[0].blocks[0].operations]
    index_of_result = {}
    for i, op in enumerate(ops):
        for r in op.results:
            index_of_result[r] = i
    preds: list[set[int]] = []
    for op in ops:
        ps = set()
        for v in op.operands:
            j = index_of_result.get(v)
            if j is not None:
                ps.add(j)
        _walk_nested_uses(op, index_of_result, ps)
        preds.append(ps)
    # transitive ancestors as bit sets
    anc = []
    for i, ps in enumerate(preds):
        bits = 0
        for p in ps:
            bits |= anc[p] | (1 << p)
        anc.append(bits)

    kinds = [classify(op) for op in ops]
    groups: list[FusionGroup] = []
    group_of: dict[int, int] = {}
    members: dict[int, int] = {}  # group id -> bitset of member ops
    write_map: dict = {}  # result value -> (group id, map text)

    def domain_of(i):
        op = ops[i]
        if kinds[i] == CUBE:
            return syms.shape(op.results[0])
        return syms.loop_symbols(op)

    def convex(bits: int) -> bool:
        # an op outside `bits` that descends from a member and is an ancestor of a member
        lo = min(k for k in range(len(ops)) if bits >> k & 1)
        hi = max(k for k in range(len(ops)) if bits >> k & 1)
        for k in range(lo + 1, hi):
            if bits >> k & 1:
                continue
            if anc[k] & bits and any((bits >> m & 1) and (anc[m] >> k & 1) for m in range(k + 1, hi + 1)):
                return False
        return True

    for i, op in enumerate(ops):
        kind = kinds[i]
        if kind is None:
            continue
        dom = domain_of(i)
        chosen: list[int] = []
        if kind == VECTOR:
            maps = _maps(op)
            n_in = len(op.operands) - len(op.results)
            reduces = "reduction" in _iterators(op)
            cand: dict[int, bool] = {}
            for v, m in zip(list(op.operands)[:n_in], maps[:n_in]):
                j = index_of_result.get(v)
                g = group_of.get(j) if j is not None else None
                if g is None:
                    continue
                grp = groups[g]
                ok = cand.get(g, True)
                wrote = write_map.get(v)
                read = _placement(syms.shape(v), m)
                if grp.kind == VECTOR:
                    ok &= merge_domains(grp.domain, dom) is not None and wrote is not None and read is not None and wrote[1] == read
                else:
                    ok &= not reduces and grp.domain == dom and wrote is not None and read is not None and wrote[1] == read
                cand[g] = ok
            chosen = [g for g, ok in cand.items() if ok]
            # one cube group at most; keep the earliest
            cubes = [g for g in chosen if groups[g].kind == CUBE]
            if len(cubes) > 1:
                chosen = [g for g in chosen if groups[g].kind != CUBE or g == cubes[0]]
            if cubes and any(groups[g].kind == VECTOR for g in chosen):
                chosen = [cubes[0]]
            if len({len(groups[g].domain) for g in chosen} | {len(dom)}) > 1:
                chosen = []
        if chosen:
            bits = 1 << i
            for g in chosen:
                bits |= members[g]
            if not convex(bits):
                chosen = chosen[:1]
                bits = members[chosen[0]] | (1 << i)
                if not convex(bits):
                    chosen = []
        if not chosen:
            gid = len(groups)
            groups.append(FusionGroup(gid, kind, dom, [i], {"single"}))
            members[gid] = 1 << i
            group_of[i] = gid
        else:
            target = min(chosen, key=lambda g: (groups[g].kind != CUBE, g))
            tg = groups[target]
            if tg.kind == VECTOR:
                for g in chosen:
                    tg.domain = merge_domains(tg.domain, groups[g].domain)
                tg.domain = merge_domains(tg.domain, dom)
            for g in chosen:
                if g == target:
                    continue
                for k in groups[g].ops:
                    group_of[k] = target
                tg.ops.extend(groups[g].ops)
                members[target] |= members[g]
                tg.categories |= groups[g].categories
                groups[g].ops = []
            tg.ops.append(i)
            tg.ops.sort()

            members[target] |= 1 << i
            group_of[i] = target
            tg.categories.discard("single")
            tg.categories.add("pattern")
        gid = group_of[i]
        if kind == VECTOR:
            maps = _maps(op)
            n_in = len(op.operands) - len(op.results)
            for r, m in zip(op.results, maps[n_in:]):
                write_map[r] = (gid, _placement(syms.shape(r), m))
        else:
            write_map[op.results[0]] = (gid, _placement(syms.shape(op.results[0]), None))

    if stacking:
        live = [g for g in groups if g.ops and g.kind == VECTOR]
        for a_i, a in enumerate(live):
            if not a.ops:
                continue
            for b in live[a_i + 1:]:
                if not b.ops or len(b.domain) != len(a.domain) or merge_domains(a.domain, b.domain) is None:
                    continue
                ba, bb = members[a.id], members[b.id]
                independent = not any(anc[k] & ba for k in b.ops) and not any(anc[k] & bb for k in a.ops)
                if not independent or not convex(ba | bb):
                    continue
                for k in b.ops:
                    group_of[k] = a.id
                a.ops = sorted(a.ops + b.ops)
                a.domain = merge_domains(a.domain, b.domain)
                members[a.id] = ba | bb
                a.categories |= b.categories
                a.categories.discard("single")
                a.categories.add("stack")
                b.ops = []
    final = [g for g in groups if g.ops]
    renumber = {g.id: n for n, g in enumerate(final)}
    for n, g in enumerate(final):
        g.id = n
    group_of = {i: renumber[g] for i, g in group_of.items()}
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    return FunctionFusion(name, ops, final, group_of)


def merge_domains(a, b):
    """The common iteration domain of two vector domains of one rank, by symbols: per loop the
    symbols are equal or one is 1 (a keep-dim value broadcast by the VM); None if they differ."""
    if len(a) != len(b):
        return None
    out = []
    for x, y in zip(a, b):
        if x == y or y == "1":
            out.append(x)
        elif x == "1":
            out.append(y)
        else:
            return None
    return tuple(out)


def _placement(shape_symbols, amap):
    """Where a tensor's non-unit dimensions sit in the iteration domain of the op that reads or
    writes it through `amap` (None: identity): ((domain loop, symbol), ...). A value produced and
    consumed inside one kernel must sit identically for both, and in increasing loop order (the VM
    keeps values in domain order; a transposed access is left to a kernel boundary)."""
    if amap is None:
        places = list(enumerate(shape_symbols))
    else:
        places = []
        for j, e in enumerate(amap.results):
            if isinstance(e, ir.AffineDimExpr):
                places.append((e.position, shape_symbols[j]))
    places = [(p, s) for p, s in places if s != "1"]
    if any(a[0] >= b[0] for a, b in zip(places, places[1:])):
        return None
    return tuple(places)


def _walk_nested_uses(op, index_of_result, out: set) -> None:
    """Values of the function body used inside op's regions (linalg bodies capture constants)."""
    for inner in nested_ops(op):
        for v in inner.operands:
            j = index_of_result.get(v)
            if j is not None:
                out.add(j)


def _fusion_label(g: FusionGroup) -> str:
    order = ("single", "pattern", "stack")
    return "+".join(c for c in order if c in g.categories)


def annotate(fusion: FunctionFusion) -> None:
    for g in fusion.groups:
        domain = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in g.domain])
        for i in g.ops:
            op = fusion.ops[i]
            op.attributes["dvm.group"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), g.id)
            op.attributes["dvm.kind"] = ir.StringAttr.get(g.kind)
            op.attributes["dvm.fusion"] = ir.StringAttr.get(_fusion_label(g))
            op.attributes["dvm.domain"] = domain


def report(fusions: list[FunctionFusion]) -> str:
    lines = ["dvm-fuse report"]
    for f in fusions:
        n_ops = sum(len(g.ops) for g in f.groups)
        lines.append(f"func @{f.name}: {len(f.groups)} kernels from {n_ops} fusible ops")
        for g in f.groups:
            names = [f.ops[i].name for i in g.ops]
            counts = {n: names.count(n) for n in dict.fromkeys(names)}
            what = ", ".join(f"{n} x{c}" for n, c in counts.items())
            lines.append(f"  kernel {g.id}: {g.kind} [{_fusion_label(g)}] domain [{', '.join(g.domain)}]: {what}")
    return "\n".join(lines) + "\n"


def fuse_module(module, stacking: bool = True) -> list[FunctionFusion]:
    """Analyse and annotate every func.func of `module` (an ir.Module or its operation)."""
    op = module.operation if hasattr(module, "operation") else module
    out = []
    with op.context:
        for f in op.regions[0].blocks[0].operations:
            if f.operation.name == "func.func" and len(f.operation.regions[0].blocks):
                fusion = analyze_function(f, stacking=stacking)
                annotate(fusion)
                out.append(fusion)
    return out


@register_pass
class DvmFuse(Pass):
    name = "dvm-fuse"
    summary = "Group linalg ops into DVM kernels by shape-symbol deduction (DVM §5)"
    description = __doc__
    options = (
        Option("stacking", bool, True, "stack independent vector kernels with equal domains"),
        report_option("the text report"),
    )

    def run(self, module) -> None:
        fusions = fuse_module(module, stacking=self.stacking)
        self.write_report(module, report(fusions))
