"""Dynamic import (issue 7 point 1), `dvm-fuse` symbol-deduction fusion (point 2) and the fused
groups run as DVM kernels (`runner.DvmFunction`) against PyTorch on random shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.export import Dim

import vtmlir
from vtmlir.dvm.fuse import CUBE, VECTOR, fuse_module, report
from vtmlir.dvm.runner import DvmFunction
from vtmlir.errors import VtmlirError
from vtmlir.frontend.torch_import import shape_symbols
from vtmlir.models.bert import build_bert_encoder, dynamic_shapes


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class LayerNormResidual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(16)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-1, 1)

    def forward(self, x):
        return self.ln(x) * 2 + x


BATCH = Dim("batch", min=1, max=1024)
SEQ = Dim("seq", min=1, max=512)


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    model = MLP().eval()
    return model, vtmlir.import_torch(model, torch.randn(4, 16), dynamic_shapes={"x": {0: BATCH}})


@pytest.fixture(scope="module")
def layernorm():
    torch.manual_seed(0)
    model = LayerNormResidual().eval()
    return model, vtmlir.import_torch(model, torch.randn(2, 8, 16), dynamic_shapes={"x": {0: BATCH, 1: SEQ}})


def test_dynamic_import_has_question_marks_and_symbols(mlp, layernorm):
    _, m = mlp
    assert "tensor<?x16xf32>" in str(m) and "tensor<?x8xf32>" in str(m)
    syms = shape_symbols(m)
    (name, (lo, hi, user)), = syms.symbols.items()
    assert (lo, hi, user) == (1, 1024, "batch")
    assert syms.args == ((name, "16"),) and syms.results == ((name, "8"),)
    _, m = layernorm
    syms = shape_symbols(m)
    by_user = {u: n for n, (_, _, u) in syms.symbols.items()}
    assert set(by_user) == {"batch", "seq"}
    assert syms.args == ((by_user["batch"], by_user["seq"], "16"),) == syms.results


def test_torch_level_keeps_torch_mlirs_symbolic_shape_ops():
    m = vtmlir.import_torch(MLP(), torch.randn(4, 16), dynamic_shapes={"x": {0: BATCH}}, output_type="torch")
    text = str(m)
    assert "torch.symbolic_int" in text and "torch.bind_symbolic_shape" in text
    assert shape_symbols(m).args[0][1] == "16"


def test_static_import_has_no_symbol_table():
    m = vtmlir.import_torch(MLP(), torch.randn(4, 16))
    assert shape_symbols(m).symbols == {} and "vtmlir.shape_symbols" not in str(m)


def test_fuse_layernorm_is_one_vector_kernel_over_the_import_symbols(layernorm):
    _, mod = layernorm
    fusions = fuse_module(mod)
    (g,) = fusions[0].groups
    syms = {u: n for n, (_, _, u) in shape_symbols(mod).symbols.items()}
    assert g.kind == VECTOR and g.domain == (syms["batch"], syms["seq"], "16")
    names = [fusions[0].ops[i].name for i in g.ops]
    assert names.count("linalg.generic") == len(names) >= 10
    assert 'dvm.kind = "vector"' in str(mod)


def test_fuse_mlp_matmul_epilogues(mlp):
    _, m = mlp
    fusion = fuse_module(m)[0]
    assert [(g.kind, len(g.ops)) for g in fusion.groups] == [(CUBE, 3), (CUBE, 2)]
    text = report([fusion])
    assert "kernel 0: cube-vector [pattern]" in text and "linalg.matmul x1, linalg.generic x2" in text


@pytest.mark.parametrize("which", ["mlp", "layernorm"])
def test_fused_kernels_match_torch_on_random_shapes(which, mlp, layernorm):
    model, m = mlp if which == "mlp" else layernorm
    fn = DvmFunction(m)
    rng = np.random.default_rng(1)
    for _ in range(4):
        shape = (int(rng.integers(1, 70)), 16) if which == "mlp" else \
            (int(rng.integers(1, 6)), int(rng.integers(1, 20)), 16)
        x = rng.standard_normal(shape).astype(np.float32)
        (out,) = fn(x)
        ref = model(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=2e-5)
    # one compile (tiling + encoding) per kernel and new shape
    assert all(len(k.cache) == 4 for k in fn.kernels)


def test_bert_encoder_with_varying_batch_matches_torch():
    model, (x,) = build_bert_encoder(batch=2, seq=8, layers=1, hidden=32, heads=2, ffn=64)
    m = vtmlir.import_torch(model, x, dynamic_shapes=dynamic_shapes())
    fn = DvmFunction(m)
    kinds = [g.kind for g in fn.fusion.groups]
    assert kinds.count(CUBE) == 4 and kinds.count(VECTOR) >= 4
    assert any(len(g.ops) >= 15 for g in fn.fusion.groups)  # residual + LayerNorm in one kernel
    rng = np.random.default_rng(2)
    for batch in (1, 3):
        xb = rng.standard_normal((batch, 8, 32)).astype(np.float32)
        (out,) = fn(xb)
        ref = model(torch.from_numpy(xb)).detach().numpy()
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-4)


def test_op_without_an_instruction_is_named():
    class Sin(torch.nn.Module):
        def forward(self, x):
            return torch.sin(x) + 1

    m = vtmlir.import_torch(Sin(), torch.randn(4, 8), dynamic_shapes={"x": {0: BATCH}})
    with pytest.raises(VtmlirError, match="no Table 1 instruction for 'math.sin'"):
        DvmFunction(m)


def _ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the f32 spacing at the correctly rounded value."""
    rounded = exact.astype(np.float32)
    return np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(rounded)).astype(np.float64)


