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

ZOO: "OrderedDict[str, ModelSpec]" = OrderedDict()


def register(spec: ModelSpec) -> ModelSpec:
    """Add a model to the zoo (later families register theirs the same way)."""
    if spec.name in ZOO:
        raise VtmlirError(f"error: model '{spec.name}' is already registered")
    ZOO[spec.name] = spec
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


def names() -> list[str]:
    """The zoo's model names, in registration order."""
    return list(ZOO)


def get(name: str) -> ModelSpec:
    """The `ModelSpec` called `name`; a `VtmlirError` listing the available names otherwise."""
    try:
        return ZOO[name]
    except KeyError:
        raise VtmlirError(
            f"error: unknown model '{name}'; available models: {', '.join(ZOO)}"
        ) from None


__all__ = [
    "BasicBlock",
    "Bottleneck",
    "ConvBnReluResidual",
    "ElementwiseReductionMix",
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
