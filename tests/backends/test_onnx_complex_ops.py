"""FFTs and complex values in ONNX: complex tensors travel as (real, imag) float pairs, every export
passes the full checker and matches gttc's interpreter (and, for the Keras layers, Keras itself),
and what cannot travel that way is refused naming the node."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.onnx import OnnxExportError, UnsupportedOpError, export_with_report
from compiler.ir.dtypes import DType
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.keras_export import assert_matches_keras, export_keras, keras_seeded
from tests.backends.test_onnx_added_ops import check as check_export, ints
from tests.backends.test_onnx_export import Builder

# onnxruntime's DFT of a length that is not a power of two sums in float32 (TF and the
# interpreter transform in float64 or with pocketfft): errors ~1e-6 of the largest bin.
TOLERANCE = 1e-5


def check(b: Builder, feeds, outputs, opset: int = 17) -> dict[str, int]:
    return check_export(b, feeds, outputs, opset, of_largest=TOLERANCE)


def signal(shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("opset", [17, 20])
def test_rfft_parts_and_magnitude(opset):
    b = Builder()
    x = b.input("x", [2, 3, 12])
    full = b("RFFT", x, ints(b, [12]))
    cropped = b("RFFT", x, ints(b, [8]))
    counts = check(b, {"x": signal((2, 3, 12))},
                   [b("Real", full), b("Imag", full), b("ComplexAbs", full), b("ComplexAbs", cropped)], opset)
    assert counts["DFT"] == 2 and counts["ReduceL2"] == 2


def test_a_transposed_spectrum():
    """kapre's STFT layer: frames x bins transposed to bins x frames while still complex."""
    b = Builder()
    x = b.input("x", [2, 5, 12])
    spectrum = b("RFFT", x, ints(b, [12]))
    turned = b("Transpose", spectrum, ints(b, [0, 2, 1]))
    counts = check(b, {"x": signal((2, 5, 12))}, [b("ComplexAbs", turned), b("Real", turned)])
    assert counts["Transpose"] == 1


def test_the_angle_of_complex_values():
    """kapre's Phase layer: Angle, atan2 of the pair's parts, here of values built from parts (an
    FFT's zero parts carry whichever sign its summation order leaves, which flips an angle by pi)."""
    b = Builder()
    re, im = b.input("re", [3, 6]), b.input("im", [3, 6])
    parts = {"re": signal((3, 6), 3), "im": signal((3, 6), 4)}
    parts["re"][0, :4], parts["im"][0, :4] = [0, 2, -2, 0], [0, 0, 1e-30, -3]  # the origin and the axes
    counts = check(b, parts, [b("Angle", b("Complex", re, im), Tout=DType.FLOAT)])
    assert counts["Atan"] == 1 and counts["Gather"] == 2


@pytest.mark.parametrize("opset", [17, 21])
def test_fft_ifft_irfft_and_complex(opset):
    b = Builder()
    x, re, im = b.input("x", [2, 16]), b.input("re", [3, 1]), b.input("im", [5])
    spectrum = b("RFFT", x, ints(b, [16]))
    built = b("Complex", re, im)
    same = b("Complex", x, x)
    outputs = [b("IRFFT", spectrum, ints(b, [16])), b("IRFFT", spectrum, ints(b, [15])),
               b("Real", b("FFT", spectrum)), b("Imag", b("IFFT", spectrum)), b("ComplexAbs", built),
               b("Imag", b("FFT", built)), b("Real", b("IFFT", same))]
    feeds = {"x": signal((2, 16)), "re": signal((3, 1), 1), "im": signal((5,), 2)}
    assert check(b, feeds, outputs, opset)["DFT"] == 7  # RFFT, two IRFFTs, two FFTs, two IFFTs


