"""Random PyTorch programs for the differential tester, as data.

A program is a JSON-able dict: `inputs` (shape, dtype per input), `stmts` (op name, argument value
numbers, parameters), `outputs` (value numbers), and for programs with weights a `param_seed`. Value
`k` is input `k` for k < len(inputs), else the result of statement `k - len(inputs)`.
`ProgramModule(program)` runs it as an `nn.Module` (an interpreter over the statements, so
torch.export traces straight-line code), and `format_program` prints it as Python. Programs are
generated statement by statement with eager PyTorch as the oracle for shapes: a proposal PyTorch
rejects is dropped, so every generated program is one PyTorch runs.

Families:
- `dm`: data movement (view, reshape, permute, transpose, slices with steps and negative bounds,
  narrow, select, cat, stack, split, chunk, expand, squeeze/unsqueeze, flatten, repeat, flip, roll
  with any shift, index_select, gather, pad with negative and positive widths, unfold, in-place slice
  updates of a clone) mixed with elementwise ops, reductions, matmul and casts; f32, f16, i64;
- `layout`: NCHW convolution blocks (conv, batch norm, ReLU, pooling, residual adds, channel concat,
  NHWC permutes, interpolation and index_select: kernels that read a convolution's output by index
  in their body), what the layout passes rewrite;
- `lowbit`: linear layers for `vtmlir.quantize`;
- `dynamic`: elementwise/reduction/linear programs over a dynamic batch dimension, for DVM.
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn

DTYPES = {"f32": torch.float32, "f16": torch.float16, "i64": torch.int64}
MAX_ELEMENTS = 2048
# Ops that only move or select data: a program made of these alone must match eager bit for bit.
DATA_MOVEMENT = {"view", "reshape", "permute", "transpose", "slice", "narrow", "select", "cat", "stack",
                 "split", "chunk", "expand", "squeeze", "unsqueeze", "flatten", "repeat", "flip", "roll",
                 "index_select", "gather", "pad", "unfold", "setitem", "clone", "contiguous"}


# -- the interpreter ---------------------------------------------------------------------------------


def _index(spec):
    """A JSON index spec (per dim: an int, or [start, stop, step] with nulls) as a Python index."""
    return tuple(i if isinstance(i, int) else slice(*i) for i in spec)


def _apply(op: str, p: dict, args: list, params: dict):
    a = args[0] if args else None
    if op == "view":
        return a.view(p["shape"])
    if op == "reshape":
        return a.reshape(p["shape"])
    if op == "permute":
        return a.permute(p["dims"])
    if op == "transpose":
        return a.transpose(p["dim0"], p["dim1"])
    if op == "slice":
        return a[_index(p["index"])]
    if op == "narrow":
        return a.narrow(p["dim"], p["start"], p["length"])
    if op == "select":
        return a.select(p["dim"], p["index"])
    if op == "cat":
        return torch.cat(args, p["dim"])
    if op == "stack":
        return torch.stack(args, p["dim"])
    if op == "split":
        return torch.split(a, p["size"], p["dim"])[p["piece"]]
    if op == "chunk":
        return torch.chunk(a, p["chunks"], p["dim"])[p["piece"]]
    if op == "expand":
        return a.expand(p["shape"])
    if op == "squeeze":
        return a.squeeze(p["dim"])
    if op == "unsqueeze":
        return a.unsqueeze(p["dim"])
    if op == "flatten":
        return a.flatten(p["start"], p["end"])
    if op == "repeat":
        return a.repeat(p["repeats"])
    if op == "flip":
        return a.flip(p["dims"])
    if op == "roll":
        return torch.roll(a, p["shifts"], p["dims"])
    if op == "index_select":
        return a.index_select(p["dim"], torch.tensor(p["index"], dtype=torch.int64))
    if op == "gather":
        return torch.gather(a, p["dim"], torch.tensor(p["index"], dtype=torch.int64))
    if op == "pad":
        return F.pad(a, p["pad"], value=p.get("value", 0.0))
    if op == "unfold":
        return a.unfold(p["dim"], p["size"], p["step"])
    if op == "setitem":
        t = a.clone()
        t[_index(p["index"])] = args[1] if len(args) > 1 else p["value"]
        return t
    if op == "clone":
        return a.clone()
    if op == "contiguous":
        return a.contiguous()
    if op in ("add", "sub", "mul", "maximum", "minimum"):
        b = args[1] if len(args) > 1 else p["scalar"]
        if op in ("maximum", "minimum") and not isinstance(b, torch.Tensor):
            b = torch.full_like(a, b)
        return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
                "minimum": torch.minimum}[op](a, b)
    if op in ("neg", "abs", "relu", "exp", "tanh", "sigmoid"):
        return getattr(torch, op)(a)
    if op == "floor_divide":
        return torch.div(a, p["divisor"], rounding_mode="floor")
    if op == "remainder":
        return torch.remainder(a, p["divisor"])
    if op == "softmax":
        return torch.softmax(a, p["dim"])
    if op == "where":
        return torch.where(a > 0, a, args[1])
    if op in ("sum", "mean", "amax", "amin", "argmax"):
        fn = getattr(torch, op)
        if op == "argmax":
            return fn(a, p["dim"], keepdim=p["keepdim"])
        return fn(a, p["dims"], keepdim=p["keepdim"])
    if op == "matmul":
        return torch.matmul(a, args[1])
    if op == "cast":
        return a.to(DTYPES[p["dtype"]])
    # layout / lowbit / dynamic families (weights come from `params`)
    if op == "conv":
        return F.conv2d(a, params[p["weight"]], params.get(p.get("bias")), stride=p["stride"], padding=p["padding"])
    if op == "batchnorm":
        return F.batch_norm(a, params[p["mean"]], params[p["var"]], params[p["weight"]], params[p["bias"]],
                            training=False, eps=1e-5)
    if op == "maxpool":
        return F.max_pool2d(a, p["kernel"], p["stride"], p.get("padding", 0))
    if op == "avgpool":
        return F.avg_pool2d(a, p["kernel"], p["stride"])
    if op == "interpolate":
        return F.interpolate(a, size=p["size"], mode=p["mode"], align_corners=False if p["mode"] == "bilinear" else None)
    if op == "linear":
        return params["linear" + str(p["layer"])](a)
    raise ValueError(f"unknown op {op}")


class ProgramModule(nn.Module):
    """Runs a program; its weights (conv, batch norm, linear) are made from `param_seed`."""

    def __init__(self, program: dict):
        super().__init__()
        self.program = program
        gen = torch.Generator().manual_seed(program.get("param_seed", 0))
        self.weights = nn.ParameterDict()
        self.layers = nn.ModuleDict()
        for name, spec in program.get("params", {}).items():
            if spec["kind"] == "linear":
                layer = nn.Linear(spec["in"], spec["out"], bias=spec.get("bias", True))
                with torch.no_grad():
                    layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) / spec["in"] ** 0.5)
                    if layer.bias is not None:
                        layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen) * 0.1)
                self.layers[name] = layer
                continue
            shape = spec["shape"]
            if spec["kind"] == "positive":
                value = torch.rand(shape, generator=gen) + 0.5
            else:
                value = torch.randn(shape, generator=gen) * spec.get("scale", 1.0)
            self.weights[name] = nn.Parameter(value, requires_grad=False)

    def forward(self, *inputs):
        values = list(inputs)
        params = {**dict(self.weights), **dict(self.layers)}
        for stmt in self.program["stmts"]:
            values.append(_apply(stmt["op"], stmt.get("p", {}), [values[i] for i in stmt["args"]], params))
        outs = [values[i] for i in self.program["outputs"]]
        return outs[0] if len(outs) == 1 else tuple(outs)


def make_inputs(program: dict, seed: int = 0, batch: int | None = None) -> list[torch.Tensor]:
    """Deterministic inputs (dim 0 replaced by `batch` when given, for dynamic programs)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for spec in program["inputs"]:
        shape = list(spec["shape"])
        if batch is not None and shape:
            shape[0] = batch
        dtype = DTYPES[spec["dtype"]]
        if dtype == torch.int64:
            out.append(torch.randint(-9, 10, shape, generator=gen))
        else:
            out.append(torch.randn(shape, generator=gen).to(dtype))
    return out


