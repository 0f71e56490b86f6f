"""Runs the lit/FileCheck suite (test/**/*.mlir) once and reports one pytest result per lit file.

lit runs in a single process pool (it is much faster than one lit call per file); each pytest item
then asserts the outcome of its file, so `pytest` alone runs the whole suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TEST_ROOT = Path(__file__).resolve().parents[1]
LIT_FILES = sorted(
    p.relative_to(TEST_ROOT).as_posix()
    for p in TEST_ROOT.rglob("*.mlir")
    if "Output" not in p.parts and "Inputs" not in p.parts
)
GOOD = {"PASS", "XFAIL", "UNSUPPORTED"}


@pytest.fixture(scope="session")
def lit_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("lit") / "results.json"
    proc = subprocess.run(
        [sys.executable, "-c", "from lit.main import main; main()", "-q", "--order=lexical", f"--output={out}", str(TEST_ROOT)],
        capture_output=True, text=True,
    )
    if not out.exists():
        pytest.fail(f"lit did not run:\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(out.read_text())
    results = {}
    for test in data["tests"]:
        # lit names tests "<suite> :: <path relative to the suite root>"
        results[test["name"].split(" :: ", 1)[1]] = test
    return results


@pytest.mark.parametrize("path", LIT_FILES)
def test_lit(path, lit_results):
    result = lit_results.get(path)
    assert result is not None, f"lit did not run {path}"
    assert result["code"] in GOOD, f"{path}: {result['code']}\n{result.get('output', '')}"
