"""Models users bring from libraries: Hugging Face transformers and torchvision, built from their
configs with random weights (nothing is downloaded).

These are the models of issue 19 as a user writes them (`AutoModelForCausalLM.from_config(cfg)`,
`torchvision.models.swin_t()`), at sizes that compile on a 2-core CPU: the transformers configs are
shrunk (hidden size 64, 2-3 layers, vocabulary 128), the torchvision networks keep their
architecture (`fast` entries are the same classes with smaller widths and depths, for the default
test run). They need the optional test dependencies (`pip install -e '.[test]'`: pinned
transformers and torchvision); importing this module does not import either.

    >>> from vtmlir.models.library import LIBRARY_MODELS
    >>> model, args, kwargs = LIBRARY_MODELS["gpt2"].build()
    >>> compiled = vtmlir.compile(model, *args, kwargs=kwargs)
    >>> compiled(*args, **kwargs).logits

`build()` returns `(model, args, kwargs)` -- transformers models take keyword inputs
(`attention_mask`, `past_key_values`, `decoder_input_ids`), so these specs are not `ModelSpec`s and
are not in `vtmlir.models.REGISTRIES`.

torchvision with the CPU torch (`import_torchvision`): the PyPI torchvision 0.28.0 wheel is built
for the CUDA torch; its C++ extension (`torchvision._C`: nms, roi_align, deform_conv) does not load
with the CPU torch, which torchvision tolerates (`extension._has_ops()` is False) except in
`torchvision._meta_registrations`, which registers fake kernels for those ops unconditionally and
fails at `register_fake("torchvision::nms")` ("operator torchvision::nms does not exist"). When the
extension does not load, that module is replaced by an empty one before torchvision is imported: it
only describes ops that do not exist in this process, and no classification model calls them.
transformers imports torchvision when it is installed, so `import_transformers` does the same first.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

import torch

from ._spec import randomize_batchnorm


@dataclass(frozen=True)
class LibraryModel:
    """One library model: `build(batch=1, seed=0)` returns `(model, args, kwargs)`, the model in eval
    mode with deterministic random weights for `seed`. `slow`: too slow to compile for the default
    test run (the full-size torchvision networks)."""

    name: str
    description: str
    library: str
    builder: Callable[..., tuple] = field(repr=False)
    slow: bool = False

    def build(self, batch: int = 1, seed: int = 0) -> tuple[torch.nn.Module, tuple, dict]:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model, args, kwargs = self.builder(batch)
            _randomize_zero_parameters(model)
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        return model, args, kwargs


def import_torchvision():
    """`torchvision`, importable with the CPU torch (see the module docstring)."""
    if "torchvision" not in sys.modules and not _torchvision_extension_loads():
        sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision  # deferred: torchvision is heavy; loaded on first use

    return torchvision


def import_transformers():
    """`transformers`, after `import_torchvision` where torchvision is installed (it imports it)."""
    if importlib.util.find_spec("torchvision") is not None:
        import_torchvision()
    import transformers  # deferred: transformers is heavy; loaded on first use

    return transformers


def _torchvision_extension_loads() -> bool:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_C" + suffix)
            if os.path.exists(path):
                try:
                    torch.ops.load_library(path)
                    return True
                except (OSError, RuntimeError):
                    return False
    return False


def _randomize_zero_parameters(model: torch.nn.Module) -> None:
    """Zero-initialised parameters (ViT's classification head, some biases) get random values:
    a compiler that dropped the layer would otherwise still match. BatchNorm gets random statistics."""
    randomize_batchnorm(model)
    with torch.no_grad():
        for p in model.parameters():
            if not p.any():
                p.normal_(0.0, 0.1)


# transformers: small configs of the real architectures. --------------------------------------

_VOCAB = 128
_SEQ = 8
_DECODER = dict(vocab_size=_VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=128, max_position_embeddings=64,
                bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _token_ids(batch: int, length: int = _SEQ) -> torch.Tensor:
    return torch.randint(3, _VOCAB, (batch, length))


def _causal_lm(config_class: str, **overrides):
    def build(batch):
        transformers = import_transformers()
        config = getattr(transformers, config_class)(**{**_DECODER, **overrides})
        model = transformers.AutoModelForCausalLM.from_config(config)
        return model, (_token_ids(batch),), {}

    return build


def _llama_decode_step(batch):
    """One decode step after an 8-token prefill: the next token and the prefill's DynamicCache."""
    transformers = import_transformers()
    model = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(**_DECODER)).eval()
    _randomize_zero_parameters(model)  # before the prefill, so the cache matches the final weights
    with torch.no_grad():
        cache = model(_token_ids(batch), use_cache=True).past_key_values
    return model, (_token_ids(batch, 1),), {"past_key_values": cache, "use_cache": True}


