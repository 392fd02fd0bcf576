#!/usr/bin/env python
"""Build realistic TensorFlow GraphDefs used as test fixtures for gttc.

Usage::

    python tools/make_fixtures.py [--out DIR] [--big] [names...]

Without names, all small fixtures are built (plus all big ones with ``--big``).
Big fixtures are also built when they are named explicitly.  Each fixture is
written as::

    <name>.pb     binary GraphDef
    <name>.pbtxt  text-format GraphDef (only when the text is < 2 MB)
    <name>.json   inputs, outputs, dtypes/shapes, op histogram, notes
    <name>.npz    ``input:<node>`` reference feeds and ``output:<node>``
                  reference outputs computed by TensorFlow itself (the frozen
                  GraphDef imported into a fresh tf.compat.v1 Graph and run
                  in a Session on ``<node>:0``).
    <name>_<key>.npz  extra arrays some fixtures carry (the trained digits
                  models: ``_test`` held-out split, ``_calibration`` feeds).

The module is importable: ``BUILDERS`` maps fixture names to builder
functions returning a :class:`Fixture`; :func:`build` and :func:`write` are
the entry points used by tests.  TensorFlow/Keras are imported lazily inside
functions so importing this module is cheap.

Everything is seeded (python ``random``, numpy, ``tf.random.set_seed``,
``keras.utils.set_random_seed``) per fixture, so builds are reproducible and
independent of the order in which fixtures are built.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import re
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

DEFAULT_OUT_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures"
)
PBTXT_LIMIT = 2 * 1024 * 1024  # bytes of text; bigger graphs get no .pbtxt


@dataclasses.dataclass
class Fixture:
    """A frozen GraphDef plus everything a test needs to run it."""

    graph_def: Any  # tensorflow.core.framework.graph_pb2.GraphDef
    inputs: List[str]  # input (placeholder) node names
    outputs: List[str]  # output node names (tensor is "<name>:0")
    feeds: Dict[str, np.ndarray]  # input node name -> reference input
    notes: str = ""
    # extra .json keys (e.g. recorded accuracy of a trained model)
    meta: Dict[str, Any] = dataclasses.field(default_factory=dict)
    # "<key>" -> arrays written to <name>_<key>.npz (held-out data, calibration feeds)
    extra_npz: Dict[str, Dict[str, np.ndarray]] = dataclasses.field(default_factory=dict)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _tf():
    import tensorflow as tf

    return tf


def seed_everything(seed: int) -> None:
    """Seed python, numpy, TF and Keras global RNGs."""
    import random

    random.seed(seed)
    np.random.seed(seed)
    tf = _tf()
    tf.random.set_seed(seed)
    try:
        import keras

        keras.utils.set_random_seed(seed)
    except Exception:  # pragma: no cover - keras missing
        pass


def pin_tf_threads() -> bool:
    """Ask TF for one intra-op and one inter-op thread; True when that holds.

    Training results depend on how kernels split their reductions across
    threads, so the trained fixtures are only reproducible across machines
    with the thread counts fixed.  TF fixes them when its runtime starts:
    ``main`` calls this before building anything; a process that already
    ran TF with other settings gets False."""
    tf = _tf()
    threading = tf.config.threading
    try:
        threading.set_intra_op_parallelism_threads(1)
        threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # runtime already initialized: settings are frozen
        pass
    return threading.get_intra_op_parallelism_threads() == 1 and threading.get_inter_op_parallelism_threads() == 1


def op_histogram(graph_def, include_library: bool = False) -> Dict[str, int]:
    """Count op types of the top-level graph (optionally + function bodies),
    most common first."""
    c = collections.Counter(n.op for n in graph_def.node)
    if include_library:
        for f in graph_def.library.function:
            c.update(n.op for n in f.node_def)
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def run_graph_def(graph_def, feeds: Dict[str, np.ndarray], outputs: List[str]) -> Dict[str, np.ndarray]:
    """Import ``graph_def`` into a fresh tf.compat.v1 Graph and run it in a
    Session, feeding ``<input>:0`` and fetching ``<output>:0``."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=1, inter_op_parallelism_threads=1
    )
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        fetches = [g.get_tensor_by_name(_tensor_name(o)) for o in outputs]
        feed_dict = {g.get_tensor_by_name(_tensor_name(k)): v for k, v in feeds.items()}
        vals = sess.run(fetches, feed_dict=feed_dict)
    return {o: np.asarray(v) for o, v in zip(outputs, vals)}


def _tensor_name(node_or_tensor: str) -> str:
    return node_or_tensor if ":" in node_or_tensor else node_or_tensor + ":0"


def _he(rng: np.random.RandomState, shape, fan_in=None) -> np.ndarray:
    fan_in = fan_in if fan_in is not None else int(np.prod(shape[:-1]))
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def _bn_stats(rng: np.random.RandomState, c: int):
    """Random (gamma, beta, mean, variance) like a trained network's."""
    gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
    beta = rng.normal(0.0, 0.2, c).astype(np.float32)
    mean = rng.normal(0.0, 0.5, c).astype(np.float32)
    var = rng.uniform(0.5, 2.0, c).astype(np.float32)
    return gamma, beta, mean, var


def _placeholder_shape(graph_def, name):
    for n in graph_def.node:
        if n.name == name and "shape" in n.attr:
            s = n.attr["shape"].shape
            if s.unknown_rank:
                return None
            return [int(d.size) for d in s.dim]
    return None


# --------------------------------------------------------------------------
# Keras helpers
# --------------------------------------------------------------------------


def _all_layers(model):
    if hasattr(model, "_flatten_layers"):
        return list(model._flatten_layers(include_self=False, recursive=True))
    return list(model.layers)


def randomize_bn(model, rng: np.random.RandomState) -> int:
    """Give every BatchNormalization layer random gamma/beta/moving stats so
    BN folding is actually exercised.  Returns the number of BN layers."""
    import keras

    n = 0
    for layer in _all_layers(model):
        if not isinstance(layer, keras.layers.BatchNormalization):
            continue
        c = int(layer.moving_mean.shape[-1])
        gamma, beta, mean, var = _bn_stats(rng, c)
        if getattr(layer, "gamma", None) is not None:
            layer.gamma.assign(gamma)
        if getattr(layer, "beta", None) is not None:
            layer.beta.assign(beta)
        layer.moving_mean.assign(mean)
        layer.moving_variance.assign(var)
        n += 1
    return n


def freeze_keras(model, input_shape, input_name: str = "input", lower_control_flow: bool = True,
                 batch: Optional[int] = 1):
    """Wrap ``model`` in a tf.function with a fixed TensorSpec (batch 1, or
    ``batch``; None leaves it dynamic) and freeze it with
    convert_variables_to_constants_v2.

    Returns (graph_def, input_node_names, output_node_names)."""
    tf = _tf()
    spec = tf.TensorSpec([batch] + list(input_shape), tf.float32, name=input_name)

    @tf.function(input_signature=[spec])
    def serve(x):
        return model(x, training=False)

    return freeze_concrete_function(serve.get_concrete_function(), lower_control_flow)


