"""CudnnRNN, CudnnRNNV2 and CudnnRNNV3 against Keras' LSTM, GRU and SimpleRNN.

TF's CPU build has no kernel for the cuDNN ops, so the oracle is an independent TF computation
with the same weights: each layer and direction is a Keras layer (GRU with reset_after=True is
cuDNN's GRU; go_backwards gives the backward direction), stacked as cuDNN stacks them.  The flat
params buffer is packed here from the per-gate weights in cuDNN's layout (every matrix, layer by
layer and direction by direction, input matrices then recurrent ones, then every bias likewise).
"""
from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from compiler.runtime.kernels import KernelError  # noqa: E402
from tests.runtime.test_kernels import run_ours  # noqa: E402

pytestmark = pytest.mark.tf

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
TOLERANCE = 1e-5
MAX_ERROR = [0.0]


def random_cells(rng, mode: str, layers: int, dirs: int, inputs: int, units: int) -> list[list[dict]]:
    """Per [layer][direction]: per-gate w [units, in], r [units, units], wb, rb, in cuDNN gate order."""
    g = GATES[mode]
    cells = []
    for layer in range(layers):
        width = inputs if layer == 0 else dirs * units
        cells.append([{"w": [rng.uniform(-0.6, 0.6, (units, width)) for _ in range(g)],
                       "r": [rng.uniform(-0.6, 0.6, (units, units)) for _ in range(g)],
                       "wb": [rng.uniform(-0.5, 0.5, units) for _ in range(g)],
                       "rb": [rng.uniform(-0.5, 0.5, units) for _ in range(g)]} for _ in range(dirs)])
    return cells


def pack(cells: list[list[dict]], dtype=np.float32) -> np.ndarray:
    mats = [m.reshape(-1) for layer in cells for cell in layer for key in ("w", "r") for m in cell[key]]
    biases = [b for layer in cells for cell in layer for key in ("wb", "rb") for b in cell[key]]
    return np.concatenate(mats + biases).astype(dtype)


def keras_direction(mode: str, x: np.ndarray, h0: np.ndarray, c0, cell: dict, reverse: bool):
    """One layer and direction through Keras over batch-major x: (outputs in time order, h, c)."""
    kernel = lambda key, order: np.concatenate([cell[key][k].T for k in order], axis=1)  # noqa: E731
    kwargs = dict(return_sequences=True, return_state=True, go_backwards=reverse, dtype=str(x.dtype))
    units = h0.shape[-1]
    if mode == "lstm":
        layer = keras.layers.LSTM(units, **kwargs)
        order = (0, 1, 2, 3)  # Keras' i, f, c, o is cuDNN's order
        weights = [kernel("w", order), kernel("r", order), np.concatenate(cell["wb"]) + np.concatenate(cell["rb"])]
        states = [h0, c0]
    elif mode == "gru":
        layer = keras.layers.GRU(units, reset_after=True, **kwargs)
        order = (1, 0, 2)  # Keras' z, r, h from cuDNN's r, z, h
        bias = np.stack([np.concatenate([cell["wb"][k] for k in order]), np.concatenate([cell["rb"][k] for k in order])])
        weights = [kernel("w", order), kernel("r", order), bias]
        states = [h0]
    else:
        layer = keras.layers.SimpleRNN(units, activation=mode[4:], **kwargs)
        weights = [cell["w"][0].T, cell["r"][0].T, cell["wb"][0] + cell["rb"][0]]
        states = [h0]
    layer.build(x.shape)
    layer.set_weights([w.astype(x.dtype) for w in weights])
    outs = layer(tf.constant(x), initial_state=[tf.constant(s) for s in states])
    y = np.asarray(outs[0])
    return (y[:, ::-1] if reverse else y), np.asarray(outs[1]), (np.asarray(outs[2]) if mode == "lstm" else None)