def _gpt2(batch):
    transformers = import_transformers()
    config = transformers.GPT2Config(vocab_size=_VOCAB, n_embd=64, n_layer=3, n_head=4, n_positions=64,
                                     bos_token_id=1, eos_token_id=2)
    # With position_ids but neither attention_mask nor a cache, transformers looks for packed sequences
    # with a cumsum (a tm_tensor.scan, which vtmlir lowers once issue 19's TMTensor lowering lands);
    # an attention_mask, or the default use_cache=True, avoids it.
    return (transformers.GPT2LMHeadModel(config), (_token_ids(batch),),
            {"attention_mask": torch.ones(batch, _SEQ, dtype=torch.long)})


def _bert(batch):
    transformers = import_transformers()
    config = transformers.BertConfig(vocab_size=_VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, max_position_embeddings=64)
    return transformers.BertModel(config), (_token_ids(batch),), {}


def _distilbert(batch):
    transformers = import_transformers()
    config = transformers.DistilBertConfig(vocab_size=_VOCAB, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                           max_position_embeddings=64)
    return transformers.DistilBertModel(config), (_token_ids(batch),), {}


def _t5_config(transformers):
    return transformers.T5Config(vocab_size=_VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                 decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)


def _t5_encoder(batch):
    transformers = import_transformers()
    return transformers.T5EncoderModel(_t5_config(transformers)), (_token_ids(batch),), {}


def _t5(batch):
    transformers = import_transformers()
    return (transformers.T5ForConditionalGeneration(_t5_config(transformers)), (_token_ids(batch),),
            {"decoder_input_ids": _token_ids(batch, 5)})


def _hf_vit(batch):
    transformers = import_transformers()
    config = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                    image_size=32, patch_size=8)
    return transformers.ViTModel(config), (torch.randn(batch, 3, 32, 32),), {}


def _hf_mobilevit(batch):
    transformers = import_transformers()
    # image 32: the last stage runs at 1x1, which MobileViT's unfolding resizes to its 2x2 patch by
    # bilinear interpolation (a gather of a convolution's output) and back
    config = transformers.MobileViTConfig(image_size=32, hidden_sizes=[16, 24, 32],
                                          neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32])
    return transformers.MobileViTModel(config), (torch.randn(batch, 3, 32, 32),), {}


# torchvision: the classification networks. ------------------------------------------------------

def _torchvision(constructor: str, size: int = 64, **options):
    def build(batch):
        models = import_torchvision().models
        return getattr(models, constructor)(num_classes=10, **options), (torch.randn(batch, 3, size, size),), {}

    return build


def _tv_vit(batch):
    from_tv = import_torchvision().models.vision_transformer
    model = from_tv.VisionTransformer(image_size=32, patch_size=8, num_layers=3, num_heads=2, hidden_dim=64,
                                      mlp_dim=128, num_classes=10)
    return model, (torch.randn(batch, 3, 32, 32),), {}


def _tv_swin_small(batch):
    from_tv = import_torchvision().models.swin_transformer
    model = from_tv.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                                    window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10)
    return model, (torch.randn(batch, 3, 32, 32),), {}


