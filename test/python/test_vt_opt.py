"""`vt-opt` command-line behaviour, run as a user would (subprocess): errors, stdin, -o, split files,
--verify-diagnostics, --list-passes, IR dumps."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VT_OPT = [sys.executable, str(REPO / "tools" / "vt-opt")]

GOOD = """\
func.func @f(%t: tensor<16x64xf32>) -> tensor<8x64xf32> {
  %s = tensor.extract_slice %t[0, 0] [8, 64] [1, 1] : tensor<16x64xf32> to tensor<8x64xf32>
  return %s : tensor<8x64xf32>
}
"""


def vt_opt(*args, input: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("VTMLIR_DEBUG", None)
    return subprocess.run(
        [*VT_OPT, *map(str, args)], input=input, capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def assert_clean_failure(proc, code=1):
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Traceback" not in proc.stdout


@pytest.fixture
def good_file(tmp_path):
    path = tmp_path / "good.mlir"
    path.write_text(GOOD)
    return path


def test_round_trip_file(good_file):
    proc = vt_opt(good_file)
    assert proc.returncode == 0, proc.stderr
    assert "module {" in proc.stdout
    assert "tensor.extract_slice %arg0[0, 0] [8, 64] [1, 1]" in proc.stdout
    assert proc.stderr == ""


def test_stdin_with_dash_and_default():
    for args in (["-"], []):
        proc = vt_opt(*args, "--vt-stats=report=-", input=GOOD)
        assert proc.returncode == 0, proc.stderr
        assert "func.func @f" in proc.stdout
        assert "func @f: 0 compute, 1 data-movement" in proc.stdout  # report=-: stdout, before the IR
        assert proc.stdout.index("<stdin>:2:8") < proc.stdout.index("func.func @f")


def test_malformed_input_reports_file_line_col(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("// a comment\nfunc.func @f() {\n  %x = arith.addi\n}\n")
    proc = vt_opt(bad, "--canonicalize")
    assert_clean_failure(proc)
    first = proc.stderr.splitlines()[0]
    assert first == f"{bad}:3:18: error: expected SSA operand", proc.stderr
    assert proc.stdout == ""


def test_verifier_error_reports_location(tmp_path):
    bad = tmp_path / "verify.mlir"
    bad.write_text("func.func @f(%a: i32) -> f32 {\n  return %a : i32\n}\n")
    proc = vt_opt(bad)
    assert_clean_failure(proc)
    assert f"{bad}:2:3: error: type of return operand 0" in proc.stderr
    assert "  return %a : i32\n  ^" in proc.stderr


def test_multiple_top_level_ops_and_aliases_are_wrapped(tmp_path):
    path = tmp_path / "multi.mlir"
    path.write_text(
        "#map = affine_map<(d0) -> (d0)>\n\nfunc.func @a() {\n  return\n}\nfunc.func @b(%x: i32) -> f32 {\n"
        "  return %x : i32\n}\n"
    )
    proc = vt_opt(path)
    assert_clean_failure(proc)
    # Wrapping in an implicit module moves no line and no column of the ops.
    assert f"{path}:7:3: error: type of return operand 0" in proc.stderr


def test_unknown_pass_flag():
    proc = vt_opt("--no-such-pass", input=GOOD)
    assert_clean_failure(proc)
    assert proc.stderr.startswith("vt-opt: error: unknown command line option or pass '--no-such-pass'")


def test_unknown_pass_in_pipeline_points_at_it():
    proc = vt_opt("--pass-pipeline=builtin.module(func.func(cse, bogus-pass))", input=GOOD)
    assert_clean_failure(proc)
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("<pass-pipeline>:1:31: error: 'bogus-pass' does not refer to a registered pass")
    assert lines[2] == " " * 30 + "^"


def test_unknown_and_bad_options():
    proc = vt_opt("--vt-stats=colour=red", input=GOOD)
    assert_clean_failure(proc)
    assert "no such option 'colour' for pass 'vt-stats'" in proc.stderr
    proc = vt_opt("--pass-pipeline=vt-stats{json=perhaps}", input=GOOD)
    assert_clean_failure(proc)
    assert "invalid value 'perhaps' for option 'json' of pass 'vt-stats'" in proc.stderr
    proc = vt_opt("--canonicalize=bogus-option=1", input=GOOD)
    assert_clean_failure(proc)
    assert "invalid options 'bogus-option=1' for pass 'canonicalize'" in proc.stderr


def test_vtmlir_pass_nested_under_func_is_an_error():
    proc = vt_opt("--pass-pipeline=builtin.module(func.func(vt-stats))", input=GOOD)
    assert_clean_failure(proc)
    assert "cannot be nested under 'func.func'" in proc.stderr


def test_pipeline_and_pass_flags_conflict():
    proc = vt_opt("--pass-pipeline=builtin.module(cse)", "--canonicalize", input=GOOD)
    assert_clean_failure(proc)
    assert "can't be used with individual pass options" in proc.stderr


def test_missing_input_file(tmp_path):
    proc = vt_opt(tmp_path / "nope.mlir")
    assert_clean_failure(proc)
    assert proc.stderr.startswith("vt-opt: error: could not open input file")


def test_output_file(good_file, tmp_path):
    out = tmp_path / "out.mlir"
    proc = vt_opt(good_file, "--canonicalize", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "tensor.extract_slice" in out.read_text()
    # -o=file works too; on failure no output file is written.
    out2 = tmp_path / "out2.mlir"
    proc = vt_opt("-o=" + str(out2), input="func.func @f( {")
    assert_clean_failure(proc)
    assert not out2.exists()


def test_split_input_file_keeps_original_line_numbers(tmp_path):
    path = tmp_path / "split.mlir"
    path.write_text(
        "func.func @one() {\n  return\n}\n\n// -----\n\nfunc.func @two() {\n  return\n}\n\n// -----\n\n"
        "func.func @three() {\n  %x = arith.addi\n}\n"
    )
    proc = vt_opt(path, "--split-input-file")
    assert_clean_failure(proc)
    assert f"{path}:14:18: error: expected SSA operand\n  %x = arith.addi\n                 ^" in proc.stderr
    # The chunks that parse are still printed, separated like mlir-opt does.
    assert proc.stdout.count("// -----") == 1
    assert "@one" in proc.stdout and "@two" in proc.stdout


VERIFY = """\
func.func @ok() {
  return
}

