"""The differential tester: random PyTorch programs compiled by vtmlir, against eager PyTorch.

Program `i` of seed `s` in a family (programs.py) is imported once and compiled with every pipeline
of its family; each compiled function runs on the same inputs as eager PyTorch. A pipeline's
outcome is:
- `match`: equal to eager -- bit for bit when the program only moves data, else within the dtype's
  tolerance (f32 1e-4; f16 2e-2 relative and absolute, also for the f32 results of a program that
  computes in f16/bf16 anywhere; integers exact) -- and, for the pipelines that
  only change data movement or the LLVM level (`BITWISE`), bit for bit equal to their reference
  (`BITWISE_REFERENCE`: the LLVM levels against `default`; the graph pipelines against opt level 0,
  both under `EXACT_SCHEDULES`);
- `wrong`: a different answer, or an input the compiled function wrote;
- `error`: a clean `VtmlirError` (the program is valid PyTorch, so each is a refusal to explain);
  one that quotes an op verifier (`'memref.collapse_shape' op expected ...`: vtmlir built invalid
  IR) is a bug like an exception;
- `exception`: any other exception (a bug).
The whole program runs in a forked child (`vtmlir.crash_guard`), so a crash or hang is an outcome too.
"""

from __future__ import annotations

import json
import re
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import programs

# Pipelines per family: name -> vtmlir.compile keywords (or a DVM run for "dvm").
PIPELINES = {
    "dm": {
        "default": {},  # opt_level 2: every graph-level system that wins on the CPU
        "O0": {"opt_level": 0},  # none of vtmlir's graph-level systems
        "O1": {"opt_level": 1},
        "llvm-O0": {"llvm_opt_level": 0},
        "llvm-O3": {"llvm_opt_level": 3},
        "vtc": {"pipeline": "vt-eliminate-data-movement"},  # compile runs vt-lower-views after it
        "layout": {"pipeline": "layout-resolve, layout-hoist, layout-materialize"},
    },
    "layout": {
        "default": {},
        "O0": {"opt_level": 0},
        "layout-resolve": {"pipeline": "layout-resolve, layout-materialize"},
        "layout-ilp": {"pipeline": "layout-select-ilp, layout-hoist, layout-materialize"},
        "layout-ilp-time": {"pipeline": "layout-select-ilp{cost=time}, layout-materialize"},  # opt level 2's
        "layout-views": {"pipeline": "layout-resolve, layout-materialize{views=always}"},
        "vtc": {"pipeline": "vt-eliminate-data-movement"},
        "temco-fuse": {"pipeline": "temco-fuse-activation"},
    },
    "lowbit": {
        "default": {},
        "portable": {"lowbit": "portable"},
        "dequantized": {"lowbit": None},
        "O0": {"opt_level": 0},
    },
    "dynamic": {
        "dvm": {"dvm": True},
        "static": {},
    },
}
# Pipelines that must give the bits `default` gives (they change data movement or LLVM codegen only).
# The opt levels are compared with eager within the tolerance: a level adds or removes graph-level
# systems, so the kernels (and a reduction's schedule) may differ.
BITWISE = {"llvm-O0", "llvm-O3", "vtc", "layout", "layout-resolve", "layout-ilp", "layout-ilp-time", "layout-views"}
# What a bitwise pipeline is compared with. The LLVM levels: `default`, same kernels and schedules.
# A `pipeline=` run replaces the opt-level steps, so it is the unoptimised graph plus its own passes:
# it is compiled, and compared with opt level 0 compiled, under `EXACT_SCHEDULES` -- a view or a
# layout can change which loop of a reduction is innermost and so whether a row reduction is summed
# as a tree (docs/codegen.md, Numerics; seed 2611 case 5002: a layout-ilp conv's bias-add reduction).
BITWISE_REFERENCE = {"llvm-O0": "default", "llvm-O3": "default"}   # the others: opt level 0, exact
EXACT_REFERENCE = "O0 (exact schedules)"
DYNAMIC_BATCHES = (1, 3, 7)