def is_data_movement_only(program: dict) -> bool:
    return all(s["op"] in DATA_MOVEMENT for s in program["stmts"])


def format_program(program: dict) -> str:
    """The program as Python source (for reports and reproducers)."""
    n_in = len(program["inputs"])
    lines = ["def forward(" + ", ".join(f"x{i}" for i in range(n_in)) + "):  # "
             + ", ".join(f"x{i}: {s['dtype']}{s['shape']}" for i, s in enumerate(program["inputs"]))]
    name = lambda k: f"x{k}" if k < n_in else f"t{k}"  # noqa: E731
    for j, stmt in enumerate(program["stmts"]):
        args = ", ".join(name(i) for i in stmt["args"])
        params = ", ".join(f"{k}={v!r}" for k, v in stmt.get("p", {}).items())
        lines.append(f"    t{n_in + j} = {stmt['op']}({args}{', ' if args and params else ''}{params})")
    lines.append("    return " + ", ".join(name(i) for i in program["outputs"]))
    return "\n".join(lines)


# -- the generator -------------------------------------------------------------------------------


class _Builder:
    def __init__(self, rng: random.Random, family: str):
        self.rng = rng
        self.family = family
        self.program = {"family": family, "inputs": [], "stmts": [], "outputs": [], "params": {},
                        "param_seed": rng.randrange(1 << 30)}
        self.values: list[torch.Tensor] = []
        self.module_params: dict = {}

    def add_input(self, shape, dtype: str):
        self.program["inputs"].append({"shape": list(shape), "dtype": dtype})
        gen = torch.Generator().manual_seed(len(self.values) + 17)
        t = torch.randint(-9, 10, shape, generator=gen) if dtype == "i64" else \
            torch.randn(shape, generator=gen).to(DTYPES[dtype])
        self.values.append(t)

    def try_stmt(self, op: str, args: list[int], p: dict) -> bool:
        """Add the statement if eager PyTorch runs it and the result is a small non-empty tensor."""
        try:
            with torch.no_grad():
                out = _apply(op, p, [self.values[i] for i in args], self._params())
        except Exception:  # noqa: BLE001 - PyTorch rejects the proposal: not a valid program
            return False
        if not isinstance(out, torch.Tensor) or out.numel() == 0 or out.numel() > MAX_ELEMENTS or out.dim() > 6:
            return False
        if out.is_floating_point() and not torch.isfinite(out.float()).all():
            return False
        self.program["stmts"].append({"op": op, "args": list(args), "p": p})
        self.values.append(out)
        return True

    def pick(self) -> int:
        """A value to operate on: mostly one of the latest (programs become chains, not fans)."""
        n = len(self.values)
        if self.rng.random() < 0.7:
            return self.rng.randrange(max(0, n - 3), n)
        return self.rng.randrange(n)

    def _params(self):
        if not self.program["params"]:
            return {}
        if len(self.module_params) != len(self.program["params"]):
            m = ProgramModule(self.program)
            self.module_params = {**dict(m.weights), **dict(m.layers)}
        return self.module_params


