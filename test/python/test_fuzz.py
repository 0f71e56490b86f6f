"""The fuzzer and the differential tester (test/fuzz, `tools/vt-fuzz`) in the suite: a smoke run of
each with a fixed seed and budget, and the replay of every reproducer they (and issue 18) found.

The long runs are `tools/vt-fuzz mlir --seconds N` and `tools/vt-fuzz torch --seconds N`
(docs/reliability.md); `pytest -m slow` runs a longer fixed budget of both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test"))

from fuzz import differential, mlir_fuzz, runner  # noqa: E402

CORPUS = REPO / "test" / "fuzz" / "corpus"
SMOKE_SEED = 18


def vt_fuzz(*args, timeout: float = 900) -> dict:
    """Run `tools/vt-fuzz` in a fresh process (forked children need a parent with no MLIR thread
    pools of earlier tests); its summary line."""
    env = {k: v for k, v in os.environ.items() if k not in ("VTMLIR_DEBUG", "VTMLIR_NO_CRASH_GUARD")}
    env["PYTHONPATH"] = str(REPO / "python")
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "vt-fuzz"), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines and "summary" in lines[-1], proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"summary": lines[-1]["summary"], "failures": [ln for ln in lines if "failure" in ln],
            "returncode": proc.returncode}


def _assert_mlir_clean(result: dict) -> None:
    summary = result["summary"]
    bad = {tool: {k: v for k, v in kinds.items() if k in runner.FAILURE_KINDS}
           for tool, kinds in summary["per_tool"].items()}
    assert not any(bad.values()), (bad, result["failures"][:5])
    assert result["returncode"] == 0


def test_mlir_fuzzer_smoke():
    """200 malformed inputs (seed 18) through vt-opt and vtmlir compile: no crash, traceback,
    internal error, silent failure or hang."""
    result = vt_fuzz("mlir", "--seed", SMOKE_SEED, "--count", 200, "--timeout", 120)
    assert result["summary"]["cases"] == 200
    _assert_mlir_clean(result)


def test_differential_smoke():
    """8 random programs (seed 18; data movement, layout, low-bit and dynamic families) through every
    pipeline of their family: no wrong answer, no exception, crash or hang."""
    result = vt_fuzz("torch", "--seed", SMOKE_SEED, "--count", 8)
    summary = result["summary"]
    assert summary["programs"] == 8
    assert summary["failures"] == 0, result["failures"][:5]
    assert all(kind in ("match", "error") for per in summary["per_pipeline"].values() for kind in per)


def test_differential_summary_names_the_cases():
    """The summary lists the case index of every refusal (per signature) and every failure, so a
    long run's finding is replayed with `--case I` without searching for it again. An op verifier's
    error (vtmlir built invalid IR) is a failure, not a refusal."""
    stats = differential.Stats()
    refused = "error: VtmlirError: error: cannot compile 'tm_tensor.scan': no lowering for this target"
    invalid = "error: VtmlirError: error: 'memref.expand_shape' op expected expanded type"
    for case, outcome in [(4, "match"), (688, refused), (9, refused), (12, "wrong: result 0 differs"),
                          (30, invalid)]:
        stats.add({"family": "dm", "import": "ok", "pipelines": {"default": outcome, "vtc": "match"},
                   "seed": 2611, "case": case})
    summary = stats.summary()
    (signature,) = summary["refusals"]
    assert summary["refusals"][signature] == 2 and summary["refusal_cases"][signature] == [9, 688]
    assert summary["failures"] == 2 and summary["failure_cases"] == [12, 30]


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


def _spin(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "done"


def test_crash_guard_cpu_limit_tells_a_starved_child_from_a_busy_one():
    # The differential fuzzer limits its children's CPU time: at low priority on a loaded machine a
    # program of seconds passed 300 s of wall time (four false hangs in seed 2611).
    from vtmlir.crash_guard import TimedOut, run_guarded

    assert run_guarded(_sleep, 1.5, timeout=0.5, limit="cpu") == "done"   # no CPU used: waited for
    assert isinstance(run_guarded(_sleep, 1.5, timeout=0.5), TimedOut)   # the wall clock counts
    assert isinstance(run_guarded(_spin, 5.0, timeout=0.5, limit="cpu"), TimedOut)
    assert isinstance(run_guarded(_sleep, 30.0, timeout=0.25, limit="cpu"), TimedOut)  # blocked: 4x wall
    with pytest.raises(ValueError):
        run_guarded(_sleep, 0.0, limit="both")


@pytest.mark.slow
def test_mlir_fuzzer_long():
    _assert_mlir_clean(vt_fuzz("mlir", "--seed", 1800, "--count", 3000, "--timeout", 120, timeout=3600))


@pytest.mark.slow
def test_differential_long():
    result = vt_fuzz("torch", "--seed", 1800, "--count", 400, timeout=7200)
    assert result["summary"]["failures"] == 0, result["failures"][:5]


# -- reproducers ------------------------------------------------------------------------------------

MLIR_REPRODUCERS = sorted(p.stem for p in (CORPUS / "mlir").glob("*.json"))


@pytest.mark.parametrize("name", MLIR_REPRODUCERS)
def test_mlir_reproducer(name, tmp_path):
    """Every input the fuzzer found a failure with: now an answer or a clean error."""
    meta = json.loads((CORPUS / "mlir" / f"{name}.json").read_text())
    case = mlir_fuzz.Case(meta["seed"], meta["case"], meta["source"], meta["mutations"], meta["tool"], meta["argv"],
                          (CORPUS / "mlir" / f"{name}.input").read_bytes())
    outcome = mlir_fuzz.run_case(case, tmp_path, timeout=120, mode="fork")
    assert not outcome.failed, (meta["found"], outcome.kind, outcome.stderr[-2000:])


def _program_reproducers() -> list:
    """The corpus programs; an entry with `"slow": true` (its pipelines take over 20 s together
    on the 2-core machine) runs with `pytest -m slow` only."""
    out = []
    for path in sorted((CORPUS / "programs").glob("*.json")):
        slow = json.loads(path.read_text()).get("slow", False)
        out.append(pytest.param(path.stem, marks=pytest.mark.slow) if slow else path.stem)
    return out


@pytest.mark.parametrize("name", _program_reproducers())
def test_program_reproducer(name):
    """Every program that once got a wrong answer (or an exception, a crash or a hang) now matches
    eager PyTorch in every pipeline of its family."""
    entry = json.loads((CORPUS / "programs" / f"{name}.json").read_text())
    result = differential.evaluate(entry["program"])
    assert result["import"] == "ok", result
    bad = {k: v for k, v in result["pipelines"].items() if v != "match"}
    assert not bad, (entry["found"], bad)