// -----

func.func @bad(%a: i32) -> f32 {
  // expected-error @+1 {{type of return operand 0 ('i32') doesn't match function result type ('f32')}}
  return %a : i32
}

// -----

// expected-error @below {{expected SSA operand}}
func.func @parse() { %x = arith.addi }
"""


def test_verify_diagnostics_pass(tmp_path):
    path = tmp_path / "verify.mlir"
    path.write_text(VERIFY)
    proc = vt_opt(path, "--split-input-file", "--verify-diagnostics")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "@ok" in proc.stdout


def test_verify_diagnostics_fail(tmp_path):
    path = tmp_path / "verify.mlir"
    path.write_text(VERIFY.replace("{{type of", "{{kind of").replace("@below", "@above"))
    proc = vt_opt(path, "--split-input-file", "--verify-diagnostics")
    assert_clean_failure(proc)
    err = proc.stderr
    assert f"{path}:9:3: error: unexpected error: type of return operand 0" in err
    assert f"{path}:8:6: error: expected error \"kind of return operand 0" in err
    assert "was not produced" in err
    assert f"{path}:15:37: error: unexpected error: expected SSA operand" in err
    assert f"{path}:14:4: error: expected error \"expected SSA operand\" was not produced" in err


def test_verify_diagnostics_wrong_severity(tmp_path):
    path = tmp_path / "sev.mlir"
    path.write_text("func.func @f(%a: i32) -> f32 {\n  return %a : i32 // expected-warning {{type of return}}\n}\n")
    proc = vt_opt(path, "--verify-diagnostics")
    assert_clean_failure(proc)
    assert "'error' diagnostic emitted when expecting a 'warning'" in proc.stderr


def test_list_passes():
    proc = vt_opt("--list-passes")
    assert proc.returncode == 0, proc.stderr
    assert "--vt-stats" in proc.stdout
    assert "Count compute vs data-movement ops" in proc.stdout
    assert "json=<bool>" in proc.stdout and "report=<string>" in proc.stdout
    assert "Upstream MLIR passes" in proc.stdout


def test_help():
    proc = vt_opt("--help")
    assert proc.returncode == 0
    assert "--pass-pipeline" in proc.stdout and "--verify-diagnostics" in proc.stdout


def test_print_ir_after_all(good_file):
    proc = vt_opt(good_file, "--vt-stats", "--canonicalize", "--mlir-print-ir-after-all")
    assert proc.returncode == 0, proc.stderr
    assert "IR Dump After VtStats: vt-stats" in proc.stderr
    assert "IR Dump After CanonicalizerPass" in proc.stderr
    assert proc.stderr.index("IR Dump After VtStats") < proc.stderr.index("IR Dump After CanonicalizerPass")


def test_print_debuginfo_and_generic(good_file):
    proc = vt_opt(good_file, "--mlir-print-debuginfo", "--mlir-print-op-generic")
    assert proc.returncode == 0, proc.stderr
    assert '"tensor.extract_slice"' in proc.stdout
    assert f'loc("{good_file}":2:8)' in proc.stdout


def test_vt_stats_json_to_file(good_file, tmp_path):
    report = tmp_path / "stats.json"
    proc = vt_opt(good_file, f"--vt-stats=json=true report={report}", "-o", os.devnull)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    assert data["totals"]["data_movement"] == 1
    assert data["totals"]["bytes_moved"] == 8 * 64 * 4
    assert data["functions"][0]["ops"][0]["location"] == f"{good_file}:2:8"


def test_implicit_nesting_of_function_passes(good_file):
    proc = vt_opt(good_file, "--convert-linalg-to-loops", "--dump-pass-pipeline", "-o", os.devnull)
    assert proc.returncode == 0, proc.stderr
    assert "convert-linalg-to-loops" in proc.stderr


@pytest.mark.skipif(shutil.which("vt-opt") is None, reason="vt-opt console script not installed")
def test_installed_console_script(good_file):
    proc = subprocess.run(["vt-opt", str(good_file), "--cse"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "tensor.extract_slice" in proc.stdout


def test_exception_in_a_pass_is_a_diagnostic_naming_pass_and_op(tmp_path):
    """A bug inside a pass (an exception escaping `run`) is an MLIR-style error at the op the pass was
    working on, naming the pass (exit 1), not a traceback; VTMLIR_DEBUG=1 adds the traceback."""
    script = tmp_path / "crash.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'python')!r})\n"
        "from vtmlir.ir_utils import walk_ops\n"
        "from vtmlir.passes.registry import Pass, register_pass\n"
        "@register_pass\n"
        "class Crash(Pass):\n"
        "    name = 'test-crash'\n"
        "    summary = 'always raises'\n"
        "    def run(self, module):\n"
        "        for op in walk_ops(module, 'tensor.extract_slice'):\n"
        "            raise KeyError('boom')\n"
        "from vtmlir.cli.vt_opt import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script), "--test-crash"], input=GOOD, capture_output=True, text=True, timeout=120
    )
    assert_clean_failure(proc, code=1)
    assert proc.stderr.startswith(
        "<stdin>:2:8: error: vtmlir pass 'test-crash' failed on this 'tensor.extract_slice' op: "
        "internal error: KeyError: 'boom' (a bug in vtmlir"), proc.stderr
    debug = subprocess.run([sys.executable, str(script), "--test-crash"], input=GOOD, capture_output=True,
                           text=True, timeout=120, env={**os.environ, "VTMLIR_DEBUG": "1"})
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
