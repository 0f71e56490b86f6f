"""The model zoo: every model builds deterministically, runs eagerly, and imports to pure
linalg-on-tensors with a function signature that matches its example inputs and outputs."""

from __future__ import annotations

import pytest
import torch
from torch_mlir import ir

import vtmlir
from vtmlir import models
from vtmlir.errors import VtmlirError

EXPECTED_MODELS = [
    "mlp",
    "conv_bn_relu_residual",
    "resnet_basic_block",
    "resnet_bottleneck_block",
    "llama_decoder_layer",
    "transformer_block",
    "elementwise_reduction_mix",
]

# Dialects that must not survive the import to the graph level (docs/design.md §3).
NON_LINALG_DIALECTS = {"torch", "torch_c", "tm_tensor"}

_MLIR_ELEMENT_TYPE = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32", torch.bool: "i1"}


def _flat_outputs(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _tensor_signature(types) -> list[tuple[tuple[int, ...], str]]:
    sig = []
    for t in types:
        rt = ir.RankedTensorType(t)
        sig.append((tuple(rt.shape), str(rt.element_type)))
    return sig


def _torch_signature(tensors) -> list[tuple[tuple[int, ...], str]]:
    return [(tuple(t.shape), _MLIR_ELEMENT_TYPE[t.dtype]) for t in tensors]


def _main_function(module: ir.Module):
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise AssertionError("imported module has no func.func @main")


def test_zoo_lists_the_foundation_models_in_order():
    assert list(models.ZOO)[: len(EXPECTED_MODELS)] == EXPECTED_MODELS
    for name, spec in models.ZOO.items():
        assert spec.name == name and spec.description


def test_unknown_model_names_the_available_ones():
    with pytest.raises(VtmlirError) as info:
        models.get("resnet9000")
    message = str(info.value)
    assert "resnet9000" in message
    for name in EXPECTED_MODELS:
        assert name in message


def test_every_registry_is_reachable_by_name_and_listed(capsys):
    from vtmlir.cli.main import main

    assert main(["models"]) == 0
    listed = capsys.readouterr().out
    for title, registry in models.REGISTRIES.items():
        assert f"# {title}" in listed and registry
        for name in registry:
            assert models.get(name) is registry[name] and name in listed


@pytest.mark.parametrize("name", list(models.ZOO))
def test_build_is_deterministic_and_batched(name):
    spec = models.get(name)
    m1, in1 = spec.build(batch=2, seed=3)
    m2, in2 = spec.build(batch=2, seed=3)
    m3, _ = spec.build(batch=2, seed=4)
    assert not m1.training
    assert all(x.shape[0] == 2 for x in in1 if x.dim() > 1)
    for a, b in zip(in1, in2):
        assert torch.equal(a, b)
    s1, s2, s3 = m1.state_dict(), m2.state_dict(), m3.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert any(not torch.equal(s1[k], s3[k]) for k in s1 if s1[k].is_floating_point())


def test_batchnorm_running_stats_are_not_the_identity():
    for name in ("conv_bn_relu_residual", "resnet_basic_block", "resnet_bottleneck_block"):
        model, _ = models.get(name).build()
        bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
        assert bns, name
        for bn in bns:
            assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
            assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))


def test_llama_layer_writes_the_kv_cache_at_its_position():
    model, (x, k_cache, v_cache) = models.get("llama_decoder_layer").build()
    with torch.no_grad():
        _, k_new, v_new = model(x, k_cache, v_cache)
    p = model.position
    for old, new in ((k_cache, k_new), (v_cache, v_new)):
        assert torch.equal(torch.cat([new[:, :, :p], new[:, :, p + 1 :]], 2), torch.cat([old[:, :, :p], old[:, :, p + 1 :]], 2))
        assert not torch.equal(new[:, :, p], old[:, :, p])


@pytest.mark.parametrize("name", list(models.ZOO))
def test_model_imports_to_linalg_with_matching_signature(name):
    model, inputs = models.get(name).build(batch=1, seed=0)
    with torch.no_grad():
        outputs = _flat_outputs(model(*inputs))
    assert all(torch.isfinite(o).all() for o in outputs)

    module = vtmlir.import_torch(model, *inputs)
    assert module.operation.verify()

    dialects: set[str] = set()

    def collect(op):
        dialects.add(op.name.split(".", 1)[0])
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    assert not dialects & NON_LINALG_DIALECTS, f"{name}: left {sorted(dialects & NON_LINALG_DIALECTS)} ops"
    assert "linalg" in dialects

    fn_type = ir.FunctionType(ir.TypeAttr(_main_function(module).attributes["function_type"]).value)
    assert _tensor_signature(fn_type.inputs) == _torch_signature(inputs)
    assert _tensor_signature(fn_type.results) == _torch_signature(outputs)


def test_llama_variants_import():
    """Separate q/k/v projections also stay pure linalg; the position-tensor form imports (its
    `index_copy` becomes `tm_tensor.scatter`, which is why the zoo bakes the position)."""
    from vtmlir.models.llama import build_llama_decoder_layer

    model, inputs = build_llama_decoder_layer(fused_qkv=False)
    text = str(vtmlir.import_torch(model, *inputs))
    assert "tensor.insert_slice" in text and "tm_tensor" not in text

    model, inputs = build_llama_decoder_layer(position_input=True)
    assert inputs[-1].dtype == torch.int64
    text = str(vtmlir.import_torch(model, *inputs))
    assert "tm_tensor.scatter" in text


def test_llama_position_forms_agree_eagerly():
    """Baked position (slice update, prefix attention) and position tensor (index_copy, masked
    attention over the whole cache) are the same layer."""
    from vtmlir.models.llama import build_llama_decoder_layer

    baked, inputs = build_llama_decoder_layer(batch=2)
    dynamic, dyn_inputs = build_llama_decoder_layer(batch=2, position_input=True)
    with torch.no_grad():
        for a, b in zip(baked(*inputs), dynamic(*dyn_inputs)):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
