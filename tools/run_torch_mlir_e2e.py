#!/usr/bin/env python3
"""Run torch-mlir's end-to-end test suite through `vtmlir.compile` and through torch-mlir's own path.

    tools/run_torch_mlir_e2e.py /path/to/torch-mlir                 # every test, both paths
    tools/run_torch_mlir_e2e.py /path/to/torch-mlir --filter 'Scatter|Sort' --paths vtmlir
    tools/run_torch_mlir_e2e.py /path/to/torch-mlir --jobs 2 > e2e.jsonl

The argument is a torch-mlir source checkout (nothing of it is copied into vtmlir): its
`projects/pt1/python/torch_mlir_e2e_test` package supplies the test registry (module factories and
the inputs each test calls its module with) and the comparison torch-mlir's own harness uses
(`reporting.ValueReport`: `allclose(rtol=1e-3, atol=1e-7, equal_nan=True)`, equal dtypes and shapes,
exact Python scalars). The installed `torch_mlir` wheel is the compiler; the checkout's `torch_mlir`
folder is never imported (only its `_version.py`, which the wheel lacks and the suite imports).

For each test the golden trace is computed in eager PyTorch (`framework.generate_golden_trace`), then
every selected path compiles a fresh module from the test's factory and runs it on the trace's inputs:

- `vtmlir`: `vtmlir.compile(module, *inputs)` on the CPU, called on the inputs. A module that writes
  its arguments is refused by `compile` (`InputMutationError`); the runner then compiles it again with
  those arguments donated, as a user would, and also compares the arguments after the call with
  their values after the eager call.
- `torch-mlir`: torch-mlir's FX-importer config (`FxImporterTestConfig` + `RefBackendLinalgOnTensorsBackend`).

Each (test, path) runs in a worker process (a crash or a hang costs one test, the worker is
restarted), and prints one JSON line: `{"test", "path", "outcome", ...}` where outcome is one of
`pass`, `mismatch` (values differ; `error` says how), `error` (a clean `VtmlirError`; `op` names
the op of an `UnsupportedOpError`), `exception` (any other exception: a traceback a user would see),
`crash`, `timeout`; `golden-error` when eager PyTorch itself fails (the test is then not counted).
`class` sorts failures into the classes of the triage (docs/torch_mlir_e2e.md). The last lines are
summaries: counts per path and outcome, tests only one path passes, failure classes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import select
import subprocess
import sys
import time
import traceback
import types
from collections import Counter

PATHS = ("vtmlir", "torch-mlir")


# -- the torch-mlir checkout ---------------------------------------------------------------------


def _load_suite(checkout: str):
    """Import the checkout's e2e test registry; returns {name: Test}."""
    root = os.path.join(checkout, "projects", "pt1", "python")
    if not os.path.isdir(os.path.join(root, "torch_mlir_e2e_test")):
        sys.exit(f"error: {checkout} is not a torch-mlir checkout (no projects/pt1/python/torch_mlir_e2e_test)")
    # `multiprocess` (a fork of the standard library's `multiprocessing`) is imported by the suite's
    # framework for its own parallel runner, which this script does not use.
    if importlib.util.find_spec("multiprocess") is None:
        import multiprocessing

        sys.modules["multiprocess"] = multiprocessing
    # The installed wheel has no `torch_mlir._version`; load the checkout's file under that name.
    if importlib.util.find_spec("torch_mlir._version") is None:
        spec = importlib.util.spec_from_file_location("torch_mlir._version",
                                                      os.path.join(root, "torch_mlir", "_version.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["torch_mlir._version"] = module
    sys.path.append(root)  # after site-packages: the wheel's torch_mlir wins over the checkout's
    _import_torchvision()
    from torch_mlir_e2e_test.registry import GLOBAL_TEST_REGISTRY
    from torch_mlir_e2e_test.test_suite import register_all_tests

    register_all_tests()
    return {t.unique_name: t for t in GLOBAL_TEST_REGISTRY}


def _import_torchvision() -> None:
    """Import torchvision (the suite's vision models need it). The pinned wheel is built for CUDA
    torch: with the CPU torch its detection ops (`torchvision::nms`, ...) do not exist, and the fake
    kernels it registers for them at import fail. No vision model calls those ops, so their fake
    registrations are skipped."""
    import torch

    try:
        import torchvision  # noqa: F401
        return
    except (ImportError, RuntimeError):
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    register_fake = torch.library.register_fake

    def skip_torchvision_ops(op, *args, **kwargs):
        if isinstance(op, str) and op.startswith("torchvision::"):
            return lambda fn: fn
        return register_fake(op, *args, **kwargs)

    torch.library.register_fake = skip_torchvision_ops
    try:
        import torchvision  # noqa: F401
    except (ImportError, RuntimeError):
        pass  # the vision tests then fail to register, and the suite says so
    finally:
        torch.library.register_fake = register_fake


# -- one test on one path (inside a worker) --------------------------------------------------------


def _clone(value):
    from torch_mlir_e2e_test.framework import clone_torch_script_value

    return clone_torch_script_value(value)


def _compare(value, golden) -> str | None:
    """torch-mlir's own comparison; None when equal, else its first failure line."""
    from torch_mlir_e2e_test.reporting import ErrorContext, ValueReport

    report = ValueReport(value, golden, ErrorContext.empty())
    if not report.failed:
        return None
    lines = [ln for ln in report.error_str().splitlines() if ln.startswith("ERROR:")]
    return (lines[0] if lines else report.error_str().splitlines()[-1])[:300]


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    error_lines = [ln for ln in lines if "error:" in ln]
    return ((error_lines or lines or [type(err).__name__])[0])[:300]


def _where(err: BaseException) -> str:
    """The innermost frame of a traceback inside vtmlir or torch_mlir (file:line function)."""
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if "vtmlir" in f.filename or "torch_mlir" in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"


def _run_vtmlir(test, golden) -> dict:
    import vtmlir

    try:
        from vtmlir.errors import InputMutationError
    except ImportError:  # an older vtmlir (baseline runs)
        InputMutationError = None  # noqa: N806
    donated = ()
    for item in golden:
        module = test.program_factory()
        inputs = _clone(item.inputs)
        stage = "compile"
        try:
            try:
                compiled = vtmlir.compile(module, *inputs)
            except Exception as err:
                if InputMutationError is None or not isinstance(err, InputMutationError):
                    raise
                donated = tuple(err.arguments)
                compiled = vtmlir.compile(test.program_factory(), *inputs, donate=donated)
            stage = "run"
            output = compiled(*inputs)
        except vtmlir.VtmlirError as err:
            return {"outcome": "error", "stage": stage, "error": _first_line(err),
                    "op": getattr(err, "op_name", None)}
        except Exception as err:  # noqa: BLE001 - anything else is a traceback a user would see
            return {"outcome": "exception", "stage": stage, "type": type(err).__name__,
                    "error": _first_line(err), "where": _where(err)}
        mismatch = _compare(output, item.output)
        if mismatch is None and donated:
            # the arguments written in place must hold what eager leaves in them (when eager is
            # deterministic: two eager calls agree; `bernoulli_` and friends are not)
            expected, again = _clone(item.inputs), _clone(item.inputs)
            test.program_factory()(*expected)
            test.program_factory()(*again)
            for i in donated:
                if _compare(again[i], expected[i]) is None:
                    mismatch = _compare(inputs[i], expected[i])
                if mismatch is not None:
                    mismatch = f"argument {i} after the call: {mismatch}"
                    break
        if mismatch is not None:
            return {"outcome": "mismatch", "error": mismatch}
    return {"outcome": "pass", **({"donated": list(donated)} if donated else {})}


def _run_torch_mlir(test, golden) -> dict:
    if "torch_mlir_e2e_test.configs" not in sys.modules:
        # The package's __init__ imports every config, among them the lazy-tensor one, which needs a
        # native library the wheel does not ship; only the FX-importer config is needed here.
        import torch_mlir_e2e_test

        package = types.ModuleType("torch_mlir_e2e_test.configs")
        package.__path__ = [os.path.join(os.path.dirname(torch_mlir_e2e_test.__file__), "configs")]
        sys.modules[package.__name__] = package
    from torch_mlir_e2e_test.configs.fx_importer_backend import FxImporterTestConfig
    from torch_mlir_e2e_test.linalg_on_tensors_backends.refbackend import RefBackendLinalgOnTensorsBackend

    config = FxImporterTestConfig(RefBackendLinalgOnTensorsBackend())
    try:
        trace = config.run(config.compile(test.program_factory()), [
            type(item)(item.symbol, _clone(item.inputs), item.output) for item in golden])
    except Exception as err:  # noqa: BLE001
        return {"outcome": "exception", "type": type(err).__name__, "error": _first_line(err),
                "where": _where(err)}
    for item, gold in zip(trace, golden):
        mismatch = _compare(item.output, gold.output)
        if mismatch is not None:
            return {"outcome": "mismatch", "error": mismatch}
    return {"outcome": "pass"}


def _worker(checkout: str) -> None:
    """Read `name<TAB>path` lines on stdin, answer one JSON line each on stdout."""
    import warnings

    warnings.simplefilter("ignore")
    tests = _load_suite(checkout)
    from torch_mlir_e2e_test.framework import generate_golden_trace

    out = sys.stdout
    sys.stdout = sys.stderr  # what tests and compilers print must not mix with the answers
    for line in sys.stdin:
        name, path = line.rstrip("\n").split("\t")
        try:
            golden = generate_golden_trace(tests[name])
        except Exception as err:  # noqa: BLE001
            result = {"outcome": "golden-error", "error": _first_line(err)}
        else:
            try:
                result = (_run_vtmlir if path == "vtmlir" else _run_torch_mlir)(tests[name], golden)
            except Exception as err:  # noqa: BLE001 - a failure of this script, not of a compiler
                result = {"outcome": "harness-error", "error": _first_line(err), "where": _where(err)}
        out.write(json.dumps(result) + "\n")
        out.flush()


# -- failure classes (the triage table of docs/torch_mlir_e2e.md) ----------------------------------

_CLASSES = (
    ("tm_tensor", r"tm_tensor"),
    ("function boundary: scalar/complex types", r"only ranked tensors are supported at function boundaries|"
                                                r"complex|cannot pass to or from Python"),
    ("calling convention: 0-d / uint8 inputs", r"must have (shape|dtype)"),
    ("torch.export could not trace", r"torch\.export could not trace"),
    ("dynamic result shapes", r"has dynamic shape"),
    ("torch-mlir's FX importer", r"FX importer cannot import"),
    ("torch -> linalg lowering", r"no linalg-on-tensors lowering|does not know it|lowering torch to linalg|"
                                 r"linalg lowering crashes|torch-mlir lowers as a for loop"),
    ("in-place update of an argument", r"writes its inputs? .* in place|InputMutation"),
    ("backend (bufferization, lowering, JIT)", r"bufferiz|LLVM JIT|lowering for the CPU|collapse_shape|scf\.yield"),
)


def classify(result: dict) -> str:
    outcome = result["outcome"]
    if outcome in ("pass", "golden-error"):
        return outcome
    if outcome == "mismatch" and "but got `tuple`" in result.get("error", ""):
        return "result structure (extra results: in-place updates of arguments)"
    if outcome in ("mismatch", "crash", "timeout", "harness-error"):
        return {"mismatch": "wrong values", "crash": "crash", "timeout": "timeout",
                "harness-error": "harness error"}[outcome]
    text = f"{result.get('error', '')} {result.get('type', '')}"
    for name, pattern in _CLASSES:
        if re.search(pattern, text):
            return name
    return "other: " + (result.get("op") or result.get("type") or "error")


# -- the driver --------------------------------------------------------------------------------------


class _Worker:
    def __init__(self, checkout: str, env: dict):
        self.proc = subprocess.Popen([sys.executable, os.path.realpath(__file__), "--worker", checkout],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env)
        self.job = None
        self.started = 0.0
        self.done = 0

    def send(self, job) -> None:
        self.job, self.started = job, time.monotonic()
        self.proc.stdin.write(f"{job[0]}\t{job[1]}\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", help="a torch-mlir source checkout")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--filter", default="", help="only tests whose name matches this regex")
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated: vtmlir, torch-mlir")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test and path")
    parser.add_argument("--recycle", type=int, default=100, help="restart a worker after this many tests")
    parser.add_argument("--list", action="store_true", help="list the selected tests and exit")
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.checkout)
        return 0
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if not paths or any(p not in PATHS for p in paths):
        parser.error(f"--paths takes {', '.join(PATHS)}")

    names = sorted(n for n in _load_suite(args.checkout) if re.search(args.filter, n))
    if args.list:
        print("\n".join(names))
        return 0
    jobs = [(n, p) for n in names for p in paths]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    results: dict = {}
    workers: list[_Worker] = []
    pending = list(reversed(jobs))

    def record(job, result):
        result = {"test": job[0], "path": job[1], **result}
        result["class"] = classify(result)
        results[job] = result
        print(json.dumps(result), flush=True)

    while pending or any(w.job for w in workers):
        while len(workers) < args.jobs and pending:
            workers.append(_Worker(args.checkout, env))
        for w in workers:
            if w.job is None and pending:
                w.send(pending.pop())
        busy = {w.proc.stdout: w for w in workers if w.job is not None}
        ready, _, _ = select.select(list(busy), [], [], 1.0)
        for stream in ready:
            w = busy[stream]
            line = stream.readline()
            if line:
                record(w.job, json.loads(line))
                w.job, w.done = None, w.done + 1
                if w.done >= args.recycle:
                    w.stop()
                    workers.remove(w)
            else:  # the worker died on this test
                code = w.proc.wait()
                record(w.job, {"outcome": "crash", "error": f"worker exited with {code}"})
                workers.remove(w)
        for w in list(workers):
            if w.job is not None and time.monotonic() - w.started > args.timeout:
                w.stop()
                record(w.job, {"outcome": "timeout", "error": f"more than {args.timeout:g} s"})
                workers.remove(w)
    for w in workers:
        w.stop()
    _summarise(results, names, paths)
    return 0


