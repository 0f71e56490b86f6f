"""The numpy glue of `runner.DvmFunction`: the ops between DVM kernels (shape queries, reshapes,
weight transposes, fills, index arithmetic, `affine.apply`, runtime asserts) and `linalg.batch_matmul`
as one rank-2 DVM cube kernel per batch slice. Each `GLUE[name](op, values, fn)` reads its operands
from `values` (mlir Value -> numpy array or Python int) and stores its results there.
"""

from __future__ import annotations

import math
import time

import numpy as np
from torch_mlir import ir

from ..dialects.affine_eval import eval_expr
from ..errors import VtmlirError
from .compile import compile_graph
from .graph import Graph
from .kernel import launch_cores
from .isa import DType

def element_dtype(t) -> DType:
    t = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
    text = str(t)
    table = {"f32": DType.F32, "f16": DType.F16, "f64": DType.F64, "i32": DType.I32, "i64": DType.I64,
             "i8": DType.I8, "i16": DType.I16, "i1": DType.BOOL}
    if text not in table:
        raise VtmlirError(f"dvm: element type {text} has no DVM dtype")
    return table[text]


def tensor_dtype(v) -> DType:
    return element_dtype(ir.RankedTensorType(v.type).element_type)


def defining_op(v):
    o = v.owner
    if isinstance(o, ir.Block):
        return None
    return o.operation if hasattr(o, "operation") else o


def describe_op(op) -> str:
    return f"'{op.name}' at {op.location}"


def _index(values, v):
    return int(values[v])


def _g_dim(op, values, fn=None):
    values[op.results[0]] = values[op.operands[0]].shape[_index(values, op.operands[1])]


def _g_empty(op, values, fn=None):
    result = op.results[0]
    # (static sizes, -1 dynamic; numpy dtype) read from the IR once per op of a DvmFunction `fn`,
    # as every call runs the op
    cache = {} if fn is None else fn.__dict__.setdefault("_empty_types", {})
    entry = cache.get(result)
    if entry is None:
        entry = cache[result] = (list(ir.RankedTensorType(result.type).shape), tensor_dtype(result).numpy)
    sizes, dtype = entry
    dyn = iter([_index(values, v) for v in op.operands])
    values[result] = np.empty([next(dyn) if s < 0 else s for s in sizes], dtype=dtype)


def _g_fill(op, values, fn=None):
    out = values[op.operands[1]]
    values[op.results[0]] = np.full(out.shape, values[op.operands[0]], dtype=out.dtype)


def _g_transpose(op, values, fn=None):
    perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
    values[op.results[0]] = np.ascontiguousarray(np.transpose(values[op.operands[0]], perm))


def _g_broadcast(op, values, fn=None):
    dims = set(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    out = values[op.operands[1]]
    src = values[op.operands[0]]
    shape = [1 if d in dims else n for d, n in enumerate(out.shape)]
    values[op.results[0]] = np.ascontiguousarray(np.broadcast_to(src.reshape(shape), out.shape))


def _g_reshape(op, values, fn=None):
    src = values[op.operands[0]]
    t = ir.RankedTensorType(op.results[0].type)
    groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(op.attributes["reassociation"])]
    if op.name == "tensor.collapse_shape":
        shape = [math.prod(src.shape[d] for d in grp) for grp in groups]
    else:
        dyn = iter(_index(values, v) for v in list(op.operands)[1:])
        static = list(ir.DenseI64ArrayAttr(op.attributes["static_output_shape"]))
        shape = [next(dyn) if s < 0 else s for s in static]
    if any(s >= 0 and s != n for s, n in zip(t.shape, shape)):
        raise VtmlirError(f"dvm: {describe_op(op)} gets shape {shape}, type says {t}")
    values[op.results[0]] = np.ascontiguousarray(src).reshape(shape)


def _g_cast(op, values, fn=None):
    a = values[op.operands[0]]
    t = ir.RankedTensorType(op.results[0].type)
    if any(s >= 0 and s != n for s, n in zip(t.shape, a.shape)):
        raise VtmlirError(f"dvm: {describe_op(op)}: runtime shape {list(a.shape)} does not match {t}")
    values[op.results[0]] = a


def _g_index_arith(op, values, fn=None):
    a = [_index(values, v) for v in op.operands]
    f = {"arith.addi": lambda: a[0] + a[1], "arith.subi": lambda: a[0] - a[1], "arith.muli": lambda: a[0] * a[1],
         "arith.divsi": lambda: int(a[0] / a[1]), "arith.floordivsi": lambda: a[0] // a[1],
         "arith.index_cast": lambda: a[0], "arith.maxsi": lambda: max(a), "arith.minsi": lambda: min(a)}
    values[op.results[0]] = f[op.name]()


