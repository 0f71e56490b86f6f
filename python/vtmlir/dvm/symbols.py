"""Shape-symbol deduction on linalg-on-tensors functions (Fang et al., DVM, §5.2 "Static computation
graphs ... we check the fusion conditions ... based on symbol deduction").

Every tensor dimension `(value, d)` and every index value gets a node of a union-find. Nodes are
merged when the IR proves them equal, never from concrete sizes:

- static sizes: all dimensions of size 16 share the node of the constant 16;
- arguments: the `vtmlir.symbolic_shape` attributes `import_torch(..., dynamic_shapes=...)` records
  (torch-mlir's `bind_symbolic_shape`), e.g. `["s77", "s27", "16"]`; without them every `?` is a
  fresh symbol `arg<i>.<d>`;
- `tensor.dim %t, c` is the node of `(t, c)`; `tensor.empty(%i, ...)` gives its dynamic sizes the
  nodes of the index operands; `tensor.cast` keeps its operand's dims;
- linalg ops: all operand dimensions indexed by the same loop (`AffineDimExpr`) are equal, results
  equal their inits; `linalg.matmul`/`batch_matmul`/`transpose`/`broadcast` by their semantics;
- reshapes: a reassociation group with one non-unit dimension equates it with the other side; a
  collapsed group gets the product of its symbols (`s27 * s77`), and nodes whose products are equal
  are merged (this is what makes `[b*s, h]` after a collapse meet `[b*s, h]` elsewhere).

`SymbolTable.dim_symbol(value, d)` is the canonical printable symbol of a dimension.
"""

from __future__ import annotations

import re

from torch_mlir import ir

_DYN = ir.ShapedType.get_dynamic_size()