def _compare(got, want, exact: bool, half: bool = False) -> str | None:
    """None when `got` matches `want`, else what differs. `half`: the program computes in f16/bf16
    somewhere, so an f32 result may carry a half-precision rounding (an f16 softmax cast to f32 one
    f16 ulp away) and takes the half-precision tolerance."""
    import torch

    if not isinstance(got, torch.Tensor):
        got = torch.as_tensor(got)
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    if exact or not want.is_floating_point():
        same = (got == want) | (torch.isnan(got) & torch.isnan(want)) if want.is_floating_point() else got == want
        if bool(same.all()):
            return None
        bad = (~same).nonzero()[0].tolist()
        return f"differs at {bad}: {got[tuple(bad)].item()} != {want[tuple(bad)].item()} ({int((~same).sum())} elements)"
    tol = 2e-2 if half or want.dtype in (torch.float16, torch.bfloat16) else 1e-4
    g, w = got.double(), want.double()
    scale = max(1.0, float(w.abs().max())) if w.numel() else 1.0
    close = torch.isclose(g, w, rtol=tol, atol=tol * scale, equal_nan=True)
    if bool(close.all()):
        return None
    bad = (~close).nonzero()[0].tolist()
    return f"differs at {bad}: {got[tuple(bad)].item()} != {want[tuple(bad)].item()} (tolerance {tol})"


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _error_signature(err: BaseException) -> str:
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    first = re.sub(r"^\S*:\d+:\d+: ", "", first)
    return f"{type(err).__name__}: " + re.sub(r"\d+", "N", first)[:200]


def _exception_detail(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].name}" if frames else ""
    return f"{_error_signature(err)} @ {where}"


def evaluate(program: dict, pipelines: list[str] | None = None, input_seed: int = 0) -> dict:
    """Import `program` once, compile it with each pipeline, run, compare. (In the caller's process.)"""
    import torch

    import vtmlir
    from vtmlir.codegen import EXACT_SCHEDULES
    from vtmlir.errors import VtmlirError

    torch.manual_seed(0)
    family = program.get("family", "dm")
    table = PIPELINES[family]
    names = [n for n in (pipelines or table) if n in table]
    names.sort(key=lambda n: n != "default")   # the LLVM levels' reference first
    module = programs.ProgramModule(program).eval()
    if "quantize" in program:
        module = vtmlir.quantize(module, program["quantize"]["dtype"],
                                 group_size=program["quantize"]["group_size"]).eval()
    inputs = programs.make_inputs(program, input_seed)
    with torch.no_grad():
        expected = [t.clone() for t in _as_list(module(*inputs))]
    exact = programs.is_data_movement_only(program)
    half = _computes_in_half_precision(program)
    result = {"family": family, "exact": exact, "import": "ok", "pipelines": {}}
    try:
        graph = vtmlir.import_torch(module, *inputs)
    except VtmlirError as err:
        result["import"] = "error: " + _error_signature(err)
        return result
    except Exception as err:  # noqa: BLE001 - recorded as a bug
        result["import"] = "exception: " + _exception_detail(err)
        return result
    outputs: dict = {}   # pipeline -> its results (the references run first)
    for name in names:
        options = dict(table[name])
        try:
            if options.pop("dvm", False):
                outcome = _run_dvm(module, program, input_seed)
            else:
                reference = BITWISE_REFERENCE.get(name, EXACT_REFERENCE)
                if name in BITWISE and reference == EXACT_REFERENCE:
                    options["schedules"] = EXACT_SCHEDULES
                    if reference not in outputs:
                        exact_o0 = vtmlir.compile(graph, opt_level=0, schedules=EXACT_SCHEDULES)
                        outputs[reference] = _as_list(exact_o0(*inputs))
                compiled = vtmlir.compile(graph, **options)
                saved = [t.clone() for t in inputs]
                got = _as_list(compiled(*inputs))
                outcome = _judge(got, expected, exact, half)
                if outcome is None and any(not torch.equal(a, b) for a, b in zip(inputs, saved)):
                    outcome = "wrong: an input was written"
                outputs[name] = got
                if outcome is None and name in BITWISE and reference in outputs:
                    differs = _judge(got, outputs[reference], True)
                    if differs:
                        outcome = f"wrong: differs from {reference}: {differs}"
        except VtmlirError as err:
            outcome = "error: " + _error_signature(err)
        except Exception as err:  # noqa: BLE001 - recorded as a bug
            outcome = "exception: " + _exception_detail(err)
        result["pipelines"][name] = outcome or "match"
    return result