def freeze_concrete_function(cf, lower_control_flow: bool = True):
    tf = _tf()
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    frozen = convert_variables_to_constants_v2(cf, lower_control_flow=lower_control_flow)
    gd = frozen.graph.as_graph_def()
    inputs = [t.name.split(":")[0] for t in frozen.inputs if t.dtype != tf.resource]
    outputs = []
    for t in frozen.outputs:
        node, idx = t.name.split(":")
        if idx != "0":
            raise RuntimeError(f"output {t.name} is not port 0")
        outputs.append(node)
    return gd, inputs, outputs


def canonicalize_function_names(graph_def) -> Dict[str, str]:
    """Rename library functions ``foo_frozen_1234`` -> ``foo_frozen`` (the
    numeric suffix is a process-global uid, which would make fixtures depend
    on build order) and update every func attr referring to them, in place.
    Returns the old -> new mapping."""
    funcs = graph_def.library.function
    old = sorted(f.signature.name for f in funcs)
    mapping, used = {}, set()
    for name in old:
        base = re.sub(r"_\d+$", "", name)
        new, k = base, 1
        while new in used:
            new, k = f"{base}_{k}", k + 1
        used.add(new)
        mapping[name] = new

    def fix_attr(av):
        if av.HasField("func") and av.func.name in mapping:
            av.func.name = mapping[av.func.name]
        if av.HasField("list"):
            for fa in av.list.func:
                if fa.name in mapping:
                    fa.name = mapping[fa.name]
        if av.HasField("func"):
            for v in av.func.attr.values():
                fix_attr(v)

    def fix_nodes(nodes):
        for n in nodes:
            if n.op in mapping:
                n.op = mapping[n.op]
            for av in n.attr.values():
                fix_attr(av)

    fix_nodes(graph_def.node)
    for f in funcs:
        f.signature.name = mapping[f.signature.name]
        fix_nodes(f.node_def)
        _canonicalize_arg_names(f)
        for av in f.attr.values():
            fix_attr(av)
    for gdef in graph_def.library.gradient:
        if gdef.function_name in mapping:
            gdef.function_name = mapping[gdef.function_name]
        if gdef.gradient_func in mapping:
            gdef.gradient_func = mapping[gdef.gradient_func]
    ordered = sorted(funcs, key=lambda f: f.signature.name)
    ordered = [type(f).FromString(f.SerializeToString()) for f in ordered]
    del funcs[:]
    funcs.extend(ordered)
    return mapping


def _canonicalize_arg_names(fdef) -> None:
    """Drop uid digits from argument names such as
    ``while_while_cond_8373___redundant_placeholder0`` and fix references."""
    ren = {}
    for arg in list(fdef.signature.input_arg) + list(fdef.signature.output_arg):
        new = re.sub(r"_\d+(?=___)", "", arg.name)
        if new != arg.name:
            ren[arg.name] = new
    if not ren or len(set(ren.values())) != len(ren):
        return
    taken = {a.name for a in fdef.signature.input_arg} | {n.name for n in fdef.node_def}
    if any(v in taken for v in ren.values()):
        return
    for arg in list(fdef.signature.input_arg) + list(fdef.signature.output_arg):
        arg.name = ren.get(arg.name, arg.name)
    for n in fdef.node_def:
        for i, inp in enumerate(n.input):
            ctrl = inp.startswith("^")
            head, sep, tail = inp.lstrip("^").partition(":")
            if head in ren:
                n.input[i] = ("^" if ctrl else "") + ren[head] + sep + tail
    for mp in (fdef.ret,):
        for k in list(mp.keys()):
            v = mp[k]
            head, sep, tail = v.partition(":")
            nk = ren.get(k, k)
            nv = ren.get(head, head) + sep + tail
            if nk != k:
                del mp[k]
            mp[nk] = nv


def _keras_fixture(make_model, input_shape, seed, notes, input_range=(-1.0, 1.0)):
    import keras

    keras.backend.clear_session()
    seed_everything(seed)
    model = make_model()
    rng = np.random.RandomState(seed + 1)
    nbn = randomize_bn(model, rng)
    gd, inputs, outputs = freeze_keras(model, input_shape)
    feed = np.random.RandomState(seed + 2).uniform(*input_range, size=[1] + list(input_shape))
    feeds = {inputs[0]: feed.astype(np.float32)}
    n = (
        f"{notes} Keras {keras.__version__} model '{model.name}', "
        f"{model.count_params()} params, {nbn} BatchNormalization layers with "
        "randomized gamma~U(0.5,1.5), beta~N(0,0.2), mean~N(0,0.5), var~U(0.5,2). "
        "Frozen via convert_variables_to_constants_v2 from a tf.function with "
        f"TensorSpec {[1] + list(input_shape)} float32. Keras 3 lowers BN to "
        "tf.nn.batch_normalization (Rsqrt/Mul/Sub/Add), not FusedBatchNormV3. "
        f"Reference input ~U{tuple(input_range)}."
    )
    keras.backend.clear_session()
    return Fixture(gd, inputs, outputs, feeds, n)


# --------------------------------------------------------------------------
# small fixtures
# --------------------------------------------------------------------------


def build_keras_mobilenet_v2_small() -> Fixture:
    import keras

    return _keras_fixture(
        lambda: keras.applications.MobileNetV2(
            alpha=0.35, input_shape=(96, 96, 3), weights=None, classes=10
        ),
        (96, 96, 3),
        seed=1001,
        notes="MobileNetV2(alpha=0.35, 96x96x3, classes=10, weights=None).",
    )


def build_keras_small_cnn() -> Fixture:
    import keras
    from keras import layers

    def make():
        init_b = lambda: keras.initializers.RandomNormal(stddev=0.1)  # noqa: E731
        inp = keras.Input((32, 32, 3), name="input")
        x = layers.Conv2D(16, 3, padding="same", use_bias=False, name="conv1")(inp)
        x = layers.BatchNormalization(name="conv1_bn")(x)
        x = layers.ReLU(name="conv1_relu")(x)
        y = layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw1")(x)
        y = layers.BatchNormalization(name="dw1_bn")(y)
        y = layers.ReLU(6.0, name="dw1_relu6")(y)
        y = layers.Conv2D(16, 1, use_bias=False, name="pw1")(y)
        y = layers.BatchNormalization(name="pw1_bn")(y)
        x = layers.Add(name="res_add")([x, y])
        x = layers.SeparableConv2D(
            32, 3, strides=2, padding="same", bias_initializer=init_b(), name="sep1"
        )(x)
        x = layers.BatchNormalization(name="sep1_bn")(x)
        x = layers.ReLU(name="sep1_relu")(x)
        x = layers.Conv2D(
            48, 3, strides=2, padding="valid", bias_initializer=init_b(), name="conv2"
        )(x)
        x = layers.ReLU(name="conv2_relu")(x)
        x = layers.GlobalAveragePooling2D(name="gap")(x)
        x = layers.Dense(32, bias_initializer=init_b(), name="fc1")(x)
        x = layers.BatchNormalization(name="fc1_bn")(x)
        x = layers.ReLU(name="fc1_relu")(x)
        out = layers.Dense(10, activation="softmax", bias_initializer=init_b(), name="fc2")(x)
        return keras.Model(inp, out, name="small_cnn")

    return _keras_fixture(
        make,
        (32, 32, 3),
        seed=1002,
        notes=(
            "Functional model: Conv2D+BN+ReLU, DepthwiseConv2D+BN+ReLU6, 1x1 Conv+BN, "
            "residual Add, SeparableConv2D(stride 2, bias)+BN+ReLU, Conv2D(valid, bias), "
            "GlobalAveragePooling2D, Dense+BN+ReLU, Dense softmax."
        ),
    )


