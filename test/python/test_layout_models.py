"""The whole networks of the layout zoo (VTensor §6, Table 1): registry, eager runs, one import."""

from __future__ import annotations

import pytest
import torch

import vtmlir
from vtmlir import models
from vtmlir.frontend import as_module
from vtmlir.passes import get_pass

LAYOUT_MODELS = ["resnet50", "resnet101", "resnet152", "densenet169", "mobilenet_v2", "inception", "vgg19"]


def test_layout_zoo_is_separate_from_the_per_model_test_zoo():
    assert list(models.LAYOUT_ZOO) == LAYOUT_MODELS
    assert not set(models.LAYOUT_ZOO) & set(models.ZOO)
    for name, spec in models.LAYOUT_ZOO.items():
        assert spec.family == "layout" and spec.description
        assert models.get(name) is spec


def test_depths_match_the_references():
    convs = {}
    for name in ("resnet50", "resnet101", "resnet152", "densenet169", "vgg19"):
        model, _ = models.get(name).build()
        convs[name] = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    # ResNet: 1 stem + 3 per bottleneck + 4 projections; DenseNet-169: 1 + 2*82 + 3 transitions; VGG-19: 16.
    assert convs == {"resnet50": 53, "resnet101": 104, "resnet152": 155, "densenet169": 168, "vgg19": 16}


@pytest.mark.parametrize("name", LAYOUT_MODELS)
def test_builds_deterministically_and_runs(name):
    spec = models.get(name)
    m1, (x1,) = spec.build(seed=1)
    m2, (x2,) = spec.build(seed=1)
    assert torch.equal(x1, x2) and x1.shape == (1, 3, 32, 32)
    with torch.no_grad():
        y1, y2 = m1(x1), m2(x2)
    assert y1.shape == (1, 10) and torch.isfinite(y1).all() and torch.equal(y1, y2)


@pytest.fixture(scope="module")
def vgg19():
    model, inputs = models.get("vgg19").build()
    return inputs, str(vtmlir.import_torch(model, *inputs))


def test_vgg19_imports_and_ewo_cannot_help_it(vgg19):
    """§6.5: "for networks without branches and element-wise nodes, such as VGG19, LOO cannot
    achieve performance improvement" — EWO keeps the conversion count of naive resolution."""
    module = as_module(vgg19[1])
    with module.context:
        naive = get_pass("layout-resolve")(target="paper-mkl")
        naive_report = naive.run(module.operation)
        ewo = get_pass("layout-select-ilp")(target="paper-mkl")
        ewo_report = ewo.run(module.operation)
        assert module.operation.verify()
    n, e = naive_report.totals(), ewo_report.totals()
    assert n["conversions"] == e["conversions"] == 3
    assert e["bytes"] <= n["bytes"]


def test_vgg19_blocked_layouts_are_bitwise_identical(vgg19):
    """A whole layout-zoo network under the blocked `cpu` target (nChw16c convs and max-pools, NHWC
    stem, OIhw16i16o weights folded at compile time): bitwise the output without layout passes."""
    inputs, text = vgg19
    expected = vtmlir.compile(as_module(text), opt_level=0)(*inputs)
    got = vtmlir.compile(as_module(text), pipeline="layout-select-ilp{target=cpu}, layout-materialize")(*inputs)
    assert torch.equal(got, expected)


def test_inception_time_model_ilp_stops_within_the_gap():
    """The time model's ILP of Inception (1480 binaries) proved optimality only after 60 s, past the
    time limit, so opt level 2 left its layouts as they were; HiGHS now stops within `MIP_GAP` of the
    optimum (seconds) and the layouts are chosen."""
    model, inputs = models.get("inception").build()
    module = vtmlir.import_torch(model, *inputs)
    with module.context:
        report = get_pass("layout-select-ilp")(target="cpu", cost="time").run(module.operation)
    assert report.totals()["laid_out"] > 100
    assert all(f.ilp_status == "Optimal" for f in report.functions)