def _summarise(results: dict, names: list[str], paths: list[str]) -> None:
    counted = [n for n in names if all(results[(n, p)]["outcome"] != "golden-error" for p in paths)]
    passed = {p: {n for n in counted if results[(n, p)]["outcome"] == "pass"} for p in paths}
    for p in paths:
        outcomes = Counter(results[(n, p)]["outcome"] for n in counted)
        print(json.dumps({"suite": "torch-mlir-e2e", "path": p, "tests": len(counted),
                          "pass": len(passed[p]), "outcomes": dict(outcomes)}))
    if len(paths) == 2:
        a, b = paths
        print(json.dumps({"suite": "torch-mlir-e2e", "both_pass": len(passed[a] & passed[b]),
                          f"only_{a}": sorted(passed[a] - passed[b]), f"only_{b}": len(passed[b] - passed[a])}))
    if "vtmlir" in paths:
        failed = [n for n in counted if n not in passed["vtmlir"]]
        classes = Counter(results[(n, "vtmlir")]["class"] for n in failed)
        other = "torch-mlir" if "torch-mlir" in paths else None
        for cls, count in classes.most_common():
            row = {"suite": "torch-mlir-e2e", "vtmlir_failure_class": cls, "tests": count}
            if other:
                row["torch_mlir_passes"] = sum(1 for n in failed if results[(n, "vtmlir")]["class"] == cls
                                               and n in passed[other])
            print(json.dumps(row))


if __name__ == "__main__":
    sys.exit(main())