def build_keras_padded_convs() -> Fixture:
    import keras
    from keras import layers

    def make():
        inp = keras.Input((48, 48, 3), name="input")
        x = layers.ZeroPadding2D(3, name="stem_pad")(inp)
        x = layers.Conv2D(16, 7, strides=2, use_bias=False, name="stem_conv")(x)
        x = layers.BatchNormalization(name="stem_bn")(x)
        x = layers.ReLU(name="stem_relu")(x)
        x = layers.ZeroPadding2D(1, name="pool_pad")(x)
        x = layers.MaxPooling2D(3, strides=2, name="pool")(x)
        y = layers.ZeroPadding2D(((0, 1), (0, 1)), name="down_pad")(x)
        y = layers.Conv2D(24, 3, strides=2, name="down_conv")(y)
        y = layers.ReLU(name="down_relu")(y)
        z = layers.ZeroPadding2D(1, name="dw_pad")(x)
        z = layers.DepthwiseConv2D(3, strides=2, use_bias=False, name="dw_conv")(z)
        z = layers.BatchNormalization(name="dw_bn")(z)
        z = layers.ReLU(6.0, name="dw_relu6")(z)
        z = layers.Conv2D(24, 1, use_bias=False, name="dw_project")(z)
        x = layers.Add(name="merge")([y, z])
        x = layers.GlobalAveragePooling2D(name="gap")(x)
        out = layers.Dense(10, activation="softmax", name="fc")(x)
        return keras.Model(inp, out, name="padded_convs")

    return _keras_fixture(
        make,
        (48, 48, 3),
        seed=1003,
        notes=(
            "ZeroPadding2D in front of convolutions, as ResNet's stem and MobileNet's stride-2 blocks have it: "
            "Pad->Conv2D(7x7/2)+BN+ReLU, Pad->MaxPool, Pad->Conv2D(3x3/2, bias)+ReLU, "
            "Pad->DepthwiseConv2D(3x3/2)+BN+ReLU6->1x1 Conv2D, Add, GlobalAveragePooling2D, Dense softmax. "
            "For the fold_pad_into_conv example plugin (examples/fold_pad_into_conv)."
        ),
    )


def build_tf1_fused_bn() -> Fixture:
    tf = _tf()
    seed = 1003
    seed_everything(seed)
    rng = np.random.RandomState(seed)
    C = lambda a, name: tf.constant(a, name=name)  # noqa: E731

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1, 32, 32, 3], name="input")

        # conv -> FusedBatchNormV3 -> Relu -> CheckNumerics -> Identity
        w1 = C(_he(rng, [3, 3, 3, 16]), "conv1/weights")
        c1 = tf.nn.conv2d(x, w1, strides=[1, 1, 1, 1], padding="SAME", name="conv1/Conv2D")
        g1, b1, m1, v1 = (C(a, f"bn1/{n}") for a, n in zip(_bn_stats(rng, 16), "gamma beta mean var".split()))
        bn1, _, _ = tf.compat.v1.nn.fused_batch_norm(
            c1, g1, b1, mean=m1, variance=v1, epsilon=1e-3, is_training=False, name="bn1/FusedBatchNormV3"
        )
        r1 = tf.nn.relu(bn1, name="relu1")
        ck1 = tf.debugging.check_numerics(r1, "relu1 has NaN/Inf", name="relu1/CheckNumerics")
        id1 = tf.identity(ck1, name="relu1/Identity")

        # conv(stride 2) + BiasAdd -> FusedBatchNorm (v1 op) -> Relu
        w2 = C(_he(rng, [3, 3, 16, 24]), "conv2/weights")
        bias2 = C(rng.normal(0, 0.1, 24).astype(np.float32), "conv2/bias")
        c2 = tf.nn.conv2d(id1, w2, strides=[1, 2, 2, 1], padding="SAME", name="conv2/Conv2D")
        c2 = tf.nn.bias_add(c2, bias2, name="conv2/BiasAdd")
        g2, b2, m2, v2 = (C(a, f"bn2/{n}") for a, n in zip(_bn_stats(rng, 24), "gamma beta mean var".split()))
        bn2 = tf.raw_ops.FusedBatchNorm(
            x=c2, scale=g2, offset=b2, mean=m2, variance=v2, epsilon=1e-3, is_training=False, name="bn2/FusedBatchNorm"
        )[0]
        r2 = tf.nn.relu(bn2, name="relu2")

        # depthwise conv -> FusedBatchNormV2 -> Relu6
        wd = C(_he(rng, [3, 3, 24, 1], fan_in=9), "dw3/depthwise_weights")
        d3 = tf.nn.depthwise_conv2d(r2, wd, strides=[1, 1, 1, 1], padding="SAME", name="dw3/depthwise")
        g3, b3, m3, v3 = (C(a, f"bn3/{n}") for a, n in zip(_bn_stats(rng, 24), "gamma beta mean var".split()))
        bn3 = tf.raw_ops.FusedBatchNormV2(
            x=d3, scale=g3, offset=b3, mean=m3, variance=v3, epsilon=1e-3, is_training=False, name="bn3/FusedBatchNormV2"
        )[0]
        r3 = tf.nn.relu6(bn3, name="relu3")
        r3 = tf.identity(r3, name="relu3/Identity")

        # depthwise conv (channel multiplier 2, stride 2) -> FusedBatchNormV3 -> Relu
        wd4 = C(_he(rng, [3, 3, 24, 2], fan_in=9), "dw4/depthwise_weights")
        d4 = tf.nn.depthwise_conv2d(r3, wd4, strides=[1, 2, 2, 1], padding="SAME", name="dw4/depthwise")
        g4, b4, m4, v4 = (C(a, f"bn4/{n}") for a, n in zip(_bn_stats(rng, 48), "gamma beta mean var".split()))
        bn4 = tf.raw_ops.FusedBatchNormV3(
            x=d4, scale=g4, offset=b4, mean=m4, variance=v4, epsilon=1e-5, is_training=False, name="bn4/FusedBatchNormV3"
        )[0]
        r4 = tf.nn.relu(bn4, name="relu4")

        # global average pool -> MatMul -> manual BN with a foldable const subgraph
        gap = tf.reduce_mean(r4, axis=[1, 2], name="gap/Mean")
        wf = C(_he(rng, [48, 32]), "fc/weights")
        mm = tf.matmul(gap, wf, name="fc/MatMul")
        gf, bf, mf, vf = (C(a, f"fc_bn/{n}") for a, n in zip(_bn_stats(rng, 32), "gamma beta moving_mean moving_variance".split()))
        eps = tf.constant(1e-3, tf.float32, name="fc_bn/epsilon")
        inv = tf.math.rsqrt(tf.add(vf, eps, name="fc_bn/add"), name="fc_bn/Rsqrt")
        scale = tf.multiply(inv, gf, name="fc_bn/mul")
        shift = tf.subtract(bf, tf.multiply(mf, scale, name="fc_bn/mul_2"), name="fc_bn/sub")
        y = tf.add(tf.multiply(mm, scale, name="fc_bn/mul_1"), shift, name="fc_bn/add_1")
        y = tf.debugging.check_numerics(y, "fc_bn output has NaN/Inf", name="fc_bn/CheckNumerics")
        y = tf.nn.relu(y, name="fc_relu")
        tf.identity(y, name="output")

    gd = g.as_graph_def()
    feeds = {"input": np.random.RandomState(seed + 2).uniform(-1, 1, [1, 32, 32, 3]).astype(np.float32)}
    notes = (
        "TF1-style graph (tf.Graph, placeholders, constant weights): Conv2D->FusedBatchNormV3(eps 1e-3)"
        "->Relu->CheckNumerics->Identity; Conv2D(stride 2)->BiasAdd->FusedBatchNorm(v1)->Relu; "
        "DepthwiseConv2dNative->FusedBatchNormV2->Relu6->Identity; DepthwiseConv2dNative(multiplier 2, "
        "stride 2)->FusedBatchNormV3(eps 1e-5)->Relu; Mean->MatMul->manual BN "
        "(x*(gamma*rsqrt(var+eps)) + (beta-mean*scale), const subgraph with AddV2/Rsqrt/Mul/Sub)"
        "->CheckNumerics->Relu->Identity 'output'. All FusedBatchNorm* have is_training=False with "
        "random stats. BatchNormWithGlobalNormalization cannot be built at the current producer "
        "version (removed in GraphDef version 9), see fixture tf1_old_batch_norm."
    )
    return Fixture(gd, ["input"], ["output"], feeds, notes)