def _computes_in_half_precision(program: dict) -> bool:
    """An input or a cast of the program is f16 or bf16."""
    half = ("f16", "bf16")
    return (any(i.get("dtype") in half for i in program.get("inputs", []))
            or any(s.get("op") == "cast" and s.get("p", {}).get("dtype") in half for s in program.get("stmts", [])))


def _judge(got: list, want: list, exact: bool, half: bool = False) -> str | None:
    if len(got) != len(want):
        return f"wrong: {len(got)} results, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        d = _compare(g, w, exact, half)
        if d:
            return f"wrong: result {i} {d}"
    return None


def _run_dvm(module, program: dict, input_seed: int) -> str | None:
    """Import with a dynamic batch dimension and run the DVM function at several batch sizes."""
    import numpy as np
    import torch
    from torch.export import Dim

    import vtmlir
    from vtmlir.dvm.runner import DvmFunction

    batch = Dim("batch", min=1, max=64)
    inputs = programs.make_inputs(program, input_seed)
    spec = {"inputs": tuple({0: batch} for _ in inputs)}
    graph = vtmlir.import_torch(module, *inputs, dynamic_shapes=spec)
    fn = DvmFunction(graph)
    for b in DYNAMIC_BATCHES:
        xs = programs.make_inputs(program, input_seed + b, batch=b)
        with torch.no_grad():
            want = _as_list(module(*xs))
        got = [torch.from_numpy(np.asarray(o)) for o in _as_list(fn(*[x.numpy() for x in xs]))]
        verdict = _judge(got, want, programs.is_data_movement_only(program))
        if verdict:
            return f"{verdict} (batch {b})"
    return None


def warm_up() -> None:
    """Import, export and compile one program here, so each forked child starts warm (the first
    torch.export of a process takes seconds). One thread: no OpenMP pool exists when the children
    fork; the warm-up's MLIR contexts are collected before any fork."""
    import gc

    import torch

    torch.set_num_threads(1)
    for family in ("dm", "lowbit"):
        evaluate(programs.generate(0, 0, family), ["default"])
    gc.collect()


def run_program(seed: int, index: int, pipelines=None, family: str | None = None, timeout: float = 300.0,
                verbose: bool = False, program: dict | None = None) -> dict:
    """Generate (or take) one program and evaluate it in a crash-guarded child."""
    from vtmlir.crash_guard import Crashed, Raised, TimedOut, run_guarded

    family = family or family_of(index)
    program = program or programs.generate(seed, index, family)
    # CPU time: the fuzzer runs at low priority beside other work, where a starved child passed 300 s
    # of wall time in seconds of CPU (seed 2611 cases 7874, 7879, 8021, 8025: 'hangs' that take 7 s).
    reply = run_guarded(evaluate, program, pipelines, timeout=timeout, limit="cpu")
    if isinstance(reply, Crashed):
        reply = {"family": family, "crash": reply.describe()}
    elif isinstance(reply, TimedOut):
        reply = {"family": family, "hang": reply.seconds}
    elif isinstance(reply, Raised):
        reply = {"family": family, "exception": f"{reply.type_name}: {reply.message}"}
    reply.update(seed=seed, case=index)
    if verbose:
        reply["program"] = programs.format_program(program)
        reply["json"] = program
    return reply


def family_of(index: int) -> str:
    """Round robin weighted toward data movement: dm dm layout dm lowbit dm dynamic dm."""
    return ("dm", "dm", "layout", "dm", "lowbit", "dm", "dynamic", "dm")[index % 8]


def failures_of(reply: dict) -> list[tuple[str, str]]:
    """(pipeline or stage, what) for every outcome that is a bug: crash, hang, exception, wrong."""
    out = []
    for key in ("crash", "hang", "exception"):
        if key in reply:
            out.append((key, str(reply[key])))
    if str(reply.get("import", "")).startswith("exception"):
        out.append(("import", reply["import"]))
    for name, outcome in reply.get("pipelines", {}).items():
        if outcome.startswith(("wrong", "exception")) or (outcome.startswith("error") and _VERIFIER.search(outcome)):
            out.append((name, outcome))
    return out