def _g_batch_matmul(op, values, fn):
    a, b = values[op.operands[0]], values[op.operands[1]]
    init = values[op.operands[2]]
    key = (id(op), a.shape[1:], b.shape[1:])
    if fn.dry:  # `DvmFunction.prebuild`: build the template, keep no kernel
        compile_graph(_bmm_graph(op, fn), [a.shape[1:], b.shape[1:]], fn.target)
        if fn.record is not None:
            fn.record.append((op, key, [a.shape[1:], b.shape[1:]], None))
        values[op.results[0]] = np.zeros(init.shape, dtype=init.dtype)
        return
    k = fn.__dict__.setdefault("_bmm_kernels", {}).get(key)
    if k is None:
        k = bmm_admit(fn, key, bmm_compile(op, fn, [a.shape[1:], b.shape[1:]]))
    k, native, cores = k
    device = getattr(fn, "device", None)
    out = np.empty(init.shape, dtype=init.dtype)
    for i in range(a.shape[0]):
        slices = np.ascontiguousarray(a[i]), np.ascontiguousarray(b[i])
        (r,) = device.run(k, slices) if device is not None else k(*slices, native=native, cores=cores)
        out[i] = r + init[i]
    values[op.results[0]] = out


def _bmm_graph(op, fn) -> Graph:
    cache = fn.__dict__.setdefault("_bmm", {})
    g = cache.get(id(op))
    if g is None:
        g = Graph("batch_matmul")
        g.output(g.matmul(g.input(2, tensor_dtype(op.operands[0])), g.input(2, tensor_dtype(op.operands[1]))))
        cache[id(op)] = g
    return g


def bmm_compile(op, fn, shapes):
    """Compile a batch_matmul's per-slice kernel (timed: `glue_compile_seconds`)."""
    g = _bmm_graph(op, fn)
    start = time.perf_counter()
    k = compile_graph(g, shapes, fn.target)
    fn.glue_compile_seconds += time.perf_counter() - start
    return k


def bmm_admit(fn, key, k):
    """Decide whether the native VM runs the slice kernel `k` (timed: `glue_validate_seconds`;
    `CompiledKernel.native_reason`, no decode for a template's kernel) and on how many cores
    (`runner.launch_cores`), and cache it under `key`."""
    start = time.perf_counter()
    device = getattr(fn, "device", None)
    if device is not None:  # DVM's PTX VM (`gpu_runtime.PlanRunner`): it admits or refuses the kernel
        device.admit(k)
    use_native = device is None and fn.native and k.native_reason is None  # a template's kernel: no decode
    fn.glue_validate_seconds += time.perf_counter() - start
    entry = fn.__dict__.setdefault("_bmm_kernels", {})[key] = (
        k, use_native, launch_cores(k, fn.target) if use_native else None)
    return entry


def _g_extract_slice(op, values, fn=None):
    src = values[op.operands[0]]
    dyn = iter(_index(values, v) for v in list(op.operands)[1:])
    dynamic = ir.ShapedType.get_dynamic_size()

    def resolve(name):
        return [next(dyn) if x == dynamic else x for x in ir.DenseI64ArrayAttr(op.attributes[name])]

    offsets, sizes, strides = resolve("static_offsets"), resolve("static_sizes"), resolve("static_strides")
    sl = src[tuple(slice(o, o + s * st, st) for o, s, st in zip(offsets, sizes, strides))]
    t = ir.RankedTensorType(op.results[0].type)  # rank-reducing slices drop unit dims
    values[op.results[0]] = np.ascontiguousarray(sl).reshape(_drop_unit(sl.shape, t.rank))


def _drop_unit(shape, rank):
    shape = list(shape)
    while len(shape) > rank and 1 in shape:
        shape.remove(1)
    return shape


def _g_affine_apply(op, values, fn=None):
    amap = ir.AffineMapAttr(op.attributes["map"]).value
    args = [_index(values, v) for v in op.operands]
    values[op.results[0]] = eval_expr(amap.results[0], args[:amap.n_dims], args[amap.n_dims:])


def _g_index_cmp(op, values, fn=None):
    a, b = (_index(values, v) for v in op.operands)
    pred = ir.IntegerAttr(op.attributes["predicate"]).value
    values[op.results[0]] = {0: a == b, 1: a != b, 2: a < b, 3: a <= b, 4: a > b, 5: a >= b}.get(pred, False)


def _g_assert(op, values, fn=None):
    if not values[op.operands[0]]:
        msg = ir.StringAttr(op.attributes["msg"]).value
        raise VtmlirError(f"dvm: runtime assertion failed at {op.location}: {msg}")


GLUE = {"tensor.dim": _g_dim, "arith.cmpi": _g_index_cmp, "affine.apply": _g_affine_apply, "cf.assert": _g_assert, "tensor.empty": _g_empty, "linalg.fill": _g_fill, "linalg.transpose": _g_transpose,
         "linalg.broadcast": _g_broadcast, "tensor.expand_shape": _g_reshape, "tensor.collapse_shape": _g_reshape,
         "tensor.cast": _g_cast, "linalg.batch_matmul": _g_batch_matmul, "tensor.extract_slice": _g_extract_slice,
         "arith.constant": lambda op, values, fn=None: None}
for _name in ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.floordivsi", "arith.index_cast",
              "arith.maxsi", "arith.minsi"):
    GLUE[_name] = _g_index_arith