def build_tf1_old_batch_norm() -> Fixture:
    """BatchNormWithGlobalNormalization (removed in GraphDef version 9).

    TF refuses to create the op at the current producer version, so the graph
    is built with Placeholder stand-ins which are then replaced by
    BatchNormWithGlobalNormalization NodeDefs, and versions.producer is
    lowered to 8 (TF still imports and runs that)."""
    tf = _tf()
    seed = 1004
    seed_everything(seed)
    rng = np.random.RandomState(seed)
    C = lambda a, name: tf.constant(a, name=name)  # noqa: E731

    g = tf.Graph()
    bn_specs = {}
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1, 16, 16, 3], name="input")
        w1 = C(_he(rng, [3, 3, 3, 8]), "conv1/weights")
        c1 = tf.nn.conv2d(x, w1, strides=[1, 1, 1, 1], padding="SAME", name="conv1/Conv2D")
        stats1 = [C(a, f"bn1/{n}") for a, n in zip(_bn_stats(rng, 8), "gamma beta mean var".split())]
        bn1 = tf.compat.v1.placeholder(tf.float32, [1, 16, 16, 8], name="bn1/BatchNormWithGlobalNormalization")
        bn_specs[bn1.op.name] = (c1, stats1, 1e-3, True)
        r1 = tf.nn.relu(bn1, name="relu1")
        w2 = C(_he(rng, [3, 3, 8, 8]), "conv2/weights")
        c2 = tf.nn.conv2d(r1, w2, strides=[1, 2, 2, 1], padding="SAME", name="conv2/Conv2D")
        stats2 = [C(a, f"bn2/{n}") for a, n in zip(_bn_stats(rng, 8), "gamma beta mean var".split())]
        bn2 = tf.compat.v1.placeholder(tf.float32, [1, 8, 8, 8], name="bn2/BatchNormWithGlobalNormalization")
        bn_specs[bn2.op.name] = (c2, stats2, 1e-5, False)
        r2 = tf.nn.relu(bn2, name="relu2")
        tf.identity(r2, name="output")

    gd = g.as_graph_def()
    for node in gd.node:
        if node.name not in bn_specs:
            continue
        inp, (gamma, beta, mean, var), eps, scale_after = bn_specs[node.name]
        node.op = "BatchNormWithGlobalNormalization"
        del node.input[:]
        # input order: t, m, v, beta, gamma
        node.input.extend([inp.op.name, mean.op.name, var.op.name, beta.op.name, gamma.op.name])
        node.attr.clear()
        node.attr["T"].type = tf.float32.as_datatype_enum
        node.attr["variance_epsilon"].f = eps
        node.attr["scale_after_normalization"].b = scale_after
    gd.versions.producer = 8
    gd.versions.min_consumer = 0
    feeds = {"input": np.random.RandomState(seed + 2).uniform(-1, 1, [1, 16, 16, 3]).astype(np.float32)}
    notes = (
        "Deprecated BatchNormWithGlobalNormalization (inputs t, m, v, beta, gamma). TF 2.x refuses to "
        "create it at the current producer version, so the NodeDefs were patched in and "
        "graph_def.versions.producer lowered to 8; TF still imports and runs it (reference outputs "
        "are TF's). bn1: eps 1e-3, scale_after_normalization=True; bn2: eps 1e-5, "
        "scale_after_normalization=False (gamma ignored)."
    )
    return Fixture(gd, ["input"], ["output"], feeds, notes)