class SymbolTable:
    def __init__(self, func_op):
        self.parent: dict = {}
        self.expr: dict = {}  # root -> (const, atoms) canonical product, or None
        self._by_expr: dict = {}
        self._names: dict = {}
        fn = func_op.operation if hasattr(func_op, "operation") else func_op
        self._seed_arguments(fn)
        for block in fn.regions[0].blocks:
            for op in block.operations:
                self._visit(op.operation)

    # -- union-find --------------------------------------------------------------------------
    def _find(self, k):
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def _union(self, a, b):
        ra, rb = self._find(a), self._find(b)
        if ra == rb:
            return
        ea, eb = self.expr.get(ra), self.expr.get(rb)
        self.parent[rb] = ra
        if ea is None and eb is not None:
            self._set_expr(ra, eb)
        elif ea is not None:
            self._set_expr(ra, ea)

    def _set_expr(self, root, e):
        self.expr[root] = e
        other = self._by_expr.get(e)
        if other is not None and self._find(other) != self._find(root):
            self._union(other, root)
        else:
            self._by_expr[e] = root

    def _node_for_expr(self, e):
        key = ("expr", e)
        if self._find(key) not in self.expr:
            self._set_expr(self._find(key), e)
        return key

    def _const(self, n: int):
        return self._node_for_expr((int(n), ()))

    def _dim(self, value, d: int):
        key = ("dim", _vkey(value), d)
        if key not in self.parent:
            self.parent[key] = key
            if _is_tensor(value):
                t = ir.RankedTensorType(value.type)
                if t.get_dim_size(d) != _DYN:
                    self._union(key, self._const(t.get_dim_size(d)))
        return key

    def _index(self, value):
        return ("index", _vkey(value))

    # -- seeds and rules -----------------------------------------------------------------------
    def _seed_arguments(self, fn):
        block = fn.regions[0].blocks[0]
        attrs = ir.ArrayAttr(fn.attributes["arg_attrs"]) if "arg_attrs" in fn.attributes else None
        for i, arg in enumerate(block.arguments):
            if not _is_tensor(arg):
                continue
            t = ir.RankedTensorType(arg.type)
            exprs = None
            if attrs is not None and i < len(attrs):
                d = ir.DictAttr(attrs[i])
                if "vtmlir.symbolic_shape" in d:
                    exprs = [ir.StringAttr(x).value for x in ir.ArrayAttr(d["vtmlir.symbolic_shape"])]
            for d in range(t.rank):
                if t.get_dim_size(d) != _DYN:
                    self._dim(arg, d)
                    continue
                e = _parse_product(exprs[d]) if exprs is not None and d < len(exprs) else None
                if e is None:
                    e = (1, (f"arg{i}.{d}",))
                self._union(self._dim(arg, d), self._node_for_expr(e))

    def _visit(self, op):
        name = op.name
        if name.startswith("linalg.") and not len(op.results):
            return  # on memrefs (bufferized IR): no tensor dims to relate
        for r in op.results:
            if _is_tensor(r):
                for d in range(ir.RankedTensorType(r.type).rank):
                    self._dim(r, d)
        if name == "arith.constant" and len(op.results) == 1 and isinstance(op.results[0].type.maybe_downcast(), ir.IndexType):
            self._union(self._index(op.results[0]), self._const(ir.IntegerAttr(op.attributes["value"]).value))
        elif name == "tensor.dim":
            c = _constant_index(op.operands[1])
            if c is not None:
                self._union(self._index(op.results[0]), self._dim(op.operands[0], c))
        elif name == "tensor.empty":
            t = ir.RankedTensorType(op.results[0].type)
            dyn = [d for d in range(t.rank) if t.get_dim_size(d) == _DYN]
            for d, v in zip(dyn, op.operands):
                self._union(self._dim(op.results[0], d), self._index(v))
        elif name in ("affine.apply", "arith.muli", "arith.divsi", "arith.divui", "arith.floordivsi", "arith.index_cast"):
            self._index_arith(op)
        elif name == "tensor.cast":
            self._same_dims(op.operands[0], op.results[0])
        elif name in ("tensor.expand_shape", "tensor.collapse_shape"):
            self._reshape(op)
        elif name == "linalg.generic" or (name.startswith("linalg.") and "indexing_maps" in op.attributes):
            self._indexed(op, [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])])
        elif name in ("linalg.matmul", "linalg.batch_matmul"):
            a, b, c = op.operands[0], op.operands[1], op.operands[2]
            off = 1 if name == "linalg.batch_matmul" else 0
            if off:
                self._union(self._dim(a, 0), self._dim(b, 0))
                self._union(self._dim(a, 0), self._dim(c, 0))
            self._union(self._dim(a, off), self._dim(c, off))
            self._union(self._dim(a, off + 1), self._dim(b, off))
            self._union(self._dim(b, off + 1), self._dim(c, off + 1))
            self._same_dims(c, op.results[0])
        elif name == "linalg.transpose":
            perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            for i, p in enumerate(perm):
                self._union(self._dim(op.operands[1], i), self._dim(op.operands[0], p))
            self._same_dims(op.operands[1], op.results[0])
        elif name == "linalg.broadcast":
            added = set(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
            kept = [d for d in range(ir.RankedTensorType(op.operands[1].type).rank) if d not in added]
            for j, d in enumerate(kept):
                self._union(self._dim(op.operands[1], d), self._dim(op.operands[0], j))
            self._same_dims(op.operands[1], op.results[0])
        elif name == "linalg.fill":
            self._same_dims(op.operands[1], op.results[0])

    def _index_expr(self, v):
        return self.expr.get(self._find(self._index(v)))

    def _index_arith(self, op):
        """Products and exact divisions of index values (affine.apply of `s0 * 8`, muli, divsi by
        a constant), so that sizes computed for reshapes keep their symbols."""
        name, res = op.name, op.results[0]
        if name == "arith.index_cast":
            self._union(self._index(res), self._index(op.operands[0]))
            return
        if name == "affine.apply":
            amap = ir.AffineMapAttr(op.attributes["map"]).value
            args = [self._index_expr(v) for v in op.operands]
            e = _affine_product(amap.results[0], args[:amap.n_dims], args[amap.n_dims:])
        elif name == "arith.muli":
            a, b = (self._index_expr(v) for v in op.operands)
            e = (a[0] * b[0], tuple(sorted(a[1] + b[1]))) if a is not None and b is not None else None
        else:
            a, b = (self._index_expr(v) for v in op.operands)
            e = None
            if a is not None and b is not None and not b[1] and b[0] and a[0] % b[0] == 0:
                e = (a[0] // b[0], a[1])
        if e is not None:
            self._union(self._index(res), self._node_for_expr(e))

    def _same_dims(self, a, b):
        if _is_tensor(a) and _is_tensor(b):
            for d in range(min(ir.RankedTensorType(a.type).rank, ir.RankedTensorType(b.type).rank)):
                self._union(self._dim(a, d), self._dim(b, d))

    def _indexed(self, op, maps):
        loops: dict[int, object] = {}
        for v, m in zip(op.operands, maps):
            if not _is_tensor(v):
                continue
            for j, e in enumerate(m.results):
                if isinstance(e, ir.AffineDimExpr):
                    pos = ir.AffineDimExpr(e).position
                    node = self._dim(v, j)
                    if pos in loops:
                        self._union(loops[pos], node)
                    else:
                        loops[pos] = node
        n_in = len(op.operands) - len(op.results)
        for r, init in zip(op.results, list(op.operands)[n_in:]):
            self._same_dims(init, r)

    def _reshape(self, op):
        collapse = op.name == "tensor.collapse_shape"
        if not collapse:  # output_shape operands give the dynamic sizes of the result
            t = ir.RankedTensorType(op.results[0].type)
            dyn = [d for d in range(t.rank) if t.get_dim_size(d) == _DYN]
            for d, v in zip(dyn, list(op.operands)[1:]):
                self._union(self._dim(op.results[0], d), self._index(v))
        big, small = (op.operands[0], op.results[0]) if collapse else (op.results[0], op.operands[0])
        groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(op.attributes["reassociation"])]
        for j, grp in enumerate(groups):
            nonunit = [d for d in grp if self.expr.get(self._find(self._dim(big, d))) != (1, ())]
            if len(nonunit) == 1:
                self._union(self._dim(big, nonunit[0]), self._dim(small, j))
            exprs = [self.expr.get(self._find(self._dim(big, d))) for d in grp]
            if all(e is not None for e in exprs):
                const, atoms = 1, []
                for c, a in exprs:
                    const *= c
                    atoms.extend(a)
                self._union(self._dim(small, j), self._node_for_expr((const, tuple(sorted(atoms)))))

    # -- queries -------------------------------------------------------------------------------
    def dim_symbol(self, value, d: int) -> str:
        """The canonical symbol of dimension d of `value`: a number, a product of symbols, or `?k`
        for a class with no known expression."""
        root = self._find(self._dim(value, d))
        e = self.expr.get(root)
        if e is None:
            if root not in self._names:
                self._names[root] = f"?{len(self._names)}"
            return self._names[root]
        return _format_product(e)

    def shape(self, value) -> tuple[str, ...]:
        return tuple(self.dim_symbol(value, d) for d in range(ir.RankedTensorType(value.type).rank))

    def loop_symbols(self, op) -> tuple[str, ...]:
        """The symbols of the loops of a linalg op with indexing maps (one per loop)."""
        maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
        n = maps[0].n_dims
        out = [None] * n
        for v, m in zip(op.operands, maps):
            if not _is_tensor(v):
                continue
            for j, e in enumerate(m.results):
                if isinstance(e, ir.AffineDimExpr) and out[ir.AffineDimExpr(e).position] is None:
                    out[ir.AffineDimExpr(e).position] = self.dim_symbol(v, j)
        return tuple(x if x is not None else "?" for x in out)


def _vkey(value):
    return value


def _is_tensor(v) -> bool:
    return isinstance(v.type.maybe_downcast(), ir.RankedTensorType)


def _constant_index(v):
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name == "arith.constant":
        return ir.IntegerAttr(op.attributes["value"]).value
    return None


def _affine_product(e, dims, syms):
    """An affine expression over index values as a product (const, atoms), or None."""
    if isinstance(e, ir.AffineConstantExpr):
        return (e.value, ())
    if isinstance(e, ir.AffineDimExpr):
        return dims[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        return syms[e.position]
    if isinstance(e, ir.AffineMulExpr):
        a, b = _affine_product(e.lhs, dims, syms), _affine_product(e.rhs, dims, syms)
        if a is not None and b is not None:
            return (a[0] * b[0], tuple(sorted(a[1] + b[1])))
    if isinstance(e, ir.AffineFloorDivExpr):
        a, b = _affine_product(e.lhs, dims, syms), _affine_product(e.rhs, dims, syms)
        if a is not None and b is not None and not b[1] and b[0] and a[0] % b[0] == 0:
            return (a[0] // b[0], a[1])
    return None


def _parse_product(text: str):
    """`"s27 * s77"`, `"16"`, `"s0 * 2"` -> (const, sorted atoms); None for sums and other forms."""
    const, atoms = 1, []
    for factor in (f.strip() for f in text.split("*")):
        if re.fullmatch(r"-?\d+", factor):
            const *= int(factor)
        elif re.fullmatch(r"[A-Za-z_][\w.]*", factor):
            atoms.append(factor)
        else:
            return None
    return const, tuple(sorted(atoms))


def _format_product(e) -> str:
    const, atoms = e
    parts = ([str(const)] if const != 1 or not atoms else []) + list(atoms)
    return " * ".join(parts)
