"""Compile-time evaluation of constant tensor subgraphs (numpy), for recognising quantised weights.

`subbyte-pack` must know, for a matmul operand computed only from constants, which low-bit codes,
conversion and scales it holds (Tilus §6: the weight is packed ahead of time). The importer writes
`QuantizedLinear`'s dequantisation as dozens of small elementwise `linalg.generic`s, reshapes,
slices and a concat (docs/lowbit.md, "Quantisation"); rather than pattern-match that exact shape of
IR, the pass *evaluates* the constant slice with this interpreter and reads the semantics off the
values (see recognize.py). The interpreter covers the ops the graph level holds for such subgraphs:
constants (`dense` and `dense_resource`), `tensor.empty/expand_shape/collapse_shape/extract_slice/
concat`, `linalg.transpose/broadcast/fill`, and all-parallel `linalg.generic`s whose body uses
arith ops, `linalg.index` and `tensor.extract` (a table lookup). Integers are held as int64 numpy
arrays normalised to the signed range of their MLIR width (two's-complement wrap-around, as arith
defines it); floats as float32/float64 arrays, so float arithmetic is bit-identical to the IR's.
Anything else raises `EvaluationError` naming the op: the caller then leaves the subgraph alone.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from ..ir_constants import constant_array


class EvaluationError(Exception):
    """The subgraph holds an op (or a form of one) this interpreter does not evaluate."""


def int_width(t) -> int | None:
    """Bit width of an MLIR integer/index type, None for anything else."""
    s = str(t)
    if s == "index":
        return 64
    if s.startswith("i") and s[1:].isdigit():
        return int(s[1:])
    if s.startswith("ui") and s[2:].isdigit():
        return int(s[2:])
    return None


def wrap(x, bits: int) -> np.ndarray:
    """Two's-complement wrap-around of int64 values to the signed range of `bits` bits."""
    x = np.asarray(x, dtype=np.int64)
    if bits >= 64:
        return x
    half = np.int64(1) << np.int64(bits - 1)
    return ((x + half) & ((half << np.int64(1)) - np.int64(1))) - half


def unsigned(x, bits: int) -> np.ndarray:
    """The unsigned reading of `bits`-bit values held signed."""
    x = np.asarray(x, dtype=np.int64)
    return x if bits >= 64 else x & ((np.int64(1) << np.int64(bits)) - np.int64(1))


_FLOAT_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


def _float_dtype(t):
    dt = _FLOAT_DTYPES.get(str(t))
    if dt is None:
        raise EvaluationError(f"element type {t} is not evaluated")
    return dt


def affine_eval(expr, dims: list[np.ndarray]) -> np.ndarray:
    """Value of an affine expression for numpy arrays of dimension values (no symbols)."""
    if isinstance(expr, ir.AffineDimExpr):
        return dims[expr.position]
    if isinstance(expr, ir.AffineConstantExpr):
        return np.int64(expr.value)
    lhs, rhs = affine_eval(expr.lhs, dims), affine_eval(expr.rhs, dims)
    if isinstance(expr, ir.AffineAddExpr):
        return lhs + rhs
    if isinstance(expr, ir.AffineMulExpr):
        return lhs * rhs
    if isinstance(expr, ir.AffineModExpr):
        return np.mod(lhs, rhs)
    if isinstance(expr, ir.AffineFloorDivExpr):
        return np.floor_divide(lhs, rhs)
    if isinstance(expr, ir.AffineCeilDivExpr):
        return -np.floor_divide(-lhs, rhs)
    raise EvaluationError(f"affine expression {expr} is not evaluated")


