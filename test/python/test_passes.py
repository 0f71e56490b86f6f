"""The pass registry, typed options, mixed pipelines, and `vt-stats` (also on a torch-imported model)."""

from __future__ import annotations

import json

import pytest
from torch_mlir import ir

from vtmlir.errors import VtmlirError
from vtmlir.frontend import parse_mlir
from vtmlir.passes import Option, Pass, PassFailure, all_passes, get_pass, parse_pipeline, register_pass, run_pipeline
from vtmlir.passes import registry
from vtmlir.passes.vt_stats import COMPUTE, DATA_MOVEMENT, VIEW, VtStats, collect_stats

SNIPPET = """\
#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func @f(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %cache: tensor<16x64xf32>) -> (tensor<8x32xf32>, tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<8x32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<8x32xf32>) -> tensor<8x32xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x64xf32>, tensor<64x32xf32>) outs(%acc : tensor<8x32xf32>) -> tensor<8x32xf32>
  %kv = tensor.insert_slice %x into %cache[8, 0] [8, 64] [1, 1] : tensor<8x64xf32> into tensor<16x64xf32>
  %tinit = tensor.empty() : tensor<64x8xf32>
  %t = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x64xf32>) outs(%tinit : tensor<64x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<64x8xf32>
  %v = tensor.expand_shape %x [[0], [1, 2]] output_shape [8, 4, 16] : tensor<8x64xf32> into tensor<8x4x16xf32>
  return %mm, %kv, %t, %v : tensor<8x32xf32>, tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x4x16xf32>
}
"""


@pytest.fixture
def module():
    return parse_mlir(SNIPPET, "snippet.mlir")


@pytest.fixture
def scratch_registry():
    """Register test passes without leaking them into other tests."""
    before = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(before)


# -- registry ------------------------------------------------------------------------------------


def test_builtin_passes_are_registered_lazily_under_their_names():
    for name, module_name in registry._BUILTIN_PASSES.items():
        cls = get_pass(name)
        assert cls.name == name and cls.__module__ == module_name
        assert cls.summary and "\n" not in cls.summary
    assert get_pass("vt-stats") is VtStats
    assert "vt-stats" in all_passes()


#: Area prefixes a pass name may drop in its file name inside the area's package (vt-build-vtog in
#: vtc/build_vtog.py); a generic pass's file carries the whole name (passes/vt_stats.py).
AREAS = ("vt", "layout", "temco", "codegen", "codegen_gpu", "dvm")


def test_one_pass_per_module_named_after_it():
    """A newcomer finds a pass's file from its name alone."""
    modules = list(registry._BUILTIN_PASSES.values())
    for name, module_name in registry._BUILTIN_PASSES.items():
        stem, flat = module_name.rsplit(".", 1)[1], name.replace("-", "_")
        assert stem == flat or any(flat == f"{area}_{stem}" for area in AREAS), (name, module_name)
        assert modules.count(module_name) == 1, f"{module_name} holds several passes"


def test_unknown_pass_name():
    with pytest.raises(VtmlirError, match="'nope' is not a registered vtmlir pass"):
        get_pass("nope")


def test_register_pass_checks_the_class(scratch_registry):
    with pytest.raises(TypeError, match="area-verb-object"):

        @register_pass
        class BadName(Pass):
            name = "Bad_Name"
            summary = "x"

    with pytest.raises(TypeError, match="summary"):

        @register_pass
        class NoSummary(Pass):
            name = "test-no-summary"

    with pytest.raises(TypeError, match="registered twice"):

        @register_pass
        class Duplicate(Pass):
            name = "vt-stats"
            summary = "x"

    with pytest.raises(TypeError, match="clashes"):

        @register_pass
        class Clash(Pass):
            name = "test-clash"
            summary = "x"
            options = (Option("run", bool, False),)


# -- options -------------------------------------------------------------------------------------


class _Typed(Pass):
    name = "test-typed"
    summary = "a pass with one option of each type"
    options = (
        Option("flag", bool, False, "a bool"),
        Option("count", int, 3, "an int"),
        Option("ratio", float, 0.5, "a float"),
        Option("label", str, "", "a string"),
        Option("sizes", list[int], (), "ints"),
        Option("names", list[str], (), "strings"),
    )


def test_option_text_parsing():
    p = _Typed.from_options("flag count=0x10 ratio=2 label='a b' sizes=1,2,3 names={x,y}")
    assert (p.flag, p.count, p.ratio, p.label, p.sizes, p.names) == (True, 16, 2.0, "a b", [1, 2, 3], ["x", "y"])
    assert _Typed.from_options("flag=false").flag is False
    assert _Typed.from_options("").count == 3
    # Defaults are not shared between instances.
    a, b = _Typed(), _Typed()
    a.sizes.append(1)
    assert b.sizes == []


