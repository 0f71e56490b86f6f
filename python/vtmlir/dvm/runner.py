"""Run a `dvm-fuse`d linalg function: every fusion group is a DVM kernel compiled per new shape
(tiling + encoding only, `compile.compile_graph`) and executed by a DVM VM (Fang et al., DVM, Fig. 5:
"fused subgraphs ... sent to the operator compiler"); the glue between kernels (reshapes,
transposes of weights, fills, `tensor.dim`) is evaluated with numpy.

Each group becomes one `Graph` ONCE (built with ranks and element types, no sizes); a call with
new input shapes costs shape inference + tiling + encoding of each group (cached per shape).
Translation of a group (runner docs in docs/dvm.md):
- values live in the group's iteration domain (rank R, keep-dim): an external operand read with map
  `m` is presented as a numpy view (transposed / with unit axes inserted; strides go to
  `compile_graph(input_strides=...)`, so no copy);
- `linalg.generic` bodies map op by op to Table 1 instructions (arith add/sub/mul/div/max/min,
  cmpf/cmpi, select, casts, math sqrt/rsqrt/exp/log/abs/floor/roundeven/powf/tanh/erf -- tanh and
  rsqrt through Exp/Div, erf as the static path's polynomial); captured scalar constants become AddS/MulS or a broadcast 1-element input;
- reductions: the body must be `combine(expr, %out)` with add/max/min; the init is combined in
  unless it is a fill of the identity;
- `linalg.matmul` + epilogue: a cube-vector graph (the fill-0 accumulator start is dropped);
- `linalg.batch_matmul` (not fused): one rank-2 cube kernel per batch slice.
Anything else raises `VtmlirError` naming the op (at construction).
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import linalg

from ..codegen.approximate_math import ERF_LARGE_CENTER, ERF_LARGE_POLY, ERF_ONE, ERF_SMALL_POLY
from ..errors import VtmlirError
from ..frontend.torch_import import ShapeSymbols, shape_symbols
from ..ir_constants import elements_array
from ..ir_utils import nested_operands
from .compile import compile_graph
from .kernel import launch_cores
from .replay import ShapeReplay
from .replay import spans as replay_spans
from .expr import ParseError, evaluator, parse
from .fuse import CUBE, VECTOR, FunctionFusion, analyze_function
from .glue import GLUE, bmm_admit, bmm_compile, defining_op, describe_op, element_dtype, tensor_dtype
from .graph import Graph
from .isa import CmpType, DType, Opcode
from .template import coverage, templates_of
from .tiling import Target

_CMPF = {1: "EQ", 2: "GT", 3: "GE", 4: "LT", 5: "LE", 6: "NE", 8: "EQ", 9: "GT", 10: "GE", 11: "LT", 12: "LE", 13: "NE"}
_CMPI = {0: "EQ", 1: "NE", 2: "LT", 3: "LE", 4: "GT", 5: "GE", 6: "LT", 7: "LE", 8: "GT", 9: "GE"}
_BINARY = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div",
           "arith.maximumf": "maximum", "arith.maxnumf": "maximum", "arith.minimumf": "minimum",
           "arith.minnumf": "minimum", "math.powf": "pow", "arith.addi": "add", "arith.subi": "sub",
           "arith.muli": "mul", "arith.maxsi": "maximum", "arith.minsi": "minimum"}
_UNARY = {"math.sqrt": "sqrt", "math.exp": "exp", "math.log": "log", "math.absf": "abs", "math.floor": "floor",
          "math.roundeven": "round", "math.absi": "abs"}
_CASTS = ("arith.extf", "arith.truncf", "arith.sitofp", "arith.fptosi", "arith.uitofp", "arith.extsi", "arith.trunci")
_REDUCE = {"arith.addf": Opcode.SUM, "arith.addi": Opcode.SUM, "arith.maximumf": Opcode.REDUCE_MAX,
           "arith.maxnumf": Opcode.REDUCE_MAX, "arith.minimumf": Opcode.REDUCE_MIN, "arith.minnumf": Opcode.REDUCE_MIN,
           "arith.maxsi": Opcode.REDUCE_MAX, "arith.minsi": Opcode.REDUCE_MIN}
_IDENTITY = {Opcode.SUM: 0.0, Opcode.REDUCE_MAX: -math.inf, Opcode.REDUCE_MIN: math.inf}


# ----------------------------------------------------------------------------- constants
def _constant_value(op):
    attr = op.attributes["value"]
    t = op.results[0].type.maybe_downcast()
    if isinstance(t, ir.RankedTensorType):
        try:
            array = elements_array(attr)
        except VtmlirError as err:
            raise VtmlirError(f"dvm: {describe_op(op)}: {err}") from None
        if array is None:
            raise VtmlirError(f"dvm: {describe_op(op)} holds no elements attribute")
        return array.astype(element_dtype(t.element_type).numpy, copy=False)
    return _scalar(attr)


def _scalar(attr):
    a = attr.maybe_downcast() if hasattr(attr, "maybe_downcast") else attr
    if isinstance(a, ir.FloatAttr):
        return float(a.value)
    if isinstance(a, ir.BoolAttr):
        return bool(a.value)
    return int(ir.IntegerAttr(attr).value)


# --------------------------------------------------------------------------- group graphs
class _GroupKernel:
    """One fusion group as a DVM Graph plus how to feed and read it."""

    def __init__(self, fusion: FunctionFusion, gid: int, known_scalars: dict):
        g = fusion.groups[gid]
        self.id, self.kind = gid, g.kind
        self.ops = [fusion.ops[i] for i in g.ops]
        self.graph = Graph(f"{fusion.name}.kernel{gid}")
        self.inputs: list = []  # (mlir value or constant array, view function)
        self.outputs: list = []  # (mlir value, from-domain function)
        self.cache: dict = {}
        self.compile_seconds = 0.0
        self.validate_seconds = 0.0
        self._scalars = known_scalars
        # the ops as `ir.Operation`s (equal and hashed by the operation, not by the Python object:
        # a use's owner is a new wrapper, an OpView is another object than its operation)
        member_ops = {_operation(op) for op in self.ops}
        self.rank = len(g.domain)
        self.env: dict = {}  # (mlir value) -> Graph Value in domain layout
        self._ext: dict = {}
        for op in self.ops:
            if op.name == "linalg.matmul":
                self._matmul(op)
            else:
                self._generic(op)
        self.results = []
        for op in self.ops:
            for r in op.results:
                used_outside = any(_user(u) not in member_ops for u in r.uses)
                if used_outside:
                    self.results.append(r)
        self.results = [r for r in self.results if r in self.env]
        for r in self.results:
            self.graph.output(self.env[r])
        self._member_ids = member_ops

    # -- inputs ----------------------------------------------------------------------------
    def _external(self, v, amap):
        key = (v, str(amap) if amap is not None else None)
        if key in self._ext:
            return self._ext[key]
        dt = tensor_dtype(v)
        t = ir.RankedTensorType(v.type)
        if amap is None:
            positions, rank = list(range(t.rank)), t.rank
        else:
            positions = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in amap.results]
            rank = self.rank
        value = self.graph.input(rank, dt)
        self.inputs.append((v, _domain_view(positions, rank)))
        self._ext[key] = value
        return value

    def _constant_input(self, c, dt: DType):
        value = self.graph.input(self.rank, dt)
        self.inputs.append((np.full((1,) * self.rank, c, dtype=dt.numpy), None))
        return value

    # -- ops ---------------------------------------------------------------------------------
    def _matmul(self, op):
        a, b, c = op.operands
        ga, gb = self._external(a, None), self._external(b, None)
        mm = self.graph.matmul(ga, gb)
        init = defining_op(c)
        if not (init is not None and init.name == "linalg.fill" and self._fill_value(init) == 0.0):
            mm = self.graph.add(mm, self._external(c, None))
        self.env[op.results[0]] = mm

    def _fill_value(self, fill):
        v = fill.operands[0]
        return self._scalars.get(v)

    def _generic(self, op):
        maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
        n_in = len(op.operands) - len(op.results)
        block = op.regions[0].blocks[0]
        local: dict = {}
        for arg, v, m in zip(list(block.arguments)[:n_in], list(op.operands)[:n_in], maps[:n_in]):
            local[arg] = self.env[v] if v in self.env else self._external(v, m)
        outs = list(block.arguments)[n_in:]
        reduction = ir.AttrBuilder.get("linalg.IteratorTypeEnum")(linalg.IteratorType.reduction, op.context)
        iters = [a == reduction for a in ir.ArrayAttr(op.attributes["iterator_types"])]
        red_axes = [d for d, r in enumerate(iters) if r]
        body = list(block.operations)
        yield_op = body[-1].operation
        results = []
        for k, y in enumerate(yield_op.operands):
            out_arg = outs[k]
            if not list(op.results[k].uses):  # e.g. the argmax half of torch's max reduction
                results.append(None)
                continue
            if red_axes:
                comb = defining_op(y)
                if comb is None or comb.name not in _REDUCE or out_arg not in list(comb.operands):
                    raise VtmlirError(f"dvm: reduction {describe_op(op)} must yield add/max/min(expr, %out)")
                other = [x for x in comb.operands if x != out_arg][0]
                e = self._expr(other, local, op, out_arg)
                if not hasattr(e, "graph"):
                    e = self._constant_input(e, element_dtype(other.type))
                ropc = _REDUCE[comb.name]
                r = self.graph.reduce(ropc, e, red_axes)
                init_v = op.operands[n_in + k]
                init = defining_op(init_v)
                identity = init is not None and init.name == "linalg.fill" and self._fill_value(init) == _IDENTITY[ropc]
                if not identity:
                    iv = self.env[init_v] if init_v in self.env else self._external(init_v, maps[n_in + k])
                    r = (self.graph.add(r, iv) if ropc == Opcode.SUM else
                         self.graph.maximum(r, iv) if ropc == Opcode.REDUCE_MAX else self.graph.minimum(r, iv))
                results.append(r)
            else:
                e = self._expr(y, local, op, None)
                if not hasattr(e, "graph"):
                    e = self._constant_input(e, element_dtype(y.type))
                results.append(e)
        for r, gv in zip(op.results, results):
            if gv is not None:
                self.env[r] = gv

    def _expr(self, v, local, generic, out_arg):
        if v in local:
            return local[v]
        if out_arg is not None and v == out_arg:
            raise VtmlirError(f"dvm: {describe_op(generic)} reads its output inside the reduction expression")
        if v in self._scalars:
            return self._scalars[v]
        op = defining_op(v)
        if op is None:
            raise VtmlirError(f"dvm: {describe_op(generic)} reads a block argument the VM cannot provide")
        g = self.graph
        name = op.name
        if name == "arith.constant":
            val = _scalar(op.attributes["value"])
            local[v] = val
            return val
        args = [self._expr(x, local, generic, out_arg) for x in op.operands]
        dt = element_dtype(v.type)

        def tensor(x, ty):
            return x if hasattr(x, "graph") else self._constant_input(x, element_dtype(ty))

        if all(not hasattr(a, "graph") for a in args):  # fold scalar arithmetic
            res = _fold(name, args)
            if res is None:
                raise VtmlirError(f"dvm: cannot fold scalar '{name}' in {describe_op(generic)}")
            local[v] = res
            return res
        if name in _BINARY:
            a, b = args
            kind = _BINARY[name]
            if hasattr(a, "graph") and not hasattr(b, "graph") and kind in ("add", "sub", "mul", "div") and dt.is_float:
                res = getattr(g, kind)(a, b)
            elif not hasattr(a, "graph") and kind in ("add", "mul") and dt.is_float:
                res = getattr(g, kind)(b, a)
            else:
                res = getattr(g, kind)(tensor(a, op.operands[0].type), tensor(b, op.operands[1].type))
        elif name in _UNARY:
            res = getattr(g, _UNARY[name])(args[0])
        elif name == "math.rsqrt":
            res = g.div(self._constant_input(1.0, dt), g.sqrt(args[0]))
        elif name == "math.tanh":  # tanh x = 1 - 2 / (exp(2x) + 1): Exp, AddS, Div, MulS, AddS
            e2 = g.exp(g.mul(args[0], 2.0))
            res = g.add(g.mul(g.div(self._constant_input(1.0, dt), g.add(e2, 1.0)), -2.0), 1.0)
        elif name == "math.erf":
            if dt not in (DType.F32, DType.F16):
                raise VtmlirError(f"dvm: 'math.erf' on {dt.name} in {describe_op(generic)}: DVM's erf is the f32 "
                                  "polynomial (f32 and f16 only)")
            res = self._erf(args[0], dt)
        elif name == "math.fpowi" and not hasattr(args[1], "graph") and 1 <= int(args[1]) <= 8:
            res = args[0]
            for _ in range(int(args[1]) - 1):  # x^n by n-1 Mul instructions
                res = g.mul(res, args[0])
        elif name == "math.fpowi":
            res = g.pow(args[0], g.cast(tensor(args[1], op.operands[1].type), dt))
        elif name == "arith.negf":
            res = g.mul(args[0], -1.0)
        elif name in ("arith.cmpf", "arith.cmpi"):
            pred = ir.IntegerAttr(op.attributes["predicate"]).value
            table = _CMPF if name == "arith.cmpf" else _CMPI
            if pred not in table:
                raise VtmlirError(f"dvm: unsupported predicate {pred} of '{name}' in {describe_op(generic)}")
            res = g.cmp(tensor(args[0], op.operands[0].type), tensor(args[1], op.operands[1].type), table[pred])
        elif name == "arith.select":
            res = g.select(tensor(args[0], op.operands[0].type), tensor(args[1], op.operands[1].type),
                           tensor(args[2], op.operands[2].type))
        elif name in _CASTS:
            res = g.cast(args[0], dt)
        else:
            raise VtmlirError(f"dvm: no Table 1 instruction for '{name}' in {describe_op(generic)}")
        local[v] = res
        return res

    def _erf(self, x, dt: DType):
        """erf(x) in Table 1 instructions, the polynomials of `codegen-approximate-math` (the static
        path's erf, codegen/approximate_math.py): |x| · P(x²) below 1, a degree-12 polynomial in
        |x| − 2.46 up to 3.92, 1 beyond, the sign of x. Horner steps are MulS/Mul then AddS (the
        static code fuses them into FMAs), so results may differ from it by an ulp or two; within 4
        ulp of the correctly rounded f32 value (test_dvm_fuse.py). NaN stays NaN (every compare with
        it is false, so it takes the polynomial), ±inf give ±1."""
        g = self.graph

        def horner(coefficients, t):
            acc = g.add(g.mul(t, coefficients[-1]), coefficients[-2])
            for c in reversed(coefficients[:-2]):
                acc = g.add(g.mul(acc, t), c)
            return acc

        a = g.abs(x)
        small = g.mul(a, horner(ERF_SMALL_POLY, g.mul(a, a)))
        large = horner(ERF_LARGE_POLY, g.add(a, -ERF_LARGE_CENTER))
        large = g.select(g.cmp(a, self._constant_input(ERF_ONE, dt), "GT"), self._constant_input(1.0, dt), large)
        value = g.select(g.cmp(a, self._constant_input(1.0, dt), "LT"), small, large)
        return g.select(g.cmp(x, self._constant_input(0.0, dt), "LT"), g.mul(value, -1.0), value)

    # -- per call ---------------------------------------------------------------------------
    def run(self, values: dict, target: Target, native: bool, dry: bool = False, record: list | None = None,
            device=None):
        """Compile for the inputs' shapes (once per shape and strides) and run (on `device`, a
        `gpu_runtime.PlanRunner`, where given; else on the CPU VMs). `dry`: compile
        only (building any template the shapes need, caching no kernel) and give zeros of the
        results' shapes -- what `DvmFunction.prebuild` walks the shape space with; `record`
        then receives what this kernel compiled (`DvmFunction.shape_plans`). Not dry, `record`
        receives the launch: (kernel, inputs, outputs, whether its prepared one-core native call
        ran) -- what `replay.ShapeReplay` is made of."""
        if not self.results:  # every result is dead: nothing to compute
            return
        arrays = [values[src] if view is _SAME else src if view is None else view(values[src])
                  for src, view in self.feed]
        key = tuple([(a.shape, a.strides, a.dtype) for a in arrays])
        if dry:
            shapes, strides = _layout(arrays)
            k = compile_graph(self.graph, shapes, target, input_strides=strides)
            if record is not None:
                record.append((self, key, shapes, strides))
            for r, shape, dt in zip(self.results, k.output_shapes, k.output_dtypes):
                values[r] = self.from_domain(r)(np.zeros(shape, dt.numpy))
            return
        kernel = self.cache.get(key)
        if kernel is None:
            kernel = self.admit(key, self.compile(*_layout(arrays), target), native, target, device)
        k, use_native, cores = kernel
        if device is not None:
            for r, o, convert in zip(self.results, device.run(k, arrays), self.converters):
                values[r] = convert(o)
            return
        launch = k.native_call if use_native else None  # the prepared native call, once it exists
        outs = launch(arrays, cores) if launch else None
        prepared = outs is not None and cores == 1
        if outs is None:
            outs = k(*arrays, native=use_native, cores=cores)
        if record is not None:
            record.append((k, arrays, outs, prepared))
        for r, o, convert in zip(self.results, outs, self.converters):
            values[r] = convert(o)

    @property
    def feed(self) -> list:
        """`inputs` with the views of constant operands (weights) taken once: (array, None) for
        those, (value, view) for the others. `bind` sets it; until then, `inputs`."""
        return self.__dict__.get("_feed", self.inputs)

    def bind(self, constants: dict) -> None:
        """Take the domain views of the operands that are constants of the function once; an
        operand already in domain layout is read as it is (`_SAME`)."""
        self._feed = [(view(constants[src]), None) if view is not None and src in constants
                      else (src, _SAME) if getattr(view, "identity", False) else (src, view)
                      for src, view in self.inputs]

    @property
    def converters(self) -> list:
        """`from_domain` of every result, in `results` order."""
        c = self.__dict__.get("_converters")
        if c is None:
            c = self._converters = [self.from_domain(r) for r in self.results]
        return c

    def from_domain(self, value):
        """`_from_domain` for result `value`, its IR read once (every call converts every result)."""
        plans = self.__dict__.setdefault("_from_domain", {})
        f = plans.get(value)
        if f is None:
            f = plans[value] = _from_domain(value, self)
        return f

    def compile(self, shapes, strides, target: Target):
        """Compile for one input layout (timed: `compile_seconds`)."""
        start = time.perf_counter()
        kernel = compile_graph(self.graph, shapes, target, input_strides=strides)
        self.compile_seconds += time.perf_counter() - start
        return kernel

    def admit(self, key, kernel, native: bool, target: Target, device=None):
        """Decide whether the native VM runs `kernel` (timed: `validate_seconds`) and on how many
        cores, and cache it under `key`. A kernel a template made says so without decoding
        (`native_reason`: the template's guards hold `decode`'s checks); another one is decoded
        here. With a `device` (`gpu_runtime.PlanRunner`), the device admits it (or refuses it
        with a `VtmlirError`) and makes its launch plan."""
        start = time.perf_counter()
        if device is not None:
            device.admit(kernel)
            self.validate_seconds += time.perf_counter() - start
            entry = self.cache[key] = (kernel, False, None)
            return entry
        use_native = native and kernel.native_reason is None  # a template's kernel: no decode
        self.validate_seconds += time.perf_counter() - start
        entry = self.cache[key] = (kernel, use_native, launch_cores(kernel, target) if use_native else None)
        return entry


def _layout(arrays):
    """(shapes, element strides) to compile the arrays for; strides None when every array is
    C-contiguous (the compile derives dense strides natively)."""
    shapes = [a.shape for a in arrays]
    if all([a.flags.c_contiguous for a in arrays]):
        return shapes, None
    return shapes, [_strides(a) for a in arrays]


def _user(use):
    return _operation(use.owner)


def _operation(op):
    return op.operation if hasattr(op, "operation") else op


def _strides(a):
    return tuple(0 if n == 1 else s // a.itemsize for n, s in zip(a.shape, a.strides))


# a `_GroupKernel.feed` entry's view of an operand already in domain layout: read it as it is
_SAME = object()


def _domain_view(positions, rank):
    """numpy view of an operand in domain layout: tensor dims at their loop positions (in loop
    order), const-0 (unit) dims dropped, unit axes where the operand has no loop."""
    dims = [(p, j) for j, p in enumerate(positions) if p is not None]
    drop = [j for j, p in enumerate(positions) if p is None]
    order = [j for _, j in sorted(dims)]
    placed = sorted(p for p, _ in dims)

    identity = not drop and order == list(range(rank)) and placed == list(range(rank))

    def view(arr):
        if identity and arr.ndim == rank:  # the operand is in domain layout already
            return arr
        a = arr
        if drop:
            a = a[tuple(0 if j in drop else slice(None) for j in range(a.ndim))]
            remap = {j: k for k, j in enumerate(j2 for j2 in range(arr.ndim) if j2 not in drop)}
            a = a.transpose([remap[j] for j in order])
        else:
            a = a.transpose(order)
        shape = [1] * rank
        for p, n in zip(placed, a.shape):
            shape[p] = n
        strides = [0] * rank
        for p, s in zip(placed, a.strides):
            strides[p] = s
        return np.lib.stride_tricks.as_strided(a, shape=tuple(shape), strides=tuple(strides))

    view.identity = identity
    return view


def _from_domain(value, kernel):
    """How a kernel output (domain layout) becomes the tensor the IR expects for `value`: a
    function of the output array, the IR read here once."""
    t = ir.RankedTensorType(value.type)
    owner = defining_op(value)
    if owner.name == "linalg.generic":
        maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(owner.attributes["indexing_maps"])]
        idx = list(owner.results).index(value)
        amap = maps[len(owner.operands) - len(owner.results) + idx]
        positions = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in amap.results]
        dims = [p for p in positions if p is not None]
        keep = sorted(dims)
        perm = [keep.index(p) for p in dims]
        if perm == list(range(len(perm))):  # no transpose: one reshape (a view of the fresh output)
            at = [dims.index(p) if p is not None else None for p in positions]

            def in_order(out):
                if out.ndim == kernel.rank:
                    return out.reshape([out.shape[p] if p is not None else 1 for p in positions])
                return out.reshape([out.shape[i] if i is not None else 1 for i in at])

            return in_order

        def generic(out):
            a = out.reshape([out.shape[p] for p in keep]) if out.ndim == kernel.rank else out
            a = a.transpose(perm)
            shape = [a.shape[dims.index(p)] if p is not None else 1 for p in positions]
            return np.ascontiguousarray(a).reshape(shape)

        return generic
    rank = t.rank
    return lambda out: out.reshape(tuple(out.shape[-rank:]) if out.ndim >= rank else out.shape)


def _fold(name, args):
    a = args
    table = {"arith.addf": lambda: a[0] + a[1], "arith.subf": lambda: a[0] - a[1], "arith.mulf": lambda: a[0] * a[1],
             "arith.divf": lambda: a[0] / a[1], "arith.negf": lambda: -a[0], "arith.truncf": lambda: float(np.float32(a[0])),
             "arith.extf": lambda: float(a[0]), "arith.sitofp": lambda: float(a[0]), "math.sqrt": lambda: math.sqrt(a[0])}
    f = table.get(name)
    return f() if f else None


# ------------------------------------------------------------------------------- function
class DvmFunction:
    """A linalg-on-tensors function run as DVM kernels (`dvm-fuse` groups) + numpy glue.

    `DvmFunction(module)(*arrays)` returns the results as numpy arrays. `native=True` runs each
    kernel on the VM compiled once through MLIR where it supports the program (else the numpy VM);
    from the second call of an argument shape on, such a call is one native call of all its kernels
    where the recording allows it (`replay.ShapeReplay`, `replays`; `replay=False`: never).
    `compile_seconds` accumulates the per-new-shape compile time (tiling + encoding). With a
    `device` (a `gpu_runtime.PlanRunner`: DVM's PTX VM, or its launch plans run on the host) every
    kernel is admitted and run by it instead (no replay); `admit_shape` compiles and admits a
    call's kernels without running them."""

    def __init__(self, module, func_name: str = "main", target: Target | None = None, native: bool = False,
                 stacking: bool = True, replay: bool = True, device=None):
        mop = module.operation if hasattr(module, "operation") else module
        self.module = module  # the values below live in its context: keep it alive
        self.target = target or Target()
        self.native = native
        # a `gpu_runtime.PlanRunner` every kernel is handed to (DVM's PTX VM), or None: the CPU VMs
        self.device = device
        self.glue_compile_seconds = 0.0  # batch_matmul kernels
        self.glue_validate_seconds = 0.0
        self.dry = False  # a `prebuild` dry run is under way (the glue's kernels compile only)
        self.record: list | None = None  # what the dry run compiles, in order (`shape_plans`)
        # argument layout -> every kernel compile a call with it makes, recorded by `prebuild`
        self.shape_plans: dict = {}
        # argument shapes -> `replay.ShapeReplay` (False: that shape is not replayable), made at
        # the second native call of a shape; `replay=False` keeps every call on the plan's walk
        self.replay = replay
        self.replays: dict = {}
        self._seen: set = set()
        self.symbols = shape_symbols(module, func_name) if isinstance(module, ir.Module) else ShapeSymbols({}, (), ())
        fn = None
        for f in mop.regions[0].blocks[0].operations:
            if f.operation.name == "func.func" and ir.StringAttr(f.operation.attributes["sym_name"]).value == func_name:
                fn = f.operation
        if fn is None:
            raise VtmlirError(f"dvm: no function @{func_name}")
        with mop.context:
            self.fusion = analyze_function(fn, stacking=stacking)
            self.args = list(fn.regions[0].blocks[0].arguments)
            self.constants: dict = {}
            for op in self.fusion.ops:
                if op.name == "arith.constant":
                    self.constants[op.results[0]] = _constant_value(op)
            scalars = {v: c for v, c in self.constants.items() if not isinstance(c, np.ndarray)}
            self.kernels = [_GroupKernel(self.fusion, g.id, scalars) for g in self.fusion.groups]
            self.plan = self._schedule()
            self._fold_constants()
            self._drop_dead_glue()
            for k in self.kernels:
                k.bind(self.constants)

    def _schedule(self):
        """Units in a topological order: ('op', op) or ('kernel', _GroupKernel); a kernel runs where
        its last external input is ready (groups are convex, so this order exists)."""
        plan, done = [], set()
        for i, op in enumerate(self.fusion.ops):
            g = self.fusion.group_of.get(i)
            if g is None:
                if op.name not in GLUE and op.name != "func.return":
                    raise VtmlirError(f"dvm: {describe_op(op)} is neither fused into a kernel nor supported glue")
                plan.append(("op", op))
            elif g not in done:
                done.add(g)
                plan.append(("kernel", self.kernels[g]))
        # move each kernel after the last producer of its inputs, before the first consumer
        return _topo(plan, self)

    def _fold_constants(self):
        """Evaluate glue whose operands are all constants once (weight transposes, fills of
        constants are not: their shapes may be dynamic)."""
        known = dict(self.constants)
        keep = []
        for kind, unit in self.plan:
            if kind == "op" and unit.name in ("linalg.transpose", "tensor.expand_shape", "tensor.collapse_shape") \
                    and all(v in known for v in unit.operands[:1]) and not any(
                        ir.ShapedType(r.type).has_rank and not ir.ShapedType(r.type).has_static_shape for r in unit.results):
                GLUE[unit.name](unit, known)
                for r in unit.results:
                    self.constants[r] = known[r]
                continue
            keep.append((kind, unit))
        self.plan = keep

    def _drop_dead_glue(self):
        """Drop the glue whose results nothing reads: a kernel reads only its `inputs` (the
        `tensor.empty` of a fused op's `outs` is never read), glue reads its operands, the return
        its values. Every call would otherwise allocate and fill them. `cf.assert` stays."""
        read, keep = set(), []
        for kind, unit in reversed(self.plan):
            if kind == "kernel":
                read.update(src for src, _ in unit.inputs if isinstance(src, ir.Value))
            elif unit.name == "func.return" or unit.name == "cf.assert" or any(r in read for r in unit.results):
                read.update(unit.operands)
            else:
                continue
            keep.append((kind, unit))
        self.plan = keep[::-1]

    @property
    def compile_seconds(self) -> float:
        """Total per-new-shape compile time so far (tiling + encoding of every kernel)."""
        return self.glue_compile_seconds + sum(k.compile_seconds for k in self.kernels)

    @property
    def validate_seconds(self) -> float:
        """Total time spent deciding whether the native VM runs a new kernel, outside the compile
        (`CompiledKernel.native_reason`: read from its template, no decode since the templates'
        guards hold `decode`'s checks; a decode only for bytecode no template made)."""
        return self.glue_validate_seconds + sum(k.validate_seconds for k in self.kernels)

    def template_count(self) -> int:
        """Bytecode templates built so far over all kernels (`template.py`: one per structure)."""
        graphs = [k.graph for k in self.kernels] + list(self.__dict__.get("_bmm", {}).values())
        return sum(len(ts) for g in graphs for ts in templates_of(g).values())

    def prebuild(self, space: dict | None = None, shapes_of=None, *, limit: int = 4096, native: bool = True) -> dict:
        """Build, ahead of time, the bytecode templates of every kernel for every point of the
        shape space, so that a new shape in it costs guards + tiling + words only, never a trace
        (`template.prebuild` for whole functions). Each point is a dry run: the kernels compile and
        yield zeros, the numpy glue runs on them, no VM runs and no per-shape kernel is kept; what
        each kernel compiled for is kept in `shape_plans`, so that the first call with that
        argument layout compiles all its kernels back to back before running (`_compile_ahead`).

        `space` maps symbol names to the values they take and ``shapes_of(**point)`` gives the
        argument shapes. Without them, the ranges the import recorded are used
        (`import_torch(..., dynamic_shapes=...)`: every symbol from its min to its max, argument
        shapes from `vtmlir.symbolic_shape`). Refuses more than `limit` points. With `native`, each
        kernel's template set is then JIT-compiled (`TemplateSet.compile_native`). Returns
        ``{"points", "built", "templates", "native" (template sets now native), "seconds"}``."""
        start, before = time.perf_counter(), self.template_count()
        if space is None:
            space, shapes_of = self._recorded_space()
        names = list(space)
        values = [list(space[n]) for n in names]
        total = math.prod(len(v) for v in values)
        if total > limit:
            raise VtmlirError(f"dvm: @{self.fusion.name}: the shape space has {total} points, more than "
                              f"limit={limit}; narrow the ranges or raise the limit")
        dtypes = [tensor_dtype(v).numpy for v in self.args]
        with coverage() as hits:  # and then each kernel's most used templates first
            for point in itertools.product(*values):
                shapes = shapes_of(**dict(zip(names, point)))
                arrays = [np.zeros(s, d) for s, d in zip(shapes, dtypes)]
                self.record = []
                try:
                    self._execute(arrays, dry=True)
                    self.shape_plans[_arg_key(arrays)] = self.record
                finally:
                    self.record = None
        if native:
            for tset in hits:
                tset.compile_native()
        return {"points": total, "built": self.template_count() - before, "templates": self.template_count(),
                "native": sum(t.native is not None for t in hits), "seconds": time.perf_counter() - start}

    def admit_shape(self, *arrays) -> int:
        """Compile and admit every kernel a call with `arrays` makes, running none (a dry walk of
        the function, then `_compile_ahead`): what the example inputs of a CUDA compile do, so that
        a kernel the device refuses is refused at compile time. Returns the kernels compiled."""
        self.record = []
        try:
            self._execute([np.asarray(a) for a in arrays], dry=True)
            plan = self.record
        finally:
            self.record = None
        _compile_ahead(self, plan)
        return len(plan)

    def _recorded_space(self):
        """(space, shapes_of) from the import's symbol table (see `prebuild`)."""
        if not self.symbols.symbols or any(a is None for a in self.symbols.args):
            raise VtmlirError(f"dvm: @{self.fusion.name} has no recorded shape symbols for every argument "
                              "(import with dynamic_shapes=..., or pass space= and shapes_of=)")
        space = {name: range(lo, hi + 1) for name, (lo, hi, _) in self.symbols.symbols.items()}
        names = sorted(space)
        slots = {name: i for i, name in enumerate(names)}
        try:  # the importer's size expressions (`vtmlir.symbolic_shape`), e.g. "s27 * s77"
            exprs = [[parse(d) for d in arg] for arg in self.symbols.args]
            sizes = [[evaluator(e, slots) for e in arg] for arg in exprs]
        except (ParseError, KeyError) as err:
            raise VtmlirError(f"dvm: @{self.fusion.name}: cannot use a recorded shape symbol: {err}") from None

        def shapes_of(**point):
            env = [point[n] for n in names]
            return [tuple(int(f(env)) for f in arg) for arg in sizes]

        return space, shapes_of

    def __call__(self, *arrays):
        key = _shape_key(arrays)
        if key is not None:
            replay = self.replays.get(key)
            if replay:
                if replay.accepts(arrays):
                    return replay(arrays)
            elif replay is None and self.native and self.replay and self.device is None:
                if key in self._seen:  # the second call of the shape: record it
                    launches: list = []
                    results = self._execute(arrays, launches=launches)
                    held = self.__dict__.get("_held")
                    if held is None:
                        held = self._held = replay_spans(self._held_arrays())
                    self.replays[key] = ShapeReplay.of(arrays, launches, results, held) or False
                    return results
                self._seen.add(key)
        return self._execute(arrays)

    def _held_arrays(self) -> list:
        """The arrays that live as long as the function: its constants and the kernels' views of
        them taken once (`_GroupKernel.bind`)."""
        held = [c for c in self.constants.values() if isinstance(c, np.ndarray)]
        return held + [a for k in self.kernels for a, view in k.feed if view is None]

    def _execute(self, arrays, dry: bool = False, launches: list | None = None):
        if len(arrays) != len(self.args):
            raise VtmlirError(f"dvm: @{self.fusion.name} takes {len(self.args)} arguments, got {len(arrays)}")
        values = dict(self.constants)
        types = self.__dict__.get("_arg_types")
        if types is None:  # (type, rank, the static (position, size) pairs, numpy dtype) per argument, read once
            types = self._arg_types = [(t, t.rank, [(i, n) for i, n in enumerate(t.shape) if n >= 0],
                                        tensor_dtype(v).numpy) for v in self.args for t in [ir.RankedTensorType(v.type)]]
        for v, a, (t, rank, fixed, dtype) in zip(self.args, arrays, types):
            if type(a) is not np.ndarray:
                a = np.asarray(a)
            shape = a.shape
            if len(shape) != rank or a.dtype != dtype or [n for i, n in fixed if shape[i] != n]:
                raise VtmlirError(f"dvm: argument of type {t} cannot take an array {a.dtype}{list(a.shape)}")
            values[v] = a
        self.dry = dry
        if not dry and self.shape_plans:
            plan = self.shape_plans.pop(_arg_key(arrays), None)
            if plan is not None:
                _compile_ahead(self, plan)
        steps = self.__dict__.get("_steps")
        if steps is None:  # the plan with what each unit runs read from the IR once
            steps = self._steps = [(unit, None, None) if kind == "kernel" else
                                   (None, None, list(unit.operands)) if unit.name == "func.return" else
                                   (unit, GLUE[unit.name], None) for kind, unit in self.plan]
        for unit, glue, returned in steps:
            if returned is not None:
                return [np.asarray(values[v]) for v in returned]
            if glue is None:
                unit.run(values, self.target, self.native, dry, self.record if dry else launches, self.device)
            else:
                glue(unit, values, self)
        raise VtmlirError("dvm: function without return")  # pragma: no cover


def _shape_key(arrays):
    """The argument shapes where every argument is a C-contiguous ndarray (what a `ShapeReplay`
    takes), else None."""
    for a in arrays:
        if type(a) is not np.ndarray or not a.flags.c_contiguous:
            return None
    return tuple([a.shape for a in arrays])


def _arg_key(arrays):
    return tuple([(a.shape, a.strides, a.dtype.str) for a in arrays])


def _compile_ahead(fn: DvmFunction, plan) -> None:
    """Compile every kernel a call with a new argument layout needs, back to back, before the
    first one runs, and then admit them (DVM Fig. 5: the operator compiler sees all fused
    subgraphs of the shape): the kernels' compiles then share warm caches instead of each following a VM run. The layouts come
    from the `prebuild` dry run of the same argument layout (the glue's numpy results have the
    same shapes and strides whatever the values); each is still looked up by the actual layout
    when its kernel runs."""
    done = fn.__dict__.setdefault("_bmm_kernels", {})
    todo = [(unit, key, shapes, strides) for unit, key, shapes, strides in plan
            if key not in (unit.cache if isinstance(unit, _GroupKernel) else done)]
    compiled = [unit.compile(shapes, strides, fn.target) if isinstance(unit, _GroupKernel)
                else bmm_compile(unit, fn, shapes) for unit, key, shapes, strides in todo]
    for (unit, key, _, _), kernel in zip(todo, compiled):  # then admit them (native or not)
        if isinstance(unit, _GroupKernel):
            unit.admit(key, kernel, fn.native, fn.target, fn.device)
        else:
            bmm_admit(fn, key, kernel)


def _topo(plan, fn: DvmFunction):
    produced_by = {}
    for k, (kind, unit) in enumerate(plan):
        ops = unit.ops if kind == "kernel" else [unit]
        for op in ops:
            for r in op.results:
                produced_by[r] = k
    deps = []
    for kind, unit in plan:
        ops = unit.ops if kind == "kernel" else [unit]
        inner = {r for op in ops for r in op.results}
        d = set()
        for op in ops:
            for v in nested_operands(op):
                if v not in inner and v in produced_by:
                    d.add(produced_by[v])
        deps.append(d)
    order, placed = [], set()
    pending = list(range(len(plan)))
    while pending:
        for k in pending:
            if deps[k] <= placed:
                order.append(k)
                placed.add(k)
                pending.remove(k)
                break
        else:  # pragma: no cover - convex groups cannot form a cycle
            raise VtmlirError("dvm: fusion groups form a cycle")
    return [plan[k] for k in order]




# ---------------------------------------------------------------------------- numpy glue
__all__ = ["DvmFunction", "CUBE", "VECTOR", "CmpType"]