def _rand_shape(rng, rank=None, max_elems=256):
    rank = rank if rank is not None else rng.choice([1, 2, 2, 3, 3, 4])
    while True:
        shape = [rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 12, 16]) for _ in range(rank)]
        n = 1
        for s in shape:
            n *= s
        if n <= max_elems:
            return shape


def _factorize(rng, n: int) -> list[int]:
    dims = []
    while n > 1 and len(dims) < 4:
        divisors = [d for d in range(2, n + 1) if n % d == 0]
        d = rng.choice(divisors)
        dims.append(d)
        n //= d
    if n > 1:
        dims.append(n)
    if rng.random() < 0.3:
        dims.insert(rng.randrange(len(dims) + 1), 1)
    rng.shuffle(dims)
    return dims or [1]


def _slice_spec(rng, size: int):
    start = rng.choice([None, 0, 1, -1, -2, rng.randrange(-size, size) if size else 0])
    stop = rng.choice([None, size, -1, rng.randrange(-size, size + 2) if size else 0])
    step = rng.choice([None, 1, 2, 3])
    return [start, stop, step]


def _index_spec(rng, shape):
    spec = []
    for size in shape[: rng.randint(1, len(shape))]:
        if rng.random() < 0.3 and size:
            spec.append(rng.randrange(-size, size))
        else:
            spec.append(_slice_spec(rng, size))
    return spec