def test_option_round_trip_through_pipeline_text():
    p = _Typed.from_options("flag count=7 label='a b' sizes=4,5")
    assert p.pipeline_text() == 'test-typed{flag=true count=7 label="a b" sizes=4,5}'
    text = p.pipeline_text()[len("test-typed{") : -1]
    assert _Typed.from_options(text).option_values() == p.option_values()
    assert _Typed().pipeline_text() == "test-typed"


@pytest.mark.parametrize(
    "text, message",
    [
        ("colour=red", "no such option 'colour' for pass 'test-typed' (valid options: flag, count, ratio"),
        ("count=many", "invalid value 'many' for option 'count' of pass 'test-typed': expected an integer"),
        ("flag=perhaps", "expected a boolean"),
        ("ratio=fast", "expected a number"),
        ("sizes=1,x", "expected a comma-separated list of integers"),
        ("count", "option 'count' of pass 'test-typed' requires a value"),
        ("label='open", "unterminated quote"),
    ],
)
def test_option_errors(text, message):
    with pytest.raises(VtmlirError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _Typed.from_options(text)


def test_constructor_keywords_are_typed():
    assert _Typed(count=2, sizes=[1]).count == 2
    with pytest.raises(VtmlirError, match="expected int"):
        _Typed(count="2")
    with pytest.raises(VtmlirError, match="no such option 'bogus'"):
        _Typed(bogus=1)


# -- pipelines -----------------------------------------------------------------------------------


def test_parse_pipeline_forms():
    p = parse_pipeline("builtin.module(vt-stats{json=true}, func.func(canonicalize, cse), cse)")
    assert p.text() == "builtin.module(vt-stats{json=true},func.func(canonicalize,cse),cse)"
    assert [type(x).__name__ for x in p.vtmlir_passes] == ["VtStats"]
    assert p.vtmlir_passes[0].json is True
    assert parse_pipeline("vt-stats,canonicalize").text() == "builtin.module(vt-stats,canonicalize)"
    assert parse_pipeline("").elements == []


@pytest.mark.parametrize(
    "text, message",
    [
        ("func.func(vt-stats)", "1:11: error: vtmlir pass 'vt-stats' runs on 'builtin.module' and cannot be nested"),
        ("cse, nope", "1:6: error: 'nope' does not refer to a registered pass or pass pipeline"),
        ("vt-stats{bogus}", "1:1: error: no such option 'bogus' for pass 'vt-stats'"),
        ("canonicalize{max-iterations=x}", "invalid options 'max-iterations=x' for pass 'canonicalize'"),
        ("builtin.module(cse", "encountered unbalanced parentheses"),
        ("convert-torch-to-linalg", "nest it, as in 'func.func(convert-torch-to-linalg)'"),
        ("vt-stats{json", "missing '}'"),
    ],
)
def test_parse_pipeline_errors(text, message):
    with pytest.raises(VtmlirError) as info:
        parse_pipeline(text)
    first = str(info.value).splitlines()[0]
    assert first.startswith("<pass-pipeline>:") and message in first, str(info.value)


def test_implicit_nesting_for_pass_flags():
    pm = parse_pipeline("convert-torch-to-linalg", implicit_nesting=True).to_pass_manager()
    assert "func.func(convert-torch-to-linalg" in str(pm)


def test_mixed_pipeline_runs_in_order(module, scratch_registry):
    seen = []

    @register_pass
    class Record(Pass):
        name = "test-record"
        summary = "records how many extract/insert slices it sees"
        options = (Option("tag", str, "", "label"),)

        def run(self, op):
            seen.append((self.tag, len(collect_stats(op).ops)))

    run_pipeline(module, "test-record{tag=before}, func.func(canonicalize), cse, test-record{tag=after}")
    assert [tag for tag, _ in seen] == ["before", "after"]
    assert seen[0][1] == seen[1][1] == 5


def test_pass_errors_become_mlir_diagnostics(module, scratch_registry):
    @register_pass
    class Reject(Pass):
        name = "test-reject"
        summary = "fails on the first linalg.matmul"

        def run(self, op):
            found = []
            op.walk(lambda o: (found.append(o) if o.name == "linalg.matmul" else None) or ir.WalkResult.ADVANCE)
            raise PassFailure("matmul not supported here", found[0])

    with pytest.raises(VtmlirError) as info:
        run_pipeline(module, "test-reject")
    assert str(info.value).startswith("snippet.mlir:7:9: error: matmul not supported here")

    @register_pass
    class Emit(Pass):
        name = "test-emit"
        summary = "emits an error and carries on"

        def run(self, op):
            self.emit_error(op, "first problem")

    with pytest.raises(VtmlirError, match="error: first problem"):
        run_pipeline(module, "test-emit")


def test_print_ir_after_all(module, capfd):
    run_pipeline(module, "vt-stats{report=-}, cse", print_ir_after_all=True)
    out, err = capfd.readouterr()
    assert "IR Dump After VtStats: vt-stats" in err
    assert "IR Dump After CSE" in err
    assert "vt-stats report" in out and "vt-stats report" not in err  # report=- is stdout


# -- vt-stats ------------------------------------------------------------------------------------


def test_vt_stats_classification(module):
    report = collect_stats(module)
    f = report.function("f")
    kinds = [(o.op, o.kind, o.category, o.bytes) for o in f.ops]
    assert kinds == [
        ("linalg.fill", COMPUTE, "fill", None),
        ("linalg.matmul", COMPUTE, "matmul", None),
        ("tensor.insert_slice", DATA_MOVEMENT, "insert-slice", 8 * 64 * 4),
        ("linalg.generic", DATA_MOVEMENT, "transpose", 64 * 8 * 4),
        ("tensor.expand_shape", VIEW, "reshape", 0),
    ]
    assert (f.compute, f.data_movement, f.view, f.bytes_moved) == (2, 2, 1, 4096)
    assert f.ops[1].location == "snippet.mlir:7:9"
    assert report.totals()["bytes_moved"] == 4096


def test_vt_stats_leaves_ir_alone_unless_annotate(module):
    before = str(module)
    run_pipeline(module, "vt-stats{report=/dev/null}")
    assert str(module) == before
    run_pipeline(module, "vt-stats{annotate report=/dev/null}")
    text = str(module)
    assert 'vt.stats.kind = "view"' in text and "vt.stats.bytes = 2048 : i64" in text


def test_pass_results_are_returned_not_kept_on_the_pass(module):
    """A pass's report reaches the caller as `run`'s return value / `run_pipeline`'s results; the
    pass instance holds its options only."""
    pipeline = parse_pipeline("vt-stats, cse, vt-stats{annotate}")
    results = run_pipeline(module, pipeline)
    assert [r.name for r in results] == ["vt-stats", "vt-stats"]
    assert results.report("vt-stats") is results[-1].report
    assert results.report("vt-stats").totals()["bytes_moved"] == 4096
    assert len(results.reports("vt-stats")) == 2
    with pytest.raises(VtmlirError, match="did not run"):
        results.report("vt-build-vtog")
    for inst in pipeline.vtmlir_passes:
        assert set(vars(inst)) == {"_failed", "json", "report", "annotate"}


def test_vt_stats_json_report(module, tmp_path):
    out = tmp_path / "r.json"
    run_pipeline(module, f"vt-stats{{json=true report={out}}}")
    data = json.loads(out.read_text())
    assert data["totals"] == {
        "compute": 2,
        "data_movement": 2,
        "view": 1,
        "other": 0,
        "bytes_moved": 4096,
        "dynamic": 0,
        "functions": 1,
    }
    assert data["functions"][0]["ops"][2]["op"] == "tensor.insert_slice"


def test_vt_stats_bad_output_path_is_a_diagnostic(module, tmp_path):
    with pytest.raises(VtmlirError, match="vt-stats: cannot write"):
        run_pipeline(module, f"vt-stats{{report={tmp_path}/missing/dir/r.txt}}")


def test_vt_stats_on_torch_model():
    torch = pytest.importorskip("torch")
    from vtmlir.frontend import import_torch

    class Block(torch.nn.Module):
        def forward(self, x, y):
            t = x.transpose(0, 1)  # 16x8: linalg.transpose
            r = t.reshape(4, 32)  # collapse + expand: views
            c = torch.cat([r, y], dim=0)  # 8x32: tensor.concat
            s = c[2:6]  # 4x32: tensor.extract_slice
            return torch.matmul(s, s.t()) + 1.0

    module = import_torch(Block(), torch.randn(8, 16), torch.randn(4, 32))
    report = collect_stats(module)
    ops = [(o.op, o.kind) for o in report.ops]
    assert ("linalg.transpose", DATA_MOVEMENT) in ops
    assert ("tensor.concat", DATA_MOVEMENT) in ops
    assert ("tensor.extract_slice", DATA_MOVEMENT) in ops
    assert ("linalg.matmul", COMPUTE) in ops
    assert report.count(VIEW) >= 1
    by_op = {o.op: o.bytes for o in report.ops}
    assert by_op["tensor.concat"] == 8 * 32 * 4
    assert by_op["tensor.extract_slice"] == 4 * 32 * 4
    assert report.count(DATA_MOVEMENT) == 4  # two transposes (x.T and s.T), concat, slice
    assert report.bytes_moved == 16 * 8 * 4 + 8 * 32 * 4 + 4 * 32 * 4 + 32 * 4 * 4