def build_tf1_control_flow() -> Fixture:
    tf = _tf()
    seed = 1005
    seed_everything(seed)
    rng = np.random.RandomState(seed)

    tf.compat.v1.disable_control_flow_v2()
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [1, 8], name="input")
            # RefVariables, frozen below with the classic TF1 freezer.
            wa = tf.compat.v1.Variable(_he(rng, [8, 8]), name="wa", use_resource=False)
            wb = tf.compat.v1.Variable(_he(rng, [8, 8]), name="wb", use_resource=False)
            wl = tf.compat.v1.Variable((rng.standard_normal([8, 8]) * 0.3).astype(np.float32), name="wl", use_resource=False)
            bl = tf.compat.v1.Variable(rng.normal(0, 0.1, [8]).astype(np.float32), name="bl", use_resource=False)

            s = tf.reduce_mean(x, name="mean")
            pred_pos = tf.greater(s, 0.0, name="pred_pos")
            pred_neg = tf.logical_not(pred_pos, name="pred_neg")

            def true_fn():
                xi = tf.identity(x, name="x_true")  # Identity fed by Switch:1
                return tf.tanh(tf.matmul(xi, wa), name="t_out")

            def false_fn():
                xi = tf.identity(x, name="x_false")  # Identity fed by Switch:0
                return tf.nn.relu(tf.matmul(xi, wb), name="f_out") - 1.0

            # Two conds with opposite predicates: whatever the input, one
            # true branch and one false branch are executed.
            c1 = tf.compat.v1.cond(pred_pos, true_fn, false_fn, name="cond_pos")
            c2 = tf.compat.v1.cond(pred_neg, true_fn, false_fn, name="cond_neg")
            h0 = tf.add(c1, c2, name="h0")

            n_iter = tf.constant(5, tf.int32, name="n_iter")

            def loop_cond(i, h, acc):
                return tf.less(i, n_iter)

            def loop_body(i, h, acc):
                h = tf.tanh(tf.matmul(h, wl) + bl)
                return i + 1, h, acc + h

            _, _, acc = tf.compat.v1.while_loop(
                loop_cond, loop_body, [tf.constant(0, name="i0"), h0, tf.zeros_like(h0)], name="loop"
            )
            tf.identity(acc, name="output")
            init = tf.compat.v1.global_variables_initializer()
            with tf.compat.v1.Session(graph=g) as sess:
                sess.run(init)
                gd = tf.compat.v1.graph_util.convert_variables_to_constants(
                    sess, g.as_graph_def(), ["output"]
                )
    finally:
        tf.compat.v1.enable_control_flow_v2()

    feeds = {"input": np.random.RandomState(seed + 2).uniform(-1, 1, [1, 8]).astype(np.float32)}
    notes = (
        "Control flow v1 (disable_control_flow_v2): two tf.compat.v1.cond with opposite predicates "
        "(mean(x)>0 and its LogicalNot) so both a true and a false branch run for any input; the "
        "branches contain Identity nodes fed by Switch:1 (x_true) and Switch:0 (x_false). "
        "tf.compat.v1.while_loop of 5 iterations h=tanh(h@wl+bl), acc+=h (Enter/Merge/Switch/"
        "LoopCond/NextIteration/Exit). Weights were RefVariables frozen with "
        "tf.compat.v1.graph_util.convert_variables_to_constants (Const + '<var>/read' Identity)."
    )
    return Fixture(gd, ["input"], ["output"], feeds, notes)


def build_tf2_functional_control_flow() -> Fixture:
    tf = _tf()
    seed = 1006
    seed_everything(seed)
    rng = np.random.RandomState(seed)
    tf.compat.v1.enable_control_flow_v2()

    wa = tf.Variable(_he(rng, [8, 8]), name="wa")
    wb = tf.Variable(_he(rng, [8, 8]), name="wb")
    wl = tf.Variable((rng.standard_normal([8, 8]) * 0.3).astype(np.float32), name="wl")
    bl = tf.Variable(rng.normal(0, 0.1, [8]).astype(np.float32), name="bl")

    @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32, name="input")])
    def f(x):
        s = tf.reduce_mean(x)
        true_fn = lambda: tf.tanh(tf.matmul(x, wa))  # noqa: E731
        false_fn = lambda: tf.nn.relu(tf.matmul(x, wb)) - 1.0  # noqa: E731
        c1 = tf.cond(s > 0.0, true_fn, false_fn)
        c2 = tf.cond(s <= 0.0, true_fn, false_fn)
        # trip count depends on the input (5 or 3) to keep the loop dynamic
        n = tf.where(s > 0.0, 5, 3)

        def body(i, h, acc):
            h = tf.tanh(tf.matmul(h, wl) + bl)
            return i + 1, h, acc + h

        _, _, acc = tf.while_loop(lambda i, h, acc: i < n, body, [tf.constant(0), c1 + c2, tf.zeros_like(c1)])
        return acc

    gd, inputs, outputs = freeze_concrete_function(f.get_concrete_function(), lower_control_flow=False)
    canonicalize_function_names(gd)
    if not gd.library.function:
        raise RuntimeError("tf2_functional_control_flow: function library is empty")
    funcs = sorted(fn.signature.name for fn in gd.library.function)
    feeds = {inputs[0]: np.random.RandomState(seed + 2).uniform(-1, 1, [1, 8]).astype(np.float32)}
    hist = op_histogram(gd)
    cf_ops = [op for op in hist if op in ("If", "StatelessIf", "While", "StatelessWhile")]
    notes = (
        "Control flow v2 in a tf.function (tf.cond twice with opposite predicates, tf.while_loop with "
        "an input-dependent trip count 5 or 3), frozen with convert_variables_to_constants_v2("
        f"lower_control_flow=False). Functional ops kept: {cf_ops}; function library has "
        f"{len(funcs)} functions: {funcs}."
    )
    return Fixture(gd, inputs, outputs, feeds, notes)