def keras_network(mode: str, x: np.ndarray, h0: np.ndarray, c0, cells) -> tuple:
    """cuDNN's stack via Keras, over time-major x [time, batch, in] and states [layers * dirs, batch, units]."""
    seq = x.swapaxes(0, 1)
    hs, cs = [], []
    for l, layer in enumerate(cells):
        outs = []
        for d, cell in enumerate(layer):
            k = l * len(layer) + d
            y, h, c = keras_direction(mode, seq, h0[k], None if c0 is None else c0[k], cell, d == 1)
            outs.append(y)
            hs.append(h)
            cs.append(c)
        seq = np.concatenate(outs, axis=-1)
    return seq.swapaxes(0, 1), np.stack(hs), (np.stack(cs) if mode == "lstm" else None)


def keras_with_lengths(mode: str, x, h0, c0, cells, lengths) -> tuple:
    """Each batch entry run alone on its first `length` steps; later outputs are zeros."""
    y = np.zeros(x.shape[:2] + (h0.shape[-1] * len(cells[0]),), x.dtype)
    hs, cs = np.zeros_like(h0), (None if c0 is None else np.zeros_like(c0))
    for b, n in enumerate(lengths):
        yb, hb, cb = keras_network(mode, x[:n, b:b + 1], h0[:, b:b + 1], None if c0 is None else c0[:, b:b + 1], cells)
        y[:n, b:b + 1], hs[:, b:b + 1] = yb, hb
        if cs is not None:
            cs[:, b:b + 1] = cb
    return y, hs, cs


def case(seed: int, mode: str, layers: int, dirs: int, steps: int, batch: int, inputs: int, units: int,
         dtype=np.float32):
    rng = np.random.default_rng(seed)
    cells = random_cells(rng, mode, layers, dirs, inputs, units)
    x = rng.standard_normal((steps, batch, inputs)).astype(dtype)
    h0 = rng.uniform(-1, 1, (layers * dirs, batch, units)).astype(dtype)
    c0 = rng.uniform(-1, 1, (layers * dirs, batch, units)).astype(dtype) if mode == "lstm" else np.zeros((), dtype)
    attrs = {"rnn_mode": mode, "direction": "bidirectional" if dirs == 2 else "unidirectional",
             "input_mode": "linear_input", "is_training": False}
    return cells, x, h0, c0, pack(cells, dtype), attrs


def assert_close(ours, want) -> None:
    assert ours.shape == want.shape and ours.dtype == want.dtype
    error = float(np.abs(ours.astype(np.float64) - want).max(initial=0.0))
    MAX_ERROR[0] = max(MAX_ERROR[0], error)
    assert error <= TOLERANCE, error


CONFIGS = [(mode, layers, dirs, sizes) for mode in GATES for layers, dirs in ((1, 1), (1, 2), (2, 1), (2, 2))
           for sizes in ((5, 3, 4, 6),)] + [("lstm", 1, 1, (1, 1, 1, 1)), ("gru", 3, 2, (7, 2, 3, 2)),
                                            ("lstm", 2, 2, (4, 5, 8, 3)), ("rnn_relu", 1, 2, (6, 1, 2, 5))]


