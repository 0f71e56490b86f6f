"""The vtmlir model zoo: small, real architectures in plain PyTorch with random weights.

Tests, the demo (`vtmlir demo`) and the benchmarks draw their models from here. Every entry is a
`ModelSpec`; `spec.build(batch=1, seed=0)` returns `(model, inputs)` with the model in eval mode,
deterministic weights for a given seed, and example inputs whose first dimension is `batch`. Sizes
are chosen so each model compiles and runs on a 2-core CPU in seconds; the builder functions in each
family module take keyword arguments for other sizes.

Every zoo model imports through `vtmlir.import_torch` to pure linalg-on-tensors (checked by
test/python/test_models_import.py).

    >>> from vtmlir import models
    >>> model, inputs = models.get("resnet_basic_block").build(batch=2)
    >>> list(models.ZOO)
    ['mlp', 'conv_bn_relu_residual', ...]

Families: `mlp` (MLP), `resnet` (residual conv blocks), `llama` (decode-mode decoder layer with GQA,
rotary, KV cache), `transformer` (pre-LN encoder block), `mixes` (elementwise + reduction glue).

Whole networks (family `layout`: ResNet-50/101/152, DenseNet-169, MobileNetV2, Inception, VGG-19,
`convnets.py`) live in a second registry, `LAYOUT_ZOO`: they are what the layout passes and
benchmarks/layouts.py measure (VTensor §6), and too big for the per-model tests that parametrise over
`ZOO` (CPU numerics, PTX of every kernel). `get` finds names in both.
"""

from __future__ import annotations

from collections import OrderedDict

from ..errors import VtmlirError
from ._spec import ModelSpec, randomize_batchnorm
from .llama import LlamaDecoderLayer, build_llama_decoder_layer
from .mixes import ElementwiseReductionMix, build_elementwise_reduction_mix
from .mlp import MLP, build_mlp
from .resnet import (
    BasicBlock,
    Bottleneck,
    ConvBnReluResidual,
    build_conv_bn_relu_residual,
    build_resnet_basic_block,
    build_resnet_bottleneck_block,
)
from .transformer import TransformerBlock, build_transformer_block
from . import convnets

ZOO: "OrderedDict[str, ModelSpec]" = OrderedDict()
#: Whole networks for the layout passes (family "layout"); kept out of `ZOO` (see the docstring).
LAYOUT_ZOO: "OrderedDict[str, ModelSpec]" = OrderedDict()


def register(spec: ModelSpec, zoo: "OrderedDict[str, ModelSpec] | None" = None) -> ModelSpec:
    """Add a model to the zoo (later families register theirs the same way); `zoo=LAYOUT_ZOO` for
    whole networks."""
    zoo = ZOO if zoo is None else zoo
    if spec.name in ZOO or spec.name in LAYOUT_ZOO:
        raise VtmlirError(f"error: model '{spec.name}' is already registered")
    zoo[spec.name] = spec
    return spec


for _spec in (
    ModelSpec(
        "mlp",
        "MLP 64→128→128→32, GELU and ReLU; input [B, 64]",
        build_mlp,
        "mlp",
    ),
    ModelSpec(
        "conv_bn_relu_residual",
        "conv3x3-BN-ReLU, conv3x3-BN, identity residual, ReLU; 16 ch; input [B, 16, 16, 16]",
        build_conv_bn_relu_residual,
        "resnet",
    ),
    ModelSpec(
        "resnet_basic_block",
        "ResNet BasicBlock 16→32 ch, stride 2, downsample 1x1 conv+BN; input [B, 16, 16, 16]",
        build_resnet_basic_block,
        "resnet",
    ),
    ModelSpec(
        "resnet_bottleneck_block",
        "ResNet-50 Bottleneck (v1.5) 32→16→64 ch, stride 2, projection shortcut; input [B, 32, 16, 16]",
        build_resnet_bottleneck_block,
        "resnet",
    ),
    ModelSpec(
        "llama_decoder_layer",
        "Llama decode layer: RMSNorm, fused QKV, GQA 4q/2kv heads x16, rotary, KV-cache update at "
        "position 7 (max_ctx 64), SwiGLU 64→172; inputs x [B, 1, 64], k_cache/v_cache [B, 2, 64, 16]; "
        "outputs (x', k_cache', v_cache')",
        build_llama_decoder_layer,
        "llama",
    ),
    ModelSpec(
        "transformer_block",
        "pre-LN transformer encoder block, 4 heads, dim 64, explicit attention, GELU MLP x4; "
        "input [B, 16, 64]",
        build_transformer_block,
        "transformer",
    ),
    ModelSpec(
        "elementwise_reduction_mix",
        "broadcasts, tanh/exp/log/sigmoid, log-sum-exp, softmax, mean/max/sum reductions; "
        "inputs x [B, 8, 32], y [B, 1, 32]; two outputs",
        build_elementwise_reduction_mix,
        "mixes",
    ),
):
    register(_spec)

for _spec in (
    ModelSpec("resnet50", "ResNet-50 (v1.5 bottlenecks [3,4,6,3]), stem width 16 (1/4 of the paper's); "
              "input [B, 3, 32, 32]", convnets.build_resnet50, "layout"),
    ModelSpec("resnet101", "ResNet-101 (bottlenecks [3,4,23,3]), stem width 16; input [B, 3, 32, 32]",
              convnets.build_resnet101, "layout"),
    ModelSpec("resnet152", "ResNet-152 (bottlenecks [3,8,36,3]), stem width 16; input [B, 3, 32, 32]",
              convnets.build_resnet152, "layout"),
    ModelSpec("densenet169", "DenseNet-169-style (blocks [6,12,32,32], growth 16, stem 32); "
              "input [B, 3, 32, 32]", convnets.build_densenet169, "layout"),
    ModelSpec("mobilenet_v2", "MobileNetV2 (torchvision settings, full width); input [B, 3, 32, 32]",
              convnets.build_mobilenet_v2, "layout"),
    ModelSpec("inception", "GoogLeNet-style network, 9 four-branch inception modules, half width; "
              "input [B, 3, 32, 32]", convnets.build_inception, "layout"),
    ModelSpec("vgg19", "VGG-19 (16 conv3x3+ReLU, 5 max-pools), quarter width; input [B, 3, 32, 32]",
              convnets.build_vgg19, "layout"),
):
    register(_spec, LAYOUT_ZOO)


def names() -> list[str]:
    """The zoo's model names, in registration order."""
    return list(ZOO)


def get(name: str) -> ModelSpec:
    """The `ModelSpec` called `name`; a `VtmlirError` listing the available names otherwise."""
    if name in ZOO:
        return ZOO[name]
    if name in LAYOUT_ZOO:
        return LAYOUT_ZOO[name]
    raise VtmlirError(
        f"error: unknown model '{name}'; available models: {', '.join([*ZOO, *LAYOUT_ZOO])}"
    )


__all__ = [
    "BasicBlock",
    "Bottleneck",
    "ConvBnReluResidual",
    "ElementwiseReductionMix",
    "LAYOUT_ZOO",
    "LlamaDecoderLayer",
    "MLP",
    "ModelSpec",
    "TransformerBlock",
    "ZOO",
    "get",
    "names",
    "randomize_batchnorm",
    "register",
]
