"""The zoo's `hub` family: keras-hub's Keras-3 backbones, tiny configurations, random weights.

keras-hub builds its transformers from Keras-3 layers in ways the layer models
here do not: T5's relative position buckets and additive masks, rotary
embeddings (Llama, RoFormer), grouped-query attention, ALiBi (Bloom),
DeBERTa's disentangled attention, FNet's Fourier mixing, Qwen3's sliding
window (a band whose width run time clips), Mixtral's top-2 experts, RWKV-7's
recurrence, ViT's class token tiled over the batch, Swin's shifted windows,
SegFormer's reduced attention, HGNetV2's stacked zero pads.
Each is built from its constructor (no preset is downloaded), two layers of
width 32, and frozen over batch 2 and 16 tokens (32 x 32 images); `_dyn`
variants leave the batch and the length (the batch for images) to run time,
which keeps the shape arithmetic TF folds away for fixed sizes. Needs:

    pip install --no-deps keras-hub==0.32.0 regex kagglehub kagglesdk==0.1.28 pyyaml tokenizers

A model whose package is missing is reported as not built, with that command.
"""
from __future__ import annotations

import importlib.util
from typing import Any, Callable, Sequence

import numpy as np

from tools.make_fixtures import Fixture, freeze_concrete_function, seed_everything

INSTALL = "pip install --no-deps keras-hub==0.32.0 regex kagglehub kagglesdk==0.1.28 pyyaml tokenizers"
BATCH, TOKENS, SIDE = 2, 16, 32
_TEXT = dict(vocabulary_size=100, num_layers=2, hidden_dim=32, intermediate_dim=64)
_MASKED = ("token_ids", "padding_mask")
_SEGMENTED = ("token_ids", "segment_ids", "padding_mask")
_SEQ2SEQ = ("encoder_token_ids", "encoder_padding_mask", "decoder_token_ids", "decoder_padding_mask")


class PackageMissing(RuntimeError):
    """keras-hub is not installed."""


def _models() -> Any:
    if importlib.util.find_spec("keras_hub") is None:
        raise PackageMissing(f"the hub family needs keras-hub: {INSTALL}")
    import keras_hub

    return keras_hub.models