@pytest.mark.parametrize("mode,layers,dirs,sizes", CONFIGS)
def test_cudnn_rnn_matches_keras(mode, layers, dirs, sizes):
    steps, batch, inputs, units = sizes
    cells, x, h0, c0, params, attrs = case(layers * 10 + dirs, mode, layers, dirs, steps, batch, inputs, units)
    y, h, c, reserve = run_ours("CudnnRNN", [x, h0, c0, params], attrs)
    want_y, want_h, want_c = keras_network(mode, x, h0, c0 if mode == "lstm" else None, cells)
    assert_close(y, want_y)
    assert_close(h, want_h)
    if mode == "lstm":
        assert_close(c, want_c)
    else:
        assert c.shape == ()  # TF's dummy output_c
    assert reserve.dtype == x.dtype  # its contents are cuDNN's: never compared


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_v2_is_v1_with_host_reserved(mode):
    cells, x, h0, c0, params, attrs = case(3, mode, 2, 2, 4, 2, 3, 5)
    v1 = run_ours("CudnnRNN", [x, h0, c0, params], attrs)
    v2 = run_ours("CudnnRNNV2", [x, h0, c0, params], {**attrs, "is_training": True})
    assert len(v2) == 5 and v2[4].dtype == np.int8 and v2[4].shape == (2,)
    for a, b in zip(v1[:3], v2[:3]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("mode,dirs,time_major", [("lstm", 2, True), ("gru", 2, False), ("rnn_tanh", 1, False),
                                                   ("lstm", 1, False)])
def test_v3_sequence_lengths_and_batch_major(mode, dirs, time_major):
    cells, x, h0, c0, params, attrs = case(7, mode, 2, dirs, 6, 4, 3, 4)
    lengths = np.array([6, 2, 4, 1], np.int32)
    want = keras_with_lengths(mode, x, h0, c0 if mode == "lstm" else None, cells, lengths)
    feeds = [x, h0, c0, params, lengths]
    if not time_major:
        feeds[:3] = [x.swapaxes(0, 1), h0.swapaxes(0, 1), c0.swapaxes(0, 1) if mode == "lstm" else c0]
    y, h, c, _, _ = run_ours("CudnnRNNV3", feeds, {**attrs, "time_major": time_major})
    if not time_major:
        y, h, c = y.swapaxes(0, 1), h.swapaxes(0, 1), (c.swapaxes(0, 1) if mode == "lstm" else c)
    assert_close(y, want[0])
    assert_close(h, want[1])
    if mode == "lstm":
        assert_close(c, want[2])


def test_float64_and_float16():
    cells, x, h0, c0, params, attrs = case(11, "gru", 1, 2, 5, 2, 3, 4, np.float64)
    y, h, _, _ = run_ours("CudnnRNN", [x, h0, c0, params], attrs)
    want_y, want_h, _ = keras_network("gru", x, h0, None, cells)
    np.testing.assert_allclose(y, want_y, atol=1e-10)
    np.testing.assert_allclose(h, want_h, atol=1e-10)
    half = run_ours("CudnnRNN", [x.astype(np.float16), h0.astype(np.float16), c0.astype(np.float16),
                                 params.astype(np.float16)], attrs)
    assert half[0].dtype == np.float16
    np.testing.assert_allclose(half[0], want_y, atol=5e-3)


@pytest.mark.parametrize("change,message", [
    ({"input_mode": "skip_input"}, "input_mode 'skip_input'"),
    ({"num_proj": 2}, "num_proj"),
    ({"is_training": True, "dropout": 0.5}, "dropout"),
    ({"rnn_mode": "peephole"}, "unsupported rnn_mode"),
])
def test_unsupported_variants_are_refused(change, message):
    _, x, h0, c0, params, attrs = case(1, "lstm", 2, 1, 3, 2, 3, 3)
    with pytest.raises(KernelError, match=message):
        run_ours("CudnnRNNV3" if "num_proj" in change else "CudnnRNN",
                 [x, h0, c0, params] + ([np.array([3, 3], np.int32)] if "num_proj" in change else []),
                 {**attrs, **change})


def test_auto_select_with_other_input_size_is_linear_input():
    _, x, h0, c0, params, attrs = case(2, "gru", 1, 1, 3, 2, 3, 4)
    want = run_ours("CudnnRNN", [x, h0, c0, params], attrs)
    got = run_ours("CudnnRNN", [x, h0, c0, params], {**attrs, "input_mode": "auto_select"})
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("which", ["params", "input_h", "input_c", "no_units", "no_inputs", "lengths"])
def test_bad_shapes_are_refused(which):
    _, x, h0, c0, params, attrs = case(4, "lstm", 2, 2, 3, 2, 3, 3)
    feeds = {"params": [x, h0, c0, params[:-1]], "input_h": [x, h0[:3], c0, params],
             "input_c": [x, h0, c0[:, :1], params], "no_units": [x, h0[..., :0], c0[..., :0], params[:0]],
             "no_inputs": [x[..., :0], h0, c0, params],
             "lengths": [x, h0, c0, params, np.array([3, 4], np.int32)]}[which]
    op = "CudnnRNNV3" if which == "lengths" else "CudnnRNN"
    with pytest.raises(KernelError):
        run_ours(op, feeds, attrs)


def test_report_max_error():
    """Runs last in file order: the largest error over the float32 cases compared above."""
    print(f"CudnnRNN max |ours - keras| over float32 cases: {MAX_ERROR[0]:.2e}")
    assert MAX_ERROR[0] <= TOLERANCE
