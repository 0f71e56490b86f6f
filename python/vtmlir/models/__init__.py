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
`ZOO` (CPU numerics, PTX of every kernel). VTC's §7 workloads (Llama 3 / Gemma 2 decode at context
4096, YOLOv11 C3K2, ShuffleNetV2 units, EfficientViT block; `vtc_workloads.py`) live in `VTC_ZOO` for
the same reason (benchmarks/vtc.py), and the TeMCO evaluation networks (AlexNet, VGG, ResNet,
DenseNet, UNet; `temco_nets.py`) in `TEMCO_ZOO` (benchmarks/temco_memory.py). `get` finds names in
all four.
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
from . import temco_nets
from . import vtc_workloads

ZOO: "OrderedDict[str, ModelSpec]" = OrderedDict()
#: Whole networks for the layout passes (family "layout"); kept out of `ZOO` (see the docstring).
LAYOUT_ZOO: "OrderedDict[str, ModelSpec]" = OrderedDict()
#: VTC's §7 workloads at benchmark size (family "vtc", vtc_workloads.py); kept out of `ZOO` as well.
VTC_ZOO: "OrderedDict[str, ModelSpec]" = OrderedDict()
#: The TeMCO evaluation models (§4; family "temco", temco_nets.py); kept out of `ZOO` as well.
TEMCO_ZOO: "OrderedDict[str, ModelSpec]" = OrderedDict()
#: Every registry by what it is for (`vtmlir models` lists them in this order).
REGISTRIES: "dict[str, OrderedDict[str, ModelSpec]]" = {
    "zoo (tests, demo)": ZOO,
    "layout networks (VTensor)": LAYOUT_ZOO,
    "VTC workloads": VTC_ZOO,
    "TeMCO networks": TEMCO_ZOO,
}
_ALL_ZOOS = tuple(REGISTRIES.values())


def register(spec: ModelSpec, zoo: "OrderedDict[str, ModelSpec] | None" = None) -> ModelSpec:
    """Add a model to the zoo (later families register theirs the same way); `zoo=LAYOUT_ZOO` for
    whole networks."""
    zoo = ZOO if zoo is None else zoo
    if any(spec.name in registry for registry in _ALL_ZOOS):
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

for _spec in (
    ModelSpec("vtc_llama3_decode", "Llama-3-style decode layer: fused QKV, GQA 8q/2kv heads x32, "
              "rotary, KV-cache update at position 4095 (context 4096), SwiGLU 256→688; inputs "
              "x [B, 1, 256], k/v caches [B, 2, 4096, 32]", vtc_workloads.build_llama3_decode, "vtc"),
    ModelSpec("vtc_gemma2_decode", "Gemma-2-style local (window 1024) + global layer pair in decode: "
              "GQA 8q/4kv x32, soft-capping, GeGLU 256→512, context 4096; inputs x [B, 1, 256], four "
              "caches [B, 4, 4096, 32]", vtc_workloads.build_gemma2_decode, "vtc"),
    ModelSpec("vtc_yolo_c3k2", "YOLOv11 C3K2 block 32→32 ch (chunk, bottleneck, concat); input "
              "[B, 32, 64, 64]", vtc_workloads.build_yolo_c3k2, "vtc"),
    ModelSpec("vtc_shufflenet_unit", "two ShuffleNetV2 stride-1 units, 116 ch (split, concat, channel "
              "shuffle); input [B, 116, 28, 28]", vtc_workloads.build_shufflenet_unit, "vtc"),
    ModelSpec("vtc_efficientvit_block", "EfficientViT block: multi-scale ReLU linear attention "
              "(4 heads x16, 5x5 scale) + MBConv, 64 ch; input [B, 64, 32, 32]",
              vtc_workloads.build_efficientvit_block, "vtc"),
):
    register(_spec, VTC_ZOO)


for _name, (_builder, _description, _size) in temco_nets.TEMCO_MODELS.items():
    register(ModelSpec(_name, _description, _builder, "temco"), TEMCO_ZOO)


def names() -> list[str]:
    """The zoo's model names, in registration order."""
    return list(ZOO)


def get(name: str) -> ModelSpec:
    """The `ModelSpec` called `name`; a `VtmlirError` listing the available names otherwise."""
    for registry in _ALL_ZOOS:
        if name in registry:
            return registry[name]
    available = ", ".join(n for registry in _ALL_ZOOS for n in registry)
    raise VtmlirError(f"error: unknown model '{name}'; available models: {available}")


__all__ = [
    "BasicBlock",
    "Bottleneck",
    "ConvBnReluResidual",
    "ElementwiseReductionMix",
    "LAYOUT_ZOO",
    "REGISTRIES",
    "TEMCO_ZOO",
    "LlamaDecoderLayer",
    "MLP",
    "ModelSpec",
    "TransformerBlock",
    "VTC_ZOO",
    "ZOO",
    "get",
    "names",
    "randomize_batchnorm",
    "register",
]