# An op verifier's diagnostic ("'linalg.generic' op inferred input/output operand ..."): vtmlir made
# IR that does not verify, never a refusal of an unsupported program.
_VERIFIER = re.compile(r"'[a-z_]+(\.[a-z_]+)+' op ")


CASES_SHOWN = 20   # case indices listed per refusal signature in the summary


@dataclass
class Stats:
    programs: int = 0
    per_pipeline: dict = field(default_factory=dict)  # "family/pipeline" -> Counter(match/wrong/error/exception)
    imports: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)  # clean refusals by signature
    error_cases: dict = field(default_factory=dict)   # signature -> the case indices refused with it
    failures: list = field(default_factory=list)
    seconds: float = 0.0

    def add(self, reply: dict) -> None:
        self.programs += 1
        family = reply.get("family", "?")
        imp = str(reply.get("import", "ok" if "pipelines" in reply else "child failed"))
        self.imports[f"{family}: {imp.split(':')[0]}"] += 1
        if imp.startswith("error"):
            self._refused(f"{family}/import: {imp[7:]}", reply["case"])
        for name, outcome in reply.get("pipelines", {}).items():
            kind = outcome.split(":")[0]
            self.per_pipeline.setdefault(f"{family}/{name}", Counter())[kind] += 1
            if kind == "error" and not _VERIFIER.search(outcome):   # (a verifier's error is a failure)
                self._refused(f"{family}/{name}: {outcome[7:]}", reply["case"])
        for what in failures_of(reply):
            self.failures.append({"seed": reply["seed"], "case": reply["case"], "family": family,
                                  "where": what[0], "what": what[1][:300]})

    def _refused(self, signature: str, case: int) -> None:
        self.errors[signature] += 1
        self.error_cases.setdefault(signature, []).append(case)

    def summary(self) -> dict:
        """The counts, and the case indices (`--case I` replays one) of every refusal, per signature
        (the first `CASES_SHOWN`), and of every failure."""
        return {"programs": self.programs, "seconds": round(self.seconds, 1),
                "imports": dict(self.imports),
                "per_pipeline": {k: dict(v) for k, v in sorted(self.per_pipeline.items())},
                "refusals": dict(self.errors.most_common()),
                "refusal_cases": {sig: sorted(set(self.error_cases[sig]))[:CASES_SHOWN]
                                  for sig, _ in self.errors.most_common()},
                "failures": len(self.failures),
                "failure_cases": sorted({f["case"] for f in self.failures})}


def fuzz(seed: int, count: int | None = None, seconds: float | None = None, *, start: int = 0,
         pipelines=None, family: str | None = None, timeout: float = 300.0, out: Path | None = None,
         log=None) -> Stats:
    """Evaluate programs start, start+1, ... of `seed` until `count` programs or `seconds` passed."""
    import torch

    warm_up()
    stats = Stats()
    began = time.monotonic()
    index = start
    while (count is None or stats.programs < count) and (seconds is None or time.monotonic() - began < seconds):
        reply = run_program(seed, index, pipelines, family=family, timeout=timeout)
        before = len(stats.failures)
        stats.add(reply)
        if len(stats.failures) > before:
            if log:
                log(json.dumps({"failure": stats.failures[before:]}))
            if out is not None:
                save_program(out, seed, index, family or family_of(index), reply)
        index += 1
        if log and stats.programs % 100 == 0:
            log(json.dumps({"progress": stats.programs, "failures": len(stats.failures),
                            "seconds": round(time.monotonic() - began)}))
    stats.seconds = time.monotonic() - began
    return stats


def save_program(out: Path, seed: int, index: int, family: str, reply: dict) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    program = programs.generate(seed, index, family)
    path = out / f"s{seed}-p{index}-{family}.json"
    path.write_text(json.dumps({"program": program, "reply": reply, "source": programs.format_program(program)},
                               indent=1) + "\n")
    return path