def _propose_dm(b: _Builder) -> bool:
    rng = b.rng
    k = b.pick()
    t = b.values[k]
    shape, rank = list(t.shape), t.dim()
    op = rng.choice(["view", "reshape", "permute", "transpose", "slice", "slice", "narrow", "select", "cat",
                     "stack", "split", "chunk", "expand", "squeeze", "unsqueeze", "flatten", "repeat", "flip",
                     "roll", "roll", "index_select", "gather", "pad", "pad", "unfold", "setitem", "setitem",
                     "clone"])
    dim = rng.randrange(-rank, rank) if rank else 0
    size = shape[dim] if rank else 1
    if op in ("view", "reshape"):
        new = _factorize(rng, t.numel())
        if rng.random() < 0.3:
            new[rng.randrange(len(new))] = -1
        return b.try_stmt(op, [k], {"shape": new})
    if op == "permute":
        perm = list(range(rank))
        rng.shuffle(perm)
        return b.try_stmt(op, [k], {"dims": perm})
    if op == "transpose":
        return b.try_stmt(op, [k], {"dim0": dim, "dim1": rng.randrange(-rank, rank) if rank else 0})
    if op == "slice":
        return b.try_stmt(op, [k], {"index": _index_spec(rng, shape)}) if rank else False
    if op == "narrow":
        start = rng.randrange(-size, size) if size else 0
        length = rng.randint(1, max(1, size - (start % size if size else 0)))
        return b.try_stmt(op, [k], {"dim": dim, "start": start, "length": length})
    if op == "select":
        return b.try_stmt(op, [k], {"dim": dim, "index": rng.randrange(-size, size)}) if size else False
    if op in ("cat", "stack"):
        same = [i for i, v in enumerate(b.values) if v.dtype == t.dtype and v.dim() == rank
                and (list(v.shape) == shape or (op == "cat" and all(a == c for j, (a, c) in enumerate(zip(v.shape, shape))
                                                                    if j != dim % max(rank, 1))))]
        others = rng.sample(same, min(len(same), rng.randint(1, 3)))
        cat_dim = dim if op == "cat" else rng.randrange(-rank - 1, rank + 1)
        return b.try_stmt(op, [k, *others], {"dim": cat_dim})
    if op in ("split", "chunk"):
        n = rng.randint(1, max(1, size))
        pieces = -(-size // n) if op == "split" else min(n, size)
        piece = rng.randrange(-pieces, pieces) if pieces else 0
        key = "size" if op == "split" else "chunks"
        return b.try_stmt(op, [k], {key: n, "dim": dim, "piece": piece})
    if op == "expand":
        new = [rng.choice([s, 2, 3]) if s == 1 else rng.choice([s, -1]) for s in shape]
        if rng.random() < 0.3:
            new.insert(0, rng.randint(1, 3))
        return b.try_stmt(op, [k], {"shape": new})
    if op == "squeeze":
        return b.try_stmt(op, [k], {"dim": dim})
    if op == "unsqueeze":
        return b.try_stmt(op, [k], {"dim": rng.randrange(-rank - 1, rank + 1)})
    if op == "flatten":
        start = rng.randrange(-rank, rank) if rank else 0
        return b.try_stmt(op, [k], {"start": start, "end": rng.randrange(-rank, rank) if rank else 0})
    if op == "repeat":
        reps = [rng.choice([1, 1, 2, 3]) for _ in range(rank + rng.choice([0, 0, 1]))]
        return b.try_stmt(op, [k], {"repeats": reps})
    if op == "flip":
        dims = rng.sample(range(rank), rng.randint(1, rank)) if rank else []
        return b.try_stmt(op, [k], {"dims": dims})
    if op == "roll":
        n = rng.randint(1, max(1, rank))
        dims = rng.sample(range(-rank, rank), min(n, 2 * rank)) if rank else [0]
        dims = list(dict.fromkeys(d % rank for d in dims)) if rank else dims
        shifts = [rng.randint(-3 * shape[d] - 2, 3 * shape[d] + 2) if rank else rng.randint(-3, 3) for d in dims]
        if rng.random() < 0.3 and len(dims) == 1:
            return b.try_stmt(op, [k], {"shifts": shifts[0], "dims": dims[0]})
        return b.try_stmt(op, [k], {"shifts": shifts, "dims": dims})
    if op == "index_select":
        idx = [rng.randrange(size) for _ in range(rng.randint(1, 6))] if size else []
        return b.try_stmt(op, [k], {"dim": dim, "index": idx})
    if op == "gather":
        if not rank:
            return False
        ishape = [rng.randint(1, s) for s in shape]
        d = dim % rank
        ishape[d] = rng.randint(1, 4)
        n = 1
        for s in ishape:
            n *= s
        flat = [rng.randrange(shape[d]) for _ in range(n)]
        idx = torch.tensor(flat).reshape(ishape).tolist()
        return b.try_stmt(op, [k], {"dim": dim, "index": idx})
    if op == "pad":
        n = rng.randint(1, min(rank, 3)) if rank else 0
        pad = []
        for j in range(n):
            s = shape[rank - 1 - j]
            pad += [rng.randint(-s + 1, 3), rng.randint(-s + 1, 3)]
        p = {"pad": pad}
        if rng.random() < 0.3 and t.is_floating_point():
            p["value"] = rng.choice([1.5, -2.0])
        return b.try_stmt(op, [k], p)
    if op == "unfold":
        step = rng.randint(1, 3)
        return b.try_stmt(op, [k], {"dim": dim, "size": rng.randint(1, max(1, size)), "step": step})
    if op == "setitem":
        index = _index_spec(rng, shape) if rank else []
        try:
            target = list(t[_index(index)].shape)
        except Exception:  # noqa: BLE001
            return False
        fits = [i for i, v in enumerate(b.values) if v.dtype == t.dtype and list(v.shape) == target]
        if fits and rng.random() < 0.7:
            return b.try_stmt(op, [k, rng.choice(fits)], {"index": index})
        if rng.random() < 0.5:  # a value PyTorch broadcasts into the slice (or rejects)
            return b.try_stmt(op, [k, b.pick()], {"index": index})
        value = rng.choice([0, 1, -3]) if t.dtype == torch.int64 else rng.choice([0.0, 1.5, -2.25])
        return b.try_stmt(op, [k], {"index": index, "value": value})
    return b.try_stmt(op, [k], {})


def _propose_compute(b: _Builder) -> bool:
    rng = b.rng
    k = b.pick()
    t = b.values[k]
    rank = t.dim()
    is_float = t.is_floating_point()
    op = rng.choice(["add", "sub", "mul", "maximum", "minimum", "neg", "abs", "relu", "exp", "tanh", "where",
                     "sum", "mean", "amax", "amin", "argmax", "matmul", "cast", "cast", "floor_divide", "remainder",
                     "softmax"])
    if op in ("floor_divide", "remainder"):
        return b.try_stmt(op, [k], {"divisor": rng.choice([2, -3, 4, -1]) if not is_float else rng.choice([0.5, -1.5, 3.0])})
    if op == "softmax":
        return b.try_stmt(op, [k], {"dim": rng.randrange(-rank, rank) if rank else 0}) if is_float else False
    if op in ("add", "sub", "mul", "maximum", "minimum", "where"):
        # Same shape, or any value PyTorch broadcasts against it; now and then another dtype (promotion).
        same = [i for i, v in enumerate(b.values) if v.dtype == t.dtype and v.shape == t.shape]
        other = rng.choice(same) if rng.random() < 0.6 else b.pick()
        if op != "where" and rng.random() < 0.3:
            scalar = rng.choice([2, -1, 3]) if not is_float else rng.choice([0.5, -1.25, 2.0])
            return b.try_stmt(op, [k], {"scalar": scalar})
        return b.try_stmt(op, [k, other], {})
    if op in ("neg", "abs", "relu", "exp", "tanh"):
        if op in ("exp", "tanh") and not is_float:
            return False
        return b.try_stmt(op, [k], {})
    if op in ("sum", "mean", "amax", "amin"):
        dims = rng.sample(range(rank), rng.randint(1, rank)) if rank else []
        return b.try_stmt(op, [k], {"dims": dims, "keepdim": rng.random() < 0.5})
    if op == "argmax":
        return b.try_stmt(op, [k], {"dim": rng.randrange(rank) if rank else 0, "keepdim": rng.random() < 0.5})
    if op == "matmul":
        if rank < 2:
            return False
        if not b.try_stmt("transpose", [k], {"dim0": -1, "dim1": -2}):
            return False
        return b.try_stmt("matmul", [k, len(b.values) - 1], {})
    if op == "cast":
        return b.try_stmt(op, [k], {"dtype": rng.choice([d for d in DTYPES if DTYPES[d] != t.dtype])})
    return False


def _generate_dm(b: _Builder) -> None:
    rng = b.rng
    dtype = rng.choice(["f32", "f32", "f32", "f16", "i64"])
    for _ in range(rng.choice([1, 1, 2, 3])):
        b.add_input(_rand_shape(rng), dtype)
    target = rng.randint(1, 8)
    compute_share = rng.choice([0.0, 0.0, 0.2, 0.4])
    tries = 0
    while len(b.program["stmts"]) < target and tries < 200:
        tries += 1
        (_propose_compute if rng.random() < compute_share else _propose_dm)(b)


def _generate_layout(b: _Builder) -> None:
    rng = b.rng
    c = rng.choice([2, 3, 4, 8])
    h = rng.choice([4, 5, 6, 8])
    b.add_input([1, c, h, h], "f32")
    target = rng.randint(2, 7)
    tries = 0
    while len(b.program["stmts"]) < target and tries < 100:
        tries += 1
        k = rng.randrange(len(b.values))
        t = b.values[k]
        if t.dim() != 4:
            continue
        ch = t.shape[1]
        op = rng.choice(["conv", "conv", "batchnorm", "relu", "maxpool", "avgpool", "add", "cat", "nhwc",
                         "interpolate", "index_select"])
        params = b.program["params"]
        n = len(params)
        if op == "conv":
            out_c = rng.choice([2, 4, 8])
            kernel = rng.choice([1, 3])
            params[f"w{n}"] = {"kind": "normal", "shape": [out_c, ch, kernel, kernel], "scale": 0.3}
            p = {"weight": f"w{n}", "stride": rng.choice([1, 1, 2]), "padding": rng.choice([0, kernel // 2])}
            if rng.random() < 0.5:
                params[f"b{n}"] = {"kind": "normal", "shape": [out_c], "scale": 0.1}
                p["bias"] = f"b{n}"
            b.module_params = {}
            if not b.try_stmt("conv", [k], p):
                del params[f"w{n}"]
                params.pop(f"b{n}", None)
        elif op == "batchnorm":
            names = {key: f"{key}{n}" for key in ("mean", "var", "weight", "bias")}
            params[names["mean"]] = {"kind": "normal", "shape": [ch], "scale": 0.1}
            params[names["var"]] = {"kind": "positive", "shape": [ch]}
            params[names["weight"]] = {"kind": "positive", "shape": [ch]}
            params[names["bias"]] = {"kind": "normal", "shape": [ch], "scale": 0.1}
            b.module_params = {}
            b.try_stmt("batchnorm", [k], names)
        elif op == "relu":
            b.try_stmt("relu", [k], {})
        elif op == "maxpool":
            b.try_stmt("maxpool", [k], {"kernel": 2, "stride": rng.choice([1, 2]), "padding": rng.choice([0, 1])})
        elif op == "avgpool":
            b.try_stmt("avgpool", [k], {"kernel": 2, "stride": 2})
        elif op == "add":
            same = [i for i, v in enumerate(b.values) if v.shape == t.shape]
            b.try_stmt("add", [k, rng.choice(same)], {})
        elif op == "cat":
            same = [i for i, v in enumerate(b.values) if v.dim() == 4 and v.shape[2:] == t.shape[2:]]
            b.try_stmt("cat", [k, rng.choice(same)], {"dim": 1})
        elif op == "interpolate":  # a gather: reads its input by index inside its kernel's body
            size = [rng.choice([max(1, d // 2), d + 1, 2 * d]) for d in t.shape[2:]]
            b.try_stmt("interpolate", [k], {"size": size, "mode": rng.choice(["nearest", "bilinear"])})
        elif op == "index_select":  # rows or columns picked by a constant index tensor
            dim = rng.choice([2, 3])
            index = [rng.randrange(t.shape[dim]) for _ in range(rng.randint(1, t.shape[dim] + 1))]
            b.try_stmt("index_select", [k], {"dim": dim, "index": index})
        elif op == "nhwc":  # to NHWC and back, with an elementwise op in between
            if b.try_stmt("permute", [k], {"dims": [0, 2, 3, 1]}):
                b.try_stmt("relu", [len(b.values) - 1], {})
                b.try_stmt("permute", [len(b.values) - 1], {"dims": [0, 3, 1, 2]})


def _generate_lowbit(b: _Builder) -> None:
    rng = b.rng
    k_in = rng.choice([16, 32, 64])
    b.add_input([rng.choice([1, 2, 3]), k_in], "f32")
    width = k_in
    for layer in range(rng.randint(1, 3)):
        out = rng.choice([8, 16, 24, 32])
        b.program["params"][f"linear{layer}"] = {"kind": "linear", "in": width, "out": out,
                                                   "bias": rng.random() < 0.7}
        b.module_params = {}
        b.try_stmt("linear", [len(b.values) - 1], {"layer": layer})
        width = out
        if rng.random() < 0.5:
            b.try_stmt("relu", [len(b.values) - 1], {})
    widths = [spec["in"] for spec in b.program["params"].values()]
    sizes = [g for g in (8, 16) if all(w % g == 0 for w in widths)]
    b.program["quantize"] = {"dtype": rng.choice(["u4", "i4", "i3", "u2", "e3m2", "f8e4m3", "u8", "i8", "u1"]),
                             "group_size": rng.choice(sizes)}


def _generate_dynamic(b: _Builder) -> None:
    rng = b.rng
    feat = rng.choice([4, 8, 16])
    b.add_input([rng.choice([2, 3, 5]), feat], "f32")
    target = rng.randint(1, 5)
    tries = 0
    width = feat
    while len(b.program["stmts"]) < target and tries < 60:
        tries += 1
        k = len(b.values) - 1
        op = rng.choice(["add", "mul", "sub", "relu", "neg", "exp", "tanh", "maximum", "linear", "sum", "mean"])
        if op == "linear":
            layer = len(b.program["params"])
            out = rng.choice([4, 8, 16])
            b.program["params"][f"linear{layer}"] = {"kind": "linear", "in": width, "out": out, "bias": True}
            b.module_params = {}
            if b.try_stmt("linear", [k], {"layer": layer}):
                width = out
            else:
                del b.program["params"][f"linear{layer}"]
        elif op in ("add", "mul", "sub", "maximum"):
            if rng.random() < 0.5:
                b.try_stmt(op, [k, k], {})
            else:
                b.try_stmt(op, [k], {"scalar": rng.choice([0.5, -1.5, 2.0])})
        elif op in ("sum", "mean"):
            b.try_stmt(op, [k], {"dims": [1], "keepdim": True})
        else:
            b.try_stmt(op, [k], {})


FAMILIES = {"dm": _generate_dm, "layout": _generate_layout, "lowbit": _generate_lowbit, "dynamic": _generate_dynamic}


def generate(seed: int, index: int, family: str) -> dict:
    """Program `index` of `seed` in `family` (deterministic)."""
    rng = random.Random(f"program:{seed}:{index}:{family}")
    b = _Builder(rng, family)
    FAMILIES[family](b)
    n_in = len(b.program["inputs"])
    last = len(b.values) - 1
    # Every statement result nothing else reads is an output (up to 4, the last always), so
    # no statement is dead code the import drops.
    used = {i for s in b.program["stmts"] for i in s["args"]}
    leaves = [i for i in range(n_in, last) if i not in used]
    b.program["outputs"] = [last] + rng.sample(leaves, min(len(leaves), 3))
    if not b.program["params"]:
        del b.program["params"]
    return b.program