def _token_feed(name: str, rng: np.random.RandomState) -> np.ndarray:
    """Token ids; a padding mask with the second row padded after 11 tokens; two segments."""
    if name.endswith("padding_mask"):
        mask = np.ones((BATCH, TOKENS), np.int32)
        mask[1, 11:] = 0
        return mask
    if name.endswith("segment_ids"):
        return (np.arange(TOKENS)[None, :] >= TOKENS // 2).astype(np.int32).repeat(BATCH, 0)
    return rng.randint(0, _TEXT["vocabulary_size"], (BATCH, TOKENS)).astype(np.int32)


def _frozen(make: Callable[[], Any], specs: Sequence[Any], call: Callable[..., Any], seed: int):
    """The backbone `make()` builds, called through `call(model, *args)` and frozen over `specs`."""
    import keras
    import tensorflow as tf

    seed_everything(seed)
    keras.utils.set_random_seed(seed)
    model = make()

    def serve(*args):
        return tf.identity(call(model, *args), name="output")

    return freeze_concrete_function(tf.function(serve, input_signature=list(specs)).get_concrete_function())


def _text(make: Callable[[], Any], inputs: Sequence[str] = _MASKED, output: str = "", dynamic: bool = False,
          seed: int = 9000) -> Callable[[], Fixture]:
    """A text backbone over int32 `inputs`; `output` picks one of a dict's results."""
    def build() -> Fixture:
        models = _models()
        import tensorflow as tf

        specs = [tf.TensorSpec([None, None] if dynamic else [BATCH, TOKENS], tf.int32, name=n) for n in inputs]

        def call(model, *args):
            out = model(dict(zip(inputs, args)), training=False)
            return out[output] if output else out

        graph_def, names, outputs = _frozen(lambda: make(models), specs, call, seed)
        rng = np.random.RandomState(seed + 1)
        feeds = {name: _token_feed(kind, rng) for kind, name in zip(inputs, names)}
        return Fixture(graph_def, names, outputs, feeds, "keras-hub text backbone")
    return build


def _image(make: Callable[[], Any], dynamic: bool = False, seed: int = 9100) -> Callable[[], Fixture]:
    """An image backbone over [batch, 32, 32, 3]; a dict's last result by name."""
    def build() -> Fixture:
        models = _models()
        import tensorflow as tf

        spec = tf.TensorSpec([None if dynamic else BATCH, SIDE, SIDE, 3], tf.float32, name="images")

        def call(model, images):
            out = model(images, training=False)
            return out[sorted(out)[-1]] if isinstance(out, dict) else out

        graph_def, names, outputs = _frozen(lambda: make(models), [spec], call, seed)
        pixels = np.random.RandomState(seed + 1).uniform(-1, 1, (BATCH, SIDE, SIDE, 3)).astype(np.float32)
        return Fixture(graph_def, names, outputs, {names[0]: pixels}, "keras-hub image backbone")
    return build


def _whisper() -> Fixture:
    """Whisper: float log-mel features into the encoder, tokens into the decoder."""
    models = _models()
    import tensorflow as tf

    specs = [tf.TensorSpec([BATCH, 32, 16], tf.float32, name="encoder_features"),
             tf.TensorSpec([BATCH, TOKENS], tf.int32, name="decoder_token_ids"),
             tf.TensorSpec([BATCH, TOKENS], tf.int32, name="decoder_padding_mask")]

    def make():
        return models.WhisperBackbone(num_heads=2, num_mels=16, max_encoder_sequence_length=32,
                                         max_decoder_sequence_length=TOKENS, **_TEXT)

    def call(model, features, ids, mask):
        return model({"encoder_features": features, "decoder_token_ids": ids, "decoder_padding_mask": mask},
                     training=False)["decoder_sequence_output"]

    graph_def, names, outputs = _frozen(make, specs, call, 9200)
    rng = np.random.RandomState(9201)
    values = [rng.uniform(-1, 1, (BATCH, 32, 16)).astype(np.float32), _token_feed("token_ids", rng),
              _token_feed("padding_mask", rng)]
    return Fixture(graph_def, names, outputs, dict(zip(names, values)), "keras-hub Whisper backbone")


def _vit(m: Any) -> Any:
    return m.ViTBackbone(image_shape=(SIDE, SIDE, 3), patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                         mlp_dim=64)


def _mit(m: Any) -> Any:
    return m.MiTBackbone(layerwise_depths=[1, 1], num_layers=2, layerwise_num_heads=[1, 2],
                         layerwise_sr_ratios=[2, 1], max_drop_path_rate=0.0, layerwise_patch_sizes=[7, 3],
                         layerwise_strides=[4, 2], hidden_dims=[16, 32], image_shape=(SIDE, SIDE, 3))


def _swin(m: Any) -> Any:
    return m.SwinTransformerBackbone(image_shape=(SIDE, SIDE, 3), patch_size=4, embed_dim=16, depths=[1, 1],
                                     num_heads=[1, 2], window_size=4)


def _t5(m: Any) -> Any:
    return m.T5Backbone(num_heads=2, dropout=0.0, **_TEXT)


def _qwen3(m: Any) -> Any:
    return m.Qwen3Backbone(num_query_heads=4, num_key_value_heads=2, head_dim=8, **_TEXT)


def _hgnet(m: Any) -> Any:
    return m.HGNetV2Backbone(depths=[1, 1], embedding_size=16, hidden_sizes=[32, 64], stem_channels=[3, 8, 16],
                             hidden_act="relu", use_learnable_affine_block=True,
                             stackwise_stage_filters=[[16, 8, 32, 1, 2, 3], [32, 16, 64, 1, 2, 3]],
                             apply_downsample=[False, True], use_lightweight_conv_block=[False, True],
                             image_shape=(SIDE, SIDE, 3))


def _deberta(m: Any) -> Any:
    return m.DebertaV3Backbone(num_heads=2, max_sequence_length=TOKENS, bucket_size=8, **_TEXT)


# name -> builder, in the report's order
BUILDERS: dict[str, Callable[[], Fixture]] = {
    "hub_bert_dyn": _text(lambda m: m.BertBackbone(num_heads=2, max_sequence_length=TOKENS, **_TEXT), _SEGMENTED,
                          "sequence_output", dynamic=True),
    "hub_gpt2": _text(lambda m: m.GPT2Backbone(num_heads=2, max_sequence_length=TOKENS, **_TEXT)),
    "hub_llama_dyn": _text(lambda m: m.LlamaBackbone(num_query_heads=4, num_key_value_heads=2, **_TEXT),
                           dynamic=True),
    "hub_bloom": _text(lambda m: m.BloomBackbone(num_heads=2, **_TEXT)),
    "hub_t5": _text(_t5, _SEQ2SEQ, "decoder_sequence_output"),
    "hub_t5_dyn": _text(_t5, _SEQ2SEQ, "decoder_sequence_output", dynamic=True),
    "hub_deberta_v3": _text(_deberta),
    "hub_fnet": _text(lambda m: m.FNetBackbone(max_sequence_length=TOKENS, **_TEXT), ("token_ids", "segment_ids"),
                      "sequence_output"),
    "hub_qwen3_dyn": _text(_qwen3, dynamic=True),
    "hub_mixtral": _text(lambda m: m.MixtralBackbone(num_query_heads=4, num_key_value_heads=2, num_experts=4, top_k=2,
                                                     sliding_window=8, **_TEXT)),
    "hub_rwkv7": _text(lambda m: m.RWKV7Backbone(hidden_size=32, head_size=16, num_layers=2, vocabulary_size=100,
                                                 intermediate_dim=64, gate_lora=8, mv_lora=8, aaa_lora=8,
                                                 decay_lora=8)),
    "hub_whisper": _whisper,
    "hub_vit_dyn": _image(_vit, dynamic=True),
    "hub_mit": _image(_mit),
    "hub_swin": _image(_swin),
    "hub_hgnetv2": _image(_hgnet),
}