class ConstantEvaluator:
    """Memoised evaluation of SSA values defined by constant subgraphs of one function."""

    def __init__(self):
        self._memo: dict = {}

    def __call__(self, value) -> np.ndarray:
        key = value
        if key in self._memo:
            return self._memo[key]
        owner = value.owner
        if not isinstance(owner, (ir.Operation, ir.OpView)):
            raise EvaluationError("the value is a block argument, not a constant")
        op = owner.operation
        results = self._evaluate(op)
        for res, arr in zip(op.results, results):
            self._memo[res] = arr
        return self._memo[key]

    # -- ops ------------------------------------------------------------------------------------
    def _evaluate(self, op) -> list[np.ndarray]:
        name = op.name
        if name == "arith.constant":
            return [self._constant(op)]
        if name == "tensor.empty":
            t = ir.RankedTensorType(op.results[0].type)
            return [np.zeros(t.shape, dtype=np.int64 if int_width(t.element_type) else _float_dtype(t.element_type))]
        if name in ("tensor.expand_shape", "tensor.collapse_shape"):
            shape = ir.RankedTensorType(op.results[0].type).shape
            return [self(op.operands[0]).reshape(shape)]
        if name == "tensor.extract_slice":
            return [self._extract_slice(op)]
        if name == "tensor.concat":
            dim = ir.IntegerAttr(op.attributes["dim"]).value
            return [np.concatenate([self(v) for v in op.operands], axis=dim)]
        if name == "linalg.transpose":
            perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            return [np.ascontiguousarray(np.transpose(self(op.operands[0]), perm))]
        if name == "linalg.broadcast":
            dims = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
            src = self(op.operands[0])
            shape = ir.RankedTensorType(op.results[0].type).shape
            return [np.broadcast_to(np.expand_dims(src, dims), shape).copy()]
        if name == "linalg.fill":
            value = self(op.operands[0])
            shape = ir.RankedTensorType(op.results[0].type).shape
            return [np.full(shape, value, dtype=np.asarray(value).dtype)]
        if name == "linalg.generic":
            return self._generic(op)
        raise EvaluationError(f"op '{name}' is not evaluated at compile time")

    def _constant(self, op) -> np.ndarray:
        attr = op.attributes["value"]
        t = op.results[0].type
        if isinstance(t.maybe_downcast(), ir.RankedTensorType):
            arr = constant_array(op)
            if arr is None:
                raise EvaluationError(f"cannot read constant {str(attr)[:60]}")
            width = int_width(ir.RankedTensorType(t).element_type)
            return wrap(arr.astype(np.int64), width) if width else arr
        width = int_width(t)
        if width:
            return np.int64(wrap(ir.IntegerAttr(attr).value, width))
        return _float_dtype(t)(ir.FloatAttr(attr).value)

    def _extract_slice(self, op) -> np.ndarray:
        src = self(op.operands[0])
        offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
        sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
        strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
        if len(op.operands) != 1:
            raise EvaluationError("tensor.extract_slice with dynamic offsets is not evaluated")
        index = tuple(slice(o, o + s * st, st) for o, s, st in zip(offsets, sizes, strides))
        shape = ir.RankedTensorType(op.results[0].type).shape
        return src[index].reshape(shape)

    def _generic(self, op) -> list[np.ndarray]:
        iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
        if any("parallel" not in a for a in iterators):
            raise EvaluationError("a linalg.generic with reduction loops is not evaluated")
        maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
        n_out = len(op.results)
        n_in = len(op.operands) - n_out
        out_type = ir.RankedTensorType(op.results[0].type)
        loops = self._loop_extents(op, maps)
        grid = np.indices(loops, dtype=np.int64) if loops else np.zeros((0,), np.int64)
        dims = [grid[d] for d in range(len(loops))]
        block = op.regions[0].blocks[0]
        env = {}
        for k in range(len(op.operands)):
            arr = self(op.operands[k]) if k < n_in else np.zeros(out_type.shape)
            index = tuple(np.broadcast_to(affine_eval(e, dims), loops) for e in maps[k].results)
            env[block.arguments[k]] = np.asarray(arr)[index] if index else np.broadcast_to(arr, loops)
        results = None
        for inner in block.operations:
            if inner.operation.name == "linalg.yield":
                results = [np.broadcast_to(env[v] if v in env else self(v), loops) for v in inner.operands]
                break
            self._body_op(inner.operation, env, dims, loops)
        outs = []
        for k, res in enumerate(results):
            omap = maps[n_in + k]
            rt = ir.RankedTensorType(op.results[k].type)
            width = int_width(rt.element_type)
            out = np.zeros(rt.shape, dtype=np.int64 if width else _float_dtype(rt.element_type))
            index = tuple(np.broadcast_to(affine_eval(e, dims), loops) for e in omap.results)
            out[index] = res
            outs.append(out)
        return outs

    @staticmethod
    def _loop_extents(op, maps) -> tuple[int, ...]:
        n = maps[0].n_dims
        extents = [None] * n
        for value, m in zip(op.operands, maps):
            shape = ir.RankedTensorType(value.type).shape
            for e, size in zip(m.results, shape):
                if isinstance(e, ir.AffineDimExpr):
                    extents[e.position] = size
        if any(e is None for e in extents):
            raise EvaluationError("cannot infer the loop extents of a linalg.generic")
        return tuple(extents)

    def _body_op(self, op, env, dims, loops) -> None:
        def get(v):
            return env[v] if v in env else self(v)

        name = op.name
        args = [get(v) for v in op.operands] if name not in ("arith.constant",) else []
        rtype = op.results[0].type
        w = int_width(rtype)
        in_w = int_width(op.operands[0].type) if len(op.operands) else None
        if name == "arith.constant":
            val = self._constant(op)
        elif name == "linalg.index":
            val = dims[ir.IntegerAttr(op.attributes["dim"]).value]
        elif name in ("arith.extsi", "arith.trunci", "arith.index_cast"):
            val = wrap(args[0], w)
        elif name in ("arith.extui", "arith.index_castui"):
            val = wrap(unsigned(args[0], in_w), w)
        elif name in ("arith.addi", "arith.subi", "arith.muli", "arith.andi", "arith.ori", "arith.xori"):
            a, b = (np.asarray(x, np.int64) for x in args)
            val = wrap({"arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
                        "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or,
                        "arith.xori": np.bitwise_xor}[name](a, b), w)
        elif name in ("arith.shli", "arith.shrsi", "arith.shrui"):
            a, s = np.asarray(args[0], np.int64), np.asarray(args[1], np.int64)
            if np.any((s < 0) | (s >= w)):
                raise EvaluationError(f"'{name}' by an out-of-range amount (poison)")
            if name == "arith.shli":
                val = wrap(a << s, w)
            elif name == "arith.shrsi":
                val = a >> s
            else:
                val = wrap(unsigned(a, w) >> s, w)
        elif name == "arith.cmpi":
            pred = ir.IntegerAttr(op.attributes["predicate"]).value
            a, b = np.asarray(args[0], np.int64), np.asarray(args[1], np.int64)
            if pred >= 6:  # ult, ule, ugt, uge
                a, b = unsigned(a, in_w), unsigned(b, in_w)
            val = [a == b, a != b, a < b, a <= b, a > b, a >= b, a < b, a <= b, a > b, a >= b][pred].astype(np.int64)
        elif name == "arith.select":
            val = np.where(np.asarray(args[0]) != 0, args[1], args[2])
        elif name == "arith.sitofp":
            val = np.asarray(args[0], np.int64).astype(_float_dtype(rtype))
        elif name == "arith.uitofp":
            val = unsigned(args[0], in_w).astype(_float_dtype(rtype))
        elif name in ("arith.mulf", "arith.addf", "arith.subf", "arith.divf"):
            dt = _float_dtype(rtype)
            a, b = np.asarray(args[0], dt), np.asarray(args[1], dt)
            val = {"arith.mulf": np.multiply, "arith.addf": np.add, "arith.subf": np.subtract,
                   "arith.divf": np.divide}[name](a, b).astype(dt)
        elif name == "arith.negf":
            val = -np.asarray(args[0], _float_dtype(rtype))
        elif name in ("arith.extf", "arith.truncf"):
            val = np.asarray(args[0]).astype(_float_dtype(rtype))
        elif name == "tensor.extract":
            table = np.asarray(args[0])
            idx = tuple(np.asarray(i, np.int64) for i in args[1:])
            if any(np.any((i < 0) | (i >= n)) for i, n in zip(idx, table.shape)):
                raise EvaluationError("tensor.extract out of bounds")
            val = table[idx]
        else:
            raise EvaluationError(f"op '{name}' inside a linalg.generic is not evaluated at compile time")
        env[op.results[0]] = np.broadcast_to(val, loops) if np.ndim(val) else val