@pytest.mark.parametrize("native", [False, True])
def test_erf_is_the_static_paths_polynomial(native):
    """`math.erf` (GELU's) runs as the polynomial of `codegen-approximate-math` in Table 1
    instructions: within 4 ulp of the correctly rounded value (math.erf in f64) over both
    intervals and beyond, the special values exact, and GELU against PyTorch."""
    import math

    class Erf(torch.nn.Module):
        def forward(self, x):
            return torch.erf(x)

    m = vtmlir.import_torch(Erf(), torch.randn(4, 8), dynamic_shapes={"x": {0: BATCH}})
    fn = DvmFunction(m, native=native)
    x = np.concatenate([np.linspace(-5, 5, 4001), np.geomspace(1e-30, 0.5, 999), [0.0, -0.0, 0.999999, 1.0,
                        3.91, 3.92, 3.93, 100.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    x = np.resize(x, (len(x) // 8 + 1, 8))
    (got,) = fn(x)
    exact = np.vectorize(math.erf)(x.astype(np.float64))
    finite = np.isfinite(x)
    assert _ulp_error(got[finite], exact[finite]).max() <= 4
    np.testing.assert_allclose(got[finite], torch.erf(torch.from_numpy(x)).numpy()[finite], rtol=2e-6, atol=1e-7)
    assert np.isnan(got[np.isnan(x)]).all()
    np.testing.assert_array_equal(got[np.isinf(x)], np.sign(x[np.isinf(x)]))

    gelu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    fn = DvmFunction(vtmlir.import_torch(gelu, torch.randn(2, 8), dynamic_shapes={"input": {0: BATCH}}), native=native)
    for batch in (1, 5):
        xb = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32) * 3
        with torch.no_grad():
            np.testing.assert_allclose(fn(xb)[0], gelu(torch.from_numpy(xb)).numpy(), rtol=1e-5, atol=1e-6)


def test_wrong_argument_shape_is_refused(mlp):
    _, m = mlp
    with pytest.raises(VtmlirError, match=r"cannot take an array float32\[3, 15\]"):
        DvmFunction(m)(np.zeros((3, 15), np.float32))


def test_prebuild_from_the_recorded_batch_range_leaves_no_trace_for_run_time():
    model, (x,) = build_bert_encoder(batch=2, seq=8, layers=1, hidden=32, heads=2, ffn=64)
    m = vtmlir.import_torch(model, x, dynamic_shapes={"x": {0: Dim("batch", min=1, max=12)}})
    fn = DvmFunction(m)
    report = fn.prebuild()  # the import's range: batch 1..12, dry runs
    assert report["points"] == 12 and report["built"] == report["templates"] == fn.template_count() > 0
    assert all(not k.cache for k in fn.kernels)  # dry runs keep no per-shape kernel
    # ... but what each kernel compiled for, per argument layout: compiled ahead at the first call
    assert len(fn.shape_plans) == 12
    planned = {key for plan in fn.shape_plans.values() for _, key, _, _ in plan}
    rng = np.random.default_rng(5)
    for i, batch in enumerate((12, 7, 1)):
        xb = rng.standard_normal((batch, 8, 32)).astype(np.float32)
        (out,) = fn(xb)
        np.testing.assert_allclose(out, model(torch.from_numpy(xb)).detach().numpy(), rtol=1e-4, atol=2e-4)
        assert len(fn.shape_plans) == 11 - i  # the plan of this layout was used up
    assert fn.template_count() == report["templates"]  # nothing traced at run time
    # every kernel the calls ran was one the plans compiled ahead (no layout predicted wrongly)
    ran = {key for k in fn.kernels for key in k.cache} | set(fn.__dict__.get("_bmm_kernels", {}))
    assert ran and ran <= planned
    assert fn.prebuild({"b": [13]}, lambda b: [(b, 8, 32)])["points"] == 1  # an explicit space


def test_prebuild_refuses_what_it_cannot_walk(mlp):
    _, m = mlp
    with pytest.raises(VtmlirError, match="the shape space has 1024 points, more than limit=100"):
        DvmFunction(m).prebuild(limit=100)
    static = vtmlir.import_torch(MLP(), torch.randn(4, 16))
    with pytest.raises(VtmlirError, match="no recorded shape symbols"):
        DvmFunction(static).prebuild()