@pytest.mark.parametrize("opset", [17, 20])
def test_two_and_three_axis_transforms(opset):
    b = Builder()
    x, y = b.input("x", [2, 6, 8]), b.input("y", [2, 6, 8])
    spectrum = b("RFFT2D", x, ints(b, [6, 8]))
    both = b("Complex", x, y)
    outputs = [b("ComplexAbs", spectrum), b("Imag", b("RFFT2D", x, ints(b, [4, 6]))),
               b("Real", b("RFFT3D", x, ints(b, [2, 6, 8]))), b("IRFFT2D", spectrum, ints(b, [6, 8])),
               b("IRFFT2D", spectrum, ints(b, [4, 7])), b("IRFFT3D", b("FFT", spectrum), ints(b, [2, 5, 8])),
               b("Real", b("FFT2D", both)), b("Imag", b("IFFT2D", both)), b("ComplexAbs", b("FFT3D", both)),
               b("Real", b("IFFT3D", both))]
    counts = check(b, {"x": signal((2, 6, 8)), "y": signal((2, 6, 8), 6)}, outputs, opset)
    assert counts["Slice"] == 3  # RFFT2D to 4x6, IRFFT2D's rows to 4, IRFFT3D's rows to 5


def test_rank_one_and_double_signals():
    b = Builder()
    x, d = b.input("x", [12]), b.input("d", [3, 10], DType.DOUBLE)
    wide = b("RFFT", d, ints(b, [10]), Treal=DType.DOUBLE, Tcomplex=DType.COMPLEX128)
    outputs = [b("ComplexAbs", b("RFFT", x, ints(b, [12]))),
               b("Real", b("IFFT", wide, Tcomplex=DType.COMPLEX128), Tout=DType.DOUBLE)]
    check(b, {"x": signal((12,)), "d": signal((3, 10)).astype(np.float64)}, outputs)


def test_irfft_ignores_the_imaginary_parts_of_dc_and_nyquist():
    b = Builder()
    re, im = b.input("re", [4, 5]), b.input("im", [4, 5])
    check(b, {"re": signal((4, 5)), "im": signal((4, 5), 3)}, [b("IRFFT", b("Complex", re, im), ints(b, [8]))])