def build_resize_pad_conv() -> Fixture:
    tf = _tf()
    seed = 1007
    seed_everything(seed)
    rng = np.random.RandomState(seed)

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1, 16, 16, 3], name="input")

        def conv(t, name, cout=8, padding="SAME"):
            cin = int(t.shape[-1])
            w = tf.constant(_he(rng, [3, 3, cin, cout]), name=f"{name}/weights")
            b = tf.constant(rng.normal(0, 0.1, cout).astype(np.float32), name=f"{name}/bias")
            y = tf.nn.conv2d(t, w, strides=[1, 1, 1, 1], padding=padding, name=f"{name}/Conv2D")
            return tf.nn.bias_add(y, b, name=f"{name}/BiasAdd")

        outs = []
        r = tf.compat.v1.image.resize_bilinear(x, [24, 24], align_corners=True, name="resize_ac/ResizeBilinear")
        outs.append(tf.identity(conv(r, "conv_resize_ac"), name="output_resize_ac"))
        r = tf.compat.v1.image.resize_bilinear(x, [32, 32], align_corners=False, name="resize/ResizeBilinear")
        outs.append(tf.identity(conv(r, "conv_resize"), name="output_resize"))
        r = tf.raw_ops.ResizeBilinear(
            images=x, size=tf.constant([24, 24], name="resize_hp/size"), align_corners=False,
            half_pixel_centers=True, name="resize_hp/ResizeBilinear",
        )
        outs.append(tf.identity(conv(r, "conv_resize_hp"), name="output_resize_hp"))
        p = tf.pad(x, [[0, 0], [2, 2], [2, 2], [0, 0]], mode="REFLECT", name="pad_reflect/MirrorPad")
        outs.append(tf.identity(conv(p, "conv_pad_reflect", padding="VALID"), name="output_pad_reflect"))
        p = tf.pad(x, [[0, 0], [1, 2], [3, 0], [0, 0]], mode="SYMMETRIC", name="pad_symmetric/MirrorPad")
        outs.append(tf.identity(conv(p, "conv_pad_symmetric", padding="VALID"), name="output_pad_symmetric"))
        r = tf.compat.v1.image.resize_bilinear(x, [32, 32], align_corners=False, name="chain/ResizeBilinear")
        p = tf.pad(r, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT", name="chain/MirrorPad")
        outs.append(tf.identity(conv(p, "conv_chain", padding="VALID"), name="output_chain"))

    gd = g.as_graph_def()
    outputs = [o.op.name for o in outs]
    feeds = {"input": np.random.RandomState(seed + 2).uniform(-1, 1, [1, 16, 16, 3]).astype(np.float32)}
    notes = (
        "TF1-style graph, 6 outputs: ResizeBilinear(align_corners=True, 16->24)->Conv2D; "
        "ResizeBilinear(align_corners=False, half_pixel_centers=False, 16->32)->Conv2D; "
        "ResizeBilinear(half_pixel_centers=True, 16->24)->Conv2D; MirrorPad REFLECT [2,2][2,2]->Conv2D "
        "VALID; MirrorPad SYMMETRIC [1,2][3,0]->Conv2D VALID; ResizeBilinear(16->32)->MirrorPad "
        "REFLECT [1,1]->Conv2D VALID. Every conv has BiasAdd."
    )
    return Fixture(gd, ["input"], outputs, feeds, notes)


def build_devices_gather() -> Fixture:
    tf = _tf()
    seed = 1008
    seed_everything(seed)
    rng = np.random.RandomState(seed)
    vocab, dim, seq, ncls = 50, 16, 6, 10

    g = tf.Graph()
    with g.as_default():
        ids = tf.compat.v1.placeholder(tf.int32, [1, seq], name="ids")  # no device
        with tf.device("/device:CPU:0"):
            table = tf.constant(rng.standard_normal([vocab, dim]).astype(np.float32), name="embedding/table")
            emb = tf.gather(table, ids, axis=0, name="embedding/GatherV2")
        with tf.device("/job:localhost/replica:0/task:0/device:CPU:0"):
            flat = tf.reshape(emb, [1, seq * dim], name="flatten/Reshape")
            w = tf.constant(_he(rng, [seq * dim, ncls]), name="fc/weights")
            b = tf.constant(rng.normal(0, 0.1, ncls).astype(np.float32), name="fc/bias")
            logits = tf.add(tf.matmul(flat, w, name="fc/MatMul"), b, name="fc/add")
        tf.nn.softmax(logits, name="output")  # no device

    gd = g.as_graph_def()
    feeds = {"ids": np.random.RandomState(seed + 2).randint(0, vocab, [1, seq]).astype(np.int32)}
    devs = sorted({n.device for n in gd.node})
    notes = (
        "int32 placeholder 'ids' [1,6] -> GatherV2 on a const [50,16] embedding table (axis 0) -> "
        "Reshape [1,96] -> MatMul -> Add -> Softmax 'output'. Node devices used: "
        f"{devs} (placeholder and softmax have no device)."
    )
    return Fixture(gd, ["ids"], ["output"], feeds, notes)


# --------------------------------------------------------------------------
# trained models (sklearn's bundled digits data, no downloads)
# --------------------------------------------------------------------------

DIGITS_TEST_SIZE = 360  # of 1797 images; the other 1437 train
DIGITS_CALIBRATION_SIZE = 100  # training images in <name>_calibration.npz
DIGITS_SPLIT_SEED = 3000  # one split for every digits model, so their accuracies compare


def _digits_split() -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """sklearn's 8x8 digits scaled to [0, 1] as float32 [N, 8, 8], split
    1437/360 stratified by class with a fixed seed: (x_train, y_train,
    x_test, y_test), labels int64."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=DIGITS_TEST_SIZE, stratify=y, random_state=DIGITS_SPLIT_SEED
    )
    return x_tr, y_tr, x_te, y_te


def _train_digits_classifier(make_model, sample_shape, seed: int, epochs: int, learning_rate: float) -> Fixture:
    """Train ``make_model()`` (a Keras model returning [logits, softmax]) on
    the digits split and freeze it with a dynamic batch dimension.

    Training runs single-threaded with TF op determinism on, so rebuilding
    with the same TF build gives the same weights.  The recorded accuracy is
    measured by running the frozen GraphDef itself in TF."""
    import keras
    from tensorflow.python.framework import config as tf_config

    if not pin_tf_threads():
        print(
            "[make_fixtures] warning: TF already runs multi-threaded in this process; the trained "
            "weights may differ from a fresh `tools/make_fixtures.py` build",
            file=sys.stderr,
        )
    was_deterministic = tf_config.is_op_determinism_enabled()
    tf_config.enable_op_determinism()
    try:
        keras.backend.clear_session()
        seed_everything(seed)
        x_tr, y_tr, x_te, y_te = _digits_split()
        x_tr, x_te = (x.reshape((len(x),) + tuple(sample_shape)) for x in (x_tr, x_te))
        model = make_model()
        logits_model = keras.Model(model.inputs, model.outputs[0])
        logits_model.compile(
            optimizer=keras.optimizers.Adam(learning_rate),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        logits_model.fit(x_tr, y_tr, batch_size=32, epochs=epochs, shuffle=True, verbose=0)
        gd, inputs, outputs = freeze_keras(model, sample_shape, batch=None)
        description = f"Keras {keras.__version__} model '{model.name}', {model.count_params()} params"
        keras.backend.clear_session()
    finally:
        if not was_deterministic:
            tf_config.disable_op_determinism()
    return _digits_fixture(gd, inputs, outputs, (x_tr, y_tr, x_te, y_te), description, epochs, learning_rate)


def _digits_fixture(gd, inputs, outputs, split, description: str, epochs: int, learning_rate: float) -> Fixture:
    """Package a frozen digits classifier: reference feed, held-out split,
    calibration stack and the float accuracy TF measures on the frozen graph."""
    x_tr, y_tr, x_te, y_te = split
    if len(inputs) != 1 or len(outputs) != 2:
        raise RuntimeError(f"expected 1 input and 2 outputs (logits, softmax), got {inputs} -> {outputs}")
    name = inputs[0]
    logits, probabilities = outputs
    accuracy = {
        "train": _top1(run_graph_def(gd, {name: x_tr}, [logits])[logits], y_tr),
        "test": _top1(run_graph_def(gd, {name: x_te}, [logits])[logits], y_te),
    }
    calibration = x_tr[:DIGITS_CALIBRATION_SIZE, None]  # a stack of [1, ...] feeds
    meta = {
        "output_roles": {"logits": logits, "probabilities": probabilities},
        "accuracy": accuracy,
        "dataset": {
            "source": "sklearn.datasets.load_digits (bundled with scikit-learn), pixels / 16.0",
            "split": f"sklearn train_test_split(test_size={DIGITS_TEST_SIZE}, stratify=y, "
                     f"random_state={DIGITS_SPLIT_SEED})",
            "train_size": int(len(y_tr)),
            "test_size": int(len(y_te)),
            "calibration": f"first {DIGITS_CALIBRATION_SIZE} training images, "
                           f"stacked as [{DIGITS_CALIBRATION_SIZE}, 1, ...]",
        },
    }
    notes = (
        f"{description}, trained {epochs} epochs (Adam lr={learning_rate}, batch 32, sparse softmax "
        f"cross-entropy on logits) on {len(y_tr)} digits images; frozen via "
        "convert_variables_to_constants_v2 from a tf.function with a dynamic batch dimension. "
        f"Outputs: {logits} = logits, {probabilities} = softmax. Float top-1: "
        f"train {accuracy['train']:.4f}, test {accuracy['test']:.4f}."
    )
    return Fixture(
        gd, list(inputs), [logits, probabilities], {name: x_te[:1]}, notes, meta=meta,
        extra_npz={"test": {"x": x_te, "y": y_te}, "calibration": {name: calibration}},
    )


def _top1(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=-1) == labels))


def build_digits_cnn() -> Fixture:
    import keras
    from keras import layers

    def make():
        inp = keras.Input((8, 8, 1), name="input")
        x = layers.Conv2D(8, 3, padding="same", use_bias=False, name="conv1")(inp)
        x = layers.BatchNormalization(name="conv1_bn")(x)
        x = layers.ReLU(name="conv1_relu")(x)
        a = layers.Conv2D(8, 1, name="branch_a")(x)
        a = layers.ReLU(6.0, name="branch_a_relu6")(a)
        b = layers.Conv2D(8, 3, padding="same", name="branch_b")(x)
        b = layers.ReLU(name="branch_b_relu")(b)
        x = layers.Concatenate(name="concat")([a, b])
        x = layers.MaxPooling2D(2, name="maxpool")(x)
        r = layers.Conv2D(16, 3, padding="same", use_bias=False, name="conv2")(x)
        r = layers.BatchNormalization(name="conv2_bn")(r)
        x = layers.Add(name="res_add")([x, r])
        x = layers.ReLU(6.0, name="res_relu6")(x)
        x = layers.AveragePooling2D(2, name="avgpool")(x)
        x = layers.Flatten(name="flatten")(x)
        x = layers.Dense(32, activation="relu", name="fc1")(x)
        logits = layers.Dense(10, name="logits")(x)
        probs = layers.Softmax(name="softmax")(logits)
        return keras.Model(inp, [logits, probs], name="digits_cnn")

    fx = _train_digits_classifier(make, (8, 8, 1), seed=3001, epochs=15, learning_rate=3e-3)
    fx.notes = (
        "Trained CNN on 8x8x1 digits in [0,1]: Conv2D(no bias)+BN+ReLU, two branches "
        "(1x1 Conv2D+ReLU6 | 3x3 Conv2D+ReLU) -> Concatenate -> MaxPool 2x2, 3x3 Conv2D(no bias)+BN "
        "-> residual Add -> ReLU6, AvgPool 2x2, Flatten, Dense(32)+ReLU, Dense(10) logits, Softmax. "
        "convert_variables_to_constants_v2 hangs the outputs on a NoOp with control edges from every "
        "weight read; once remove_nodes(op=Identity) moves those edges onto the weight Consts, GTT's "
        "fold_batch_norms no longer folds the Keras-lowered BN Mul into the convolutions. " + fx.notes
    )
    return fx


def build_digits_mlp() -> Fixture:
    import keras
    from keras import layers

    def make():
        inp = keras.Input((64,), name="input")
        x = layers.Dense(64, activation="relu", name="fc1")(inp)
        logits = layers.Dense(10, name="logits")(x)
        probs = layers.Softmax(name="softmax")(logits)
        return keras.Model(inp, [logits, probs], name="digits_mlp")

    fx = _train_digits_classifier(make, (64,), seed=3002, epochs=20, learning_rate=3e-3)
    fx.notes = (
        "Trained MLP on flattened 64-pixel digits in [0,1]: Dense(64)+ReLU, Dense(10) logits, Softmax. "
        + fx.notes
    )
    return fx


def build_keras_rnn() -> Fixture:
    """Keras-3 recurrent layers frozen with lowered control flow: TF1 while frames and TensorList ops."""
    import keras
    from keras import layers

    def make():
        inp = keras.Input((4, 3), name="input")
        x = layers.LSTM(5, return_sequences=True, name="lstm")(inp)
        x = layers.Bidirectional(layers.GRU(4, return_sequences=True), name="bigru")(x)
        x = layers.SimpleRNN(3, name="simple_rnn")(x)
        out = layers.Dense(2, name="fc")(x)
        return keras.Model(inp, out, name="keras_rnn")

    fixture = _keras_fixture(
        make,
        (4, 3),
        seed=1004,
        notes=(
            "LSTM(5, return_sequences) -> Bidirectional(GRU(4), return_sequences) -> SimpleRNN(3) -> Dense(2) "
            "over 4 timesteps of 3 features; lower_control_flow=True turns each recurrence into a TF1 "
            "Enter/Merge/Switch/NextIteration/Exit frame with TensorList ops. The freezer's unread "
            "'unused_control_flow_input*' Placeholders and the '_has_manual_control_dependencies' attribute "
            "are dropped and nodes sorted by name (the freezer's order and that attribute vary between runs)."
        ),
    )
    read = {inp.lstrip("^").split(":")[0] for node in fixture.graph_def.node for inp in node.input}
    kept = [n for n in fixture.graph_def.node
            if not (n.op == "Placeholder" and n.name.startswith("unused_control_flow_input") and n.name not in read)]
    for node in kept:  # set on some runs and not others
        node.attr.pop("_has_manual_control_dependencies", None)
    del fixture.graph_def.node[:]
    fixture.graph_def.node.extend(sorted(kept, key=lambda n: n.name))  # freezing lists them in varying order
    return fixture


def build_keras_grouped_calls() -> Fixture:
    """A tiny ConvNeXt-like Keras-3 model: grouped convs freeze into calls of jit-compiled functions."""
    import keras
    from keras import layers

    def make():
        inp = keras.Input((8, 8, 8), name="input")
        x = layers.Conv2D(8, 3, padding="same", groups=8, name="dwconv")(inp)
        x = layers.LayerNormalization(epsilon=1e-6, name="norm")(x)
        x = layers.Dense(16, name="pw1")(x)
        x = layers.Activation("gelu", name="gelu")(x)
        x = layers.Dense(8, name="pw2")(x)
        x = layers.Add(name="residual")([inp, x])
        x = layers.Conv2D(12, 3, strides=2, padding="same", groups=2, name="gconv")(x)
        x = layers.GlobalAveragePooling2D(name="pool")(x)
        out = layers.Dense(4, name="head")(x)
        return keras.Model(inp, out, name="keras_grouped_calls")

    fixture = _keras_fixture(
        make,
        (8, 8, 8),
        seed=1005,
        notes=(
            "ConvNeXt block in miniature: Conv2D(groups=8) as depthwise 3x3, LayerNormalization, Dense, "
            "GELU (erf), Dense, residual Add, then Conv2D(12, groups=2, stride 2), global pool, Dense. "
            "Keras 3 runs grouped convs in a tf.function(jit_compile=True), so the frozen graph keeps one "
            "StatefulPartitionedCall per grouped conv into an _XlaMustCompile library function."
        ),
    )
    canonicalize_function_names(fixture.graph_def)
    return fixture


# --------------------------------------------------------------------------
# big fixtures (not committed)
# --------------------------------------------------------------------------


def _big_keras(app_name, shape, seed, input_range=(-1.0, 1.0), **kwargs):
    def builder() -> Fixture:
        import keras

        fn = getattr(keras.applications, app_name)
        return _keras_fixture(
            lambda: fn(input_shape=shape, weights=None, **kwargs),
            shape,
            seed=seed,
            notes=f"{app_name}(input_shape={shape}, weights=None{''.join(f', {k}={v}' for k, v in kwargs.items())}).",
            input_range=input_range,
        )

    builder.__name__ = f"build_keras_{app_name.lower()}"
    return builder


SMALL_FIXTURES = [
    "keras_mobilenet_v2_small",
    "keras_small_cnn",
    "keras_padded_convs",
    "tf1_fused_bn",
    "tf1_old_batch_norm",
    "tf1_control_flow",
    "keras_rnn",
    "keras_grouped_calls",
    "tf2_functional_control_flow",
    "resize_pad_conv",
    "devices_gather",
    "digits_cnn",
    "digits_mlp",
]

BIG_FIXTURES = [
    "keras_mobilenet_v2",
    "keras_resnet50",
    "keras_inception_v3",
    "keras_efficientnet_b0",
    "keras_densenet121",
]

BUILDERS: Dict[str, Callable[[], Fixture]] = {
    "keras_mobilenet_v2_small": build_keras_mobilenet_v2_small,
    "keras_small_cnn": build_keras_small_cnn,
    "keras_padded_convs": build_keras_padded_convs,
    "tf1_fused_bn": build_tf1_fused_bn,
    "tf1_old_batch_norm": build_tf1_old_batch_norm,
    "tf1_control_flow": build_tf1_control_flow,
    "keras_rnn": build_keras_rnn,
    "keras_grouped_calls": build_keras_grouped_calls,
    "tf2_functional_control_flow": build_tf2_functional_control_flow,
    "resize_pad_conv": build_resize_pad_conv,
    "devices_gather": build_devices_gather,
    "digits_cnn": build_digits_cnn,
    "digits_mlp": build_digits_mlp,
    "keras_mobilenet_v2": _big_keras("MobileNetV2", (224, 224, 3), 2001, alpha=1.0),
    "keras_resnet50": _big_keras("ResNet50", (224, 224, 3), 2002),
    "keras_inception_v3": _big_keras("InceptionV3", (299, 299, 3), 2003),
    # EfficientNet has Rescaling(1/255) + Normalization built in: feed [0, 255].
    "keras_efficientnet_b0": _big_keras("EfficientNetB0", (224, 224, 3), 2004, input_range=(0.0, 255.0)),
    "keras_densenet121": _big_keras("DenseNet121", (224, 224, 3), 2005),
}


# --------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------


def build(name: str) -> Fixture:
    """Build fixture ``name`` (a key of BUILDERS)."""
    if name not in BUILDERS:
        raise KeyError(f"unknown fixture {name!r}; known: {sorted(BUILDERS)}")
    return BUILDERS[name]()


def write(fixture: Fixture, name: str, out_dir: str = DEFAULT_OUT_DIR) -> Dict[str, str]:
    """Write <name>.pb/.pbtxt/.json/.npz into ``out_dir``; return the paths.

    Reference outputs are computed by TF itself from the frozen GraphDef."""
    tf = _tf()
    from google.protobuf import text_format

    os.makedirs(out_dir, exist_ok=True)
    gd = fixture.graph_def
    paths = {}

    paths["pb"] = os.path.join(out_dir, f"{name}.pb")
    with open(paths["pb"], "wb") as fh:
        fh.write(gd.SerializeToString(deterministic=True))

    pbtxt_path = os.path.join(out_dir, f"{name}.pbtxt")
    text = None
    if gd.ByteSize() < PBTXT_LIMIT:
        text = text_format.MessageToString(gd)
        if len(text) >= PBTXT_LIMIT:
            text = None
    if text is not None:
        with open(pbtxt_path, "w") as fh:
            fh.write(text)
        paths["pbtxt"] = pbtxt_path
    elif os.path.exists(pbtxt_path):
        os.remove(pbtxt_path)

    outputs = run_graph_def(gd, fixture.feeds, fixture.outputs)

    arrays = {f"input:{k}": np.asarray(v) for k, v in fixture.feeds.items()}
    arrays.update({f"output:{k}": v for k, v in outputs.items()})
    paths["npz"] = os.path.join(out_dir, f"{name}.npz")
    np.savez_compressed(paths["npz"], **arrays)
    for key, extra in sorted(fixture.extra_npz.items()):
        paths[f"npz_{key}"] = os.path.join(out_dir, f"{name}_{key}.npz")
        np.savez_compressed(paths[f"npz_{key}"], **extra)

    meta = {
        "name": name,
        "inputs": list(fixture.inputs),
        "outputs": list(fixture.outputs),
        "input_dtypes": {k: str(np.asarray(fixture.feeds[k]).dtype) for k in fixture.inputs},
        "input_shapes": {k: list(np.asarray(fixture.feeds[k]).shape) for k in fixture.inputs},
        "placeholder_shapes": {k: _placeholder_shape(gd, k) for k in fixture.inputs},
        "output_dtypes": {k: str(v.dtype) for k, v in outputs.items()},
        "output_shapes": {k: list(v.shape) for k, v in outputs.items()},
        "num_nodes": len(gd.node),
        "num_library_functions": len(gd.library.function),
        "graph_def_producer": int(gd.versions.producer),
        "op_histogram": op_histogram(gd),
        "op_histogram_with_library": op_histogram(gd, include_library=True),
        "tf_version": tf.__version__,
        "notes": fixture.notes,
    }
    meta.update(fixture.meta)
    paths["json"] = os.path.join(out_dir, f"{name}.json")
    with open(paths["json"], "w") as fh:
        json.dump(meta, fh, indent=2)
        fh.write("\n")
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT_DIR, help="output directory (default tests/fixtures)")
    ap.add_argument("--big", action="store_true", help="also build the big (uncommitted) fixtures")
    ap.add_argument("--list", action="store_true", help="list fixture names and exit")
    ap.add_argument("names", nargs="*", help="fixtures to build (default: all small [+ big])")
    args = ap.parse_args(argv)

    if args.list:
        for n in SMALL_FIXTURES:
            print(n)
        for n in BIG_FIXTURES:
            print(n, "(big)")
        return 0
    names = args.names or (SMALL_FIXTURES + (BIG_FIXTURES if args.big else []))
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        ap.error(f"unknown fixtures {unknown}; known: {sorted(BUILDERS)}")

    try:
        _tf().get_logger().setLevel("ERROR")
    except Exception:  # pragma: no cover
        pass
    pin_tf_threads()  # before any build: trained fixtures need fixed thread counts
    total = time.time()
    for name in names:
        t0 = time.time()
        fx = build(name)
        t1 = time.time()
        paths = write(fx, name, args.out)
        t2 = time.time()
        size = os.path.getsize(paths["pb"])
        print(
            f"[make_fixtures] {name}: {len(fx.graph_def.node)} nodes, {size / 1e6:.2f} MB .pb, "
            f"build {t1 - t0:.1f}s, write+run {t2 - t1:.1f}s, inputs={fx.inputs} outputs={fx.outputs}",
            flush=True,
        )
    print(f"[make_fixtures] done: {len(names)} fixtures in {time.time() - total:.1f}s -> {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