LIBRARY_MODELS: "OrderedDict[str, LibraryModel]" = OrderedDict(
    (spec.name, spec) for spec in (
        LibraryModel("llama", "transformers LlamaForCausalLM: 2 layers, hidden 64, GQA 4q/2kv, vocab 128; "
                     "input_ids [B, 8]", "transformers", _causal_lm("LlamaConfig")),
        LibraryModel("llama_decode", "Llama decode step: input_ids [B, 1], past_key_values = the DynamicCache of "
                     "an 8-token prefill, use_cache=True", "transformers", _llama_decode_step),
        LibraryModel("mistral", "transformers MistralForCausalLM (Llama sizes, sliding window)", "transformers",
                     _causal_lm("MistralConfig")),
        LibraryModel("qwen2", "transformers Qwen2ForCausalLM (Llama sizes, q/k/v biases)", "transformers",
                     _causal_lm("Qwen2Config")),
        LibraryModel("phi3", "transformers Phi3ForCausalLM (Llama sizes, fused qkv and gate_up)", "transformers",
                     _causal_lm("Phi3Config")),
        LibraryModel("mixtral", "transformers MixtralForCausalLM (Llama sizes, 4 experts, top 2; exported with "
                     "transformers' batched_mm experts)", "transformers",
                     _causal_lm("MixtralConfig", num_local_experts=4, num_experts_per_tok=2)),
        LibraryModel("gemma2", "transformers Gemma2ForCausalLM (Llama sizes, head_dim 16, soft-capping, "
                     "local/global layers)", "transformers", _causal_lm("Gemma2Config", head_dim=16)),
        LibraryModel("gpt2", "transformers GPT2LMHeadModel: 3 layers, n_embd 64, packed c_attn; input_ids [B, 8] "
                     "and attention_mask", "transformers", _gpt2),
        LibraryModel("bert", "transformers BertModel: 2 layers, hidden 64; input_ids [B, 8]", "transformers", _bert),
        LibraryModel("distilbert", "transformers DistilBertModel: 2 layers, dim 64; input_ids [B, 8]", "transformers",
                     _distilbert),
        LibraryModel("t5_encoder", "transformers T5EncoderModel: 2 layers, d_model 64; input_ids [B, 8]",
                     "transformers", _t5_encoder),
        LibraryModel("t5", "transformers T5ForConditionalGeneration: 2+2 layers, d_model 64; input_ids [B, 8], "
                     "decoder_input_ids [B, 5]", "transformers", _t5),
        LibraryModel("hf_vit", "transformers ViTModel: 2 layers, hidden 64, image 32, patch 8", "transformers",
                     _hf_vit),
        LibraryModel("mobilevit", "transformers MobileViTModel: hidden sizes 16/24/32, image 32 (the last stage "
                     "interpolates 1x1 to its 2x2 patch)", "transformers", _hf_mobilevit),
        LibraryModel("vit", "torchvision VisionTransformer: 3 layers, dim 64, image 32, patch 8 (nn.MultiheadAttention)",
                     "torchvision", _tv_vit),
        LibraryModel("swin_small", "torchvision SwinTransformer: embed 16, depths [2, 2], window 4, image 32",
                     "torchvision", _tv_swin_small),
    )
)
# The full-size classification networks (their own constructors, 10 classes, 64x64 images).
_TORCHVISION_NETWORKS = {
    "resnet18": "resnet18", "mobilenet_v2": "mobilenet_v2", "mobilenet_v3_small": "mobilenet_v3_small",
    "mobilenet_v3_large": "mobilenet_v3_large", "shufflenet_v2": "shufflenet_v2_x0_5",
    "squeezenet": "squeezenet1_1", "efficientnet_b0": "efficientnet_b0", "regnet_y_400mf": "regnet_y_400mf",
    "densenet121": "densenet121", "convnext_tiny": "convnext_tiny", "swin_t": "swin_t",
}
for _name, _constructor in _TORCHVISION_NETWORKS.items():
    LIBRARY_MODELS[_name] = LibraryModel(_name, f"torchvision {_constructor}, image 64", "torchvision",
                                         _torchvision(_constructor), slow=True)