def _complex_matrix(shape, seed: int, dtype=np.complex64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("opset", [13, 17])
def test_fnet_fourier_mixing_is_one_real_einsum_per_product(opset):
    """FNet's mixing, Real(einsum(einsum(W_seq, cast(x)), W_hidden)), in the spellings TF freezes:
    a constant on either side, an ellipsis, an implicit output."""
    b = Builder()
    x = b.input("x", [2, 6, 5])
    z = b("Cast", x, SrcT=DType.FLOAT, DstT=DType.COMPLEX64)
    w_hidden, w_seq, w_other = (b.const(_complex_matrix(shape, seed)) for seed, shape in enumerate([(5, 5), (4, 6),
                                                                                                     (3, 5)]))
    mixed = b("Einsum", w_hidden, z, equation="jk,...ij->k...i", N=2)
    both = b("Einsum", mixed, w_seq, equation="k...i,ni->...nk", N=2)
    implicit = b("Einsum", z, w_other, equation="bsi,ni", N=2)
    counts = check(b, {"x": signal((2, 6, 5))}, [b("Real", both), b("Imag", both), b("Real", implicit)], opset)
    assert counts["Einsum"] == 3 and counts["Pad"] == 1


def test_complex_einsum_of_two_run_time_operands_and_casts_between_types():
    b = Builder()
    re, im = b.input("re", [3, 4]), b.input("im", [4, 2], DType.DOUBLE)
    a = b("Complex", re, re)
    wide = b("Cast", a, SrcT=DType.COMPLEX64, DstT=DType.COMPLEX128)
    c = b("Cast", im, SrcT=DType.DOUBLE, DstT=DType.COMPLEX128)
    product = b("Einsum", wide, b("Einsum", c, b.const(_complex_matrix((2,), 3, np.complex128)), equation="ij,j->ij",
                                    N=2), equation="ij,jk->ik", N=2)
    outputs = [b("Cast", product, SrcT=DType.COMPLEX128, DstT=DType.FLOAT),
               b("Imag", b("Cast", product, SrcT=DType.COMPLEX128, DstT=DType.COMPLEX64))]
    counts = check(b, {"re": signal((3, 4)), "im": signal((4, 2), 4).astype(np.float64)}, outputs)
    assert counts["Einsum"] == 2


def test_complex_values_leave_only_through_their_parts():
    b = Builder()
    x = b.input("x", [4, 8])
    spectrum = b("RFFT", x, ints(b, [8]))
    with pytest.raises(OnnxExportError, match="complex64.*Real/Imag"):
        export_with_report(b.graph, ["x"], [spectrum.name])
    exp = b("Exp", spectrum)
    with pytest.raises(UnsupportedOpError, match=f"'{exp.op.name}'.*complex values export only through"):
        export_with_report(b.graph, ["x"], [b("Real", exp).name])


def test_complex_arithmetic_on_pairs():
    """Add, Sub, Neg and Mul of complex values: a constant factor folds into two initializers (one
    when it is real), a run-time one is read from its pairs; broadcasting lines the pair axes up."""
    b = Builder()
    x, re, im = b.input("x", [2, 3, 8]), b.input("re", [5]), b.input("im", [3, 1])
    spectrum = b("RFFT", x, ints(b, [8]))  # [2, 3, 5]
    built = b("Complex", re, im)  # [3, 5]
    by_constant = b("Mul", spectrum, b.const(_complex_matrix((5,), 1)))
    by_real = b("Mul", b.const(np.complex64([[2], [-1], [0.5]])), spectrum)
    by_run_time = b("Mul", built, spectrum)
    added = b("AddV2", spectrum, b.const(_complex_matrix((3, 1), 2)))
    outputs = [b(part, v) for v in (by_constant, by_real, by_run_time, added, b("Sub", built, spectrum),
                                    b("Neg", built), b("Add", built, built)) for part in ("Real", "Imag")]
    counts = check(b, {"x": signal((2, 3, 8)), "re": signal((5,), 1), "im": signal((3, 1), 2)}, outputs)
    assert counts["Mul"] == 2 + 1 + 3 and counts["Neg"] == 1  # y's signs multiply at run time only


def test_strided_slice_of_complex_pairs():
    """Ranges, reversed steps, shrunk and new axes and an ellipsis slice the pairs' leading axes."""
    b = Builder()
    x = b.input("x", [2, 3, 8])
    spectrum = b("RFFT", x, ints(b, [8]))  # [2, 3, 5]

    def sliced(begin, end, strides, **masks):
        return b("StridedSlice", spectrum, ints(b, begin), ints(b, end), ints(b, strides), Index=DType.INT32, **masks)

    cases = [sliced([0, 0, 1], [0, 0, 4], [1, 1, 1], begin_mask=3, end_mask=3),  # [..., 1:4] spelled out
             sliced([0, 1, 4], [0, 2, 0], [1, 1, -2], begin_mask=1, end_mask=5, shrink_axis_mask=2),  # [:, 1, ::-2]
             sliced([0, 0, 2], [0, 0, 3], [1, 1, 1], begin_mask=1, end_mask=1, new_axis_mask=2,
                    shrink_axis_mask=4),  # [:, None, 2]
             sliced([0, 1], [0, 3], [1, 1], ellipsis_mask=1)]  # [..., 1:3]
    outputs = [b(part, v) for v in cases for part in ("Real", "Imag")]
    counts = check(b, {"x": signal((2, 3, 8))}, outputs)
    assert counts["Slice"] == 4 and counts["Squeeze"] == 2 and counts["Unsqueeze"] == 2  # one Unsqueeze is RFFT's


def test_padding_complex_pairs():
    """Zero and REFLECT padding of the leading axes; a fill of both parts or mirrored edges are refused."""
    b = Builder()
    x = b.input("x", [2, 3, 8])
    spectrum = b("RFFT", x, ints(b, [8]))  # [2, 3, 5]
    rows = ints(b, [[0, 1], [2, 0], [1, 3]])
    outputs = [b(part, v) for v in (b("Pad", spectrum, rows), b("MirrorPad", spectrum, rows, mode="REFLECT"),
                                    b("PadV2", spectrum, rows, b.const(np.complex64(0))))
               for part in ("Real", "Imag")]
    assert check(b, {"x": signal((2, 3, 8))}, outputs)["Pad"] == 2  # Pad and PadV2 filling zeros are one
    for refused, why in [(b("PadV2", spectrum, rows, b.const(np.complex64(1 + 1j))), "pad value other than"),
                         (b("MirrorPad", spectrum, rows, mode="SYMMETRIC"), "SYMMETRIC mirror padding of a complex")]:
        with pytest.raises(UnsupportedOpError, match=f"'{refused.op.name}'.*{why}"):
            export_with_report(b.graph, ["x"], [b("Real", refused).name])


@pytest.mark.tf
@pytest.mark.parametrize("dct_type, norm", [(1, None), (2, None), (2, "ortho"), (3, "ortho"), (4, None)])
def test_tf_signal_dct_matches_tf(tmp_path, dct_type, norm):
    """tf.signal.dct scales a StridedSlice of an RFFT by complex constants (-O2 folds them), then
    takes the real part: tf2onnx refuses its RFFT."""
    tf = pytest.importorskip("tensorflow")
    from compiler.modelio import load_model
    from compiler.passes import run_pipeline
    from compiler.passes.levels import LEVELS

    concrete = tf.function(lambda t: tf.signal.dct(t, type=dct_type, norm=norm)).get_concrete_function(
        tf.TensorSpec([3, 10]))
    path = tmp_path / "dct.pb"
    path.write_bytes(concrete.graph.as_graph_def().SerializeToString())
    inputs, outputs = [t.op.name for t in concrete.inputs], [t.op.name for t in concrete.outputs]
    graph = run_pipeline(load_model(path), LEVELS[2].pipeline, inputs, outputs).graph
    model = export_with_report(graph, inputs, outputs).model
    x = signal((3, 10), dct_type)
    got = run_onnx(model, {inputs[0]: x}, outputs)[outputs[0]]
    want = concrete(tf.constant(x)).numpy()
    assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()


def test_dft_needs_opset_17():
    b = Builder()
    x = b.input("x", [4, 8])
    with pytest.raises(UnsupportedOpError, match="opset 16: ONNX's DFT needs opset 17"):
        export_with_report(b.graph, ["x"], [b("Real", b("RFFT", x, ints(b, [8]))).name], opset=16)


@pytest.mark.tf
def test_keras_mel_spectrogram_matches_keras():
    keras = keras_seeded(7)
    inputs = keras.Input((400,))
    mel = keras.layers.MelSpectrogram(fft_length=128, sequence_stride=32, sequence_length=100, num_mel_bins=20,
                                      sampling_rate=8000)
    model = keras.Model(inputs, mel(inputs))
    exported = export_keras(model, (400,), optimize=True)  # -O2 folds the mel filter bank's linspace
    counts = exported[0].report.op_counts
    assert counts["DFT"] == 1 and counts["Gather"] >= 2
    assert_matches_keras(model, exported, signal((1, 400), 4), tolerance=1e-4)


@pytest.mark.tf
def test_keras_ops_fft_round_trip_matches_keras():
    keras = keras_seeded(8)
    inputs = keras.Input((32,))
    re, im = keras.ops.rfft(inputs, fft_length=32)
    a, c = keras.ops.fft((re, im))
    restored = keras.ops.irfft((re, im), fft_length=32)
    grid = keras.ops.reshape(inputs, (-1, 4, 8))
    r2, i2 = keras.ops.fft2((grid, keras.ops.flip(grid, axis=-1)))
    flat = keras.ops.reshape(keras.ops.sqrt(r2 * r2 + i2 * i2), (-1, 32))
    model = keras.Model(inputs, keras.ops.concatenate([restored, keras.ops.sqrt(a * a + c * c), flat], axis=-1))
    exported = export_keras(model, (32,))
    assert_matches_keras(model, exported, signal((1, 32), 5))
