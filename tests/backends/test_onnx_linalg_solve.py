"""MatrixInverse, MatrixSolve, Cholesky and MatrixTriangularSolve exported to ONNX from tf.compat.v1 GraphDefs:
outputs against TF's session (within 1e-4 of the largest magnitude) on seeded well-conditioned random matrices
that need row exchanges, batched with run-time batch sizes, for every n from 1 to 8; constant matrices as one
MatMul; node counts; what tf2onnx makes of the same graphs; and the refusals."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import OnnxExportError, UnsupportedOpError, export_with_report
from compiler.backends.onnx.tf2onnx_compare import convert_with_tf2onnx
from compiler.frontends.graphdef import load_graph_bytes
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_ragged import assert_same, frozen
from tests.oracle import run_tf
from tests.runtime.test_kernels_linalg_solve import positive_definite, triangular, well_conditioned

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.tf

SIZES = range(1, 9)


def _export_and_compare(data, inputs, outputs, feeds_list, lower_only: tuple = ()):
    """Export, check, run every feed against TF; returns (report, largest error relative to the largest output)."""
    result = export_with_report(load_graph_bytes(data), inputs, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    worst = 0.0
    for feeds in feeds_list:
        want, got = run_tf(data, feeds, outputs), run_onnx(result.model, feeds, outputs)
        for name in outputs:
            have, expected = np.asarray(got[name]), want[name]
            if name in lower_only:  # TF leaves the upper triangle of a failed Cholesky unwritten
                keep = np.broadcast_to(np.tri(expected.shape[-1], dtype=bool), expected.shape)
                have, expected = np.where(keep, have, 0), np.where(keep, expected, 0)
            if np.isnan(expected).any():
                np.testing.assert_array_equal(np.isnan(have), np.isnan(expected), err_msg=name)
                have, expected = np.nan_to_num(have), np.nan_to_num(expected)
            worst = max(worst, assert_same(have, expected, name))
    return result.report, worst


def _placeholder(dtype, shape, name):
    return tf.compat.v1.placeholder(tf.as_dtype(dtype), shape, name=name)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inverse_and_solve(n, dtype):
    def build():
        a = _placeholder(dtype, [None, n, n], "a")
        b = _placeholder(dtype, [None, n, 3], "b")
        return ["a", "b"], {"inverse": tf.linalg.inv(a), "inverse_adjoint": tf.raw_ops.MatrixInverse(input=a, adjoint=True),
                            "solved": tf.linalg.solve(a, b), "solved_adjoint": tf.linalg.solve(a, b, adjoint=True)}

    data, inputs, outputs = frozen(build)
    rng = np.random.default_rng(n)
    feeds = [{"a": well_conditioned(rng, (batch,), n, dtype), "b": rng.standard_normal((batch, n, 3)).astype(dtype)}
             for batch in (1, 4, 16)]
    report, worst = _export_and_compare(data, inputs, outputs, feeds)
    assert worst < 1e-5
    # Gauss-Jordan: 13 + 14 (n - 2) + 7 nodes over the n columns, 3 to finish, 1 Concat to start; Shape + Expand
    # for each inverse's identities, and one Transpose of `a` that both adjoints read
    per_solve = (13 + 14 * (n - 2) + 7 if n > 1 else 7) + 3 + 1
    assert report.node_count == 4 * per_solve + 2 * 2 + 1, report.op_counts


@pytest.mark.parametrize("n", SIZES)
def test_cholesky_and_triangular_solves(n):
    def build():
        a = _placeholder(np.float32, [None, n, n], "a")
        b = _placeholder(np.float32, [None, n, 2], "b")
        chol = tf.linalg.cholesky(a)
        return ["a", "b"], {"chol": chol, "forward": tf.linalg.triangular_solve(chol, b),
                            "backward": tf.linalg.triangular_solve(chol, b, adjoint=True),
                            "upper": tf.linalg.triangular_solve(tf.linalg.matrix_transpose(chol), b, lower=False)}

    data, inputs, outputs = frozen(build)
    rng = np.random.default_rng(10 + n)
    feeds = []
    for batch in (1, 5):
        a = positive_definite(rng, (batch,), n, np.float32)
        a[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = 7.0  # junk TF never reads
        feeds.append({"a": a, "b": rng.standard_normal((batch, n, 2)).astype(np.float32)})
    report, worst = _export_and_compare(data, inputs, outputs, feeds)
    assert worst < 1e-4


def test_cholesky_of_matrices_that_are_not_positive_definite():
    def build():
        a = _placeholder(np.float64, [None, 4, 4], "a")
        return ["a"], {"chol": tf.linalg.cholesky(a)}

    data, inputs, outputs = frozen(build)
    rng = np.random.default_rng(1)
    good = positive_definite(rng, (), 4, np.float64)
    a = np.stack([good, -good, good - 3 * np.eye(4), good])
    _export_and_compare(data, inputs, outputs, [{"a": a}], lower_only=("chol",))


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_triangular_solve_broadcasts_batches(lower, adjoint):
    def build():
        m = _placeholder(np.float32, [None, 1, 5, 5], "m")
        b = _placeholder(np.float32, [3, 5, 4], "b")
        return ["m", "b"], {"x": tf.linalg.triangular_solve(m, b, lower=lower, adjoint=adjoint)}

    data, inputs, outputs = frozen(build)
    rng = np.random.default_rng(20 + lower + 2 * adjoint)
    feeds = [{"m": triangular(rng, (2, 1), 5, np.float32, lower), "b": rng.standard_normal((3, 5, 4)).astype(np.float32)}]
    report, worst = _export_and_compare(data, inputs, outputs, feeds)
    assert worst < 1e-5
    # per row of unknowns: Slices of the column, diagonal and rhs row, a Div, then Where + Mul + Sub but for
    # the last row; one Concat; a Transpose for the adjoint
    assert report.node_count == 7 * 5 - 3 + 1 + adjoint, report.op_counts


def test_constant_matrices_are_one_matmul():
    rng = np.random.default_rng(3)
    a, t = well_conditioned(rng, (), 12, np.float32), triangular(rng, (), 12, np.float32, True)

    def build():
        b, batched = _placeholder(np.float32, [12, 2], "b"), _placeholder(np.float32, [None, 12, 2], "batched")
        return ["b", "batched"], {"solved": tf.linalg.solve(a, b), "adjoint": tf.linalg.solve(a, b, adjoint=True),
                                  "tri": tf.linalg.triangular_solve(t, batched),  # broadcast over the batch
                                  "tri_adjoint": tf.linalg.triangular_solve(t, batched, adjoint=True)}

    data, inputs, outputs = frozen(build)
    feeds = [{"b": rng.standard_normal((12, 2)).astype(np.float32),
              "batched": rng.standard_normal((k, 12, 2)).astype(np.float32)} for k in (1, 3)]
    report, worst = _export_and_compare(data, inputs, outputs, feeds)
    assert report.op_counts == {"MatMul": 4} and worst < 1e-5


def test_constant_operands_fold_and_singular_ones_are_export_errors():
    rng = np.random.default_rng(4)
    a = well_conditioned(rng, (2,), 3, np.float32)

    def build():
        x = _placeholder(np.float32, [2, 3, 3], "x")
        return ["x"], {"y": x + tf.linalg.inv(a) + tf.linalg.cholesky(positive_definite(rng, (2,), 3, np.float32))}

    data, inputs, outputs = frozen(build)
    report, _ = _export_and_compare(data, inputs, outputs, [{"x": np.ones((2, 3, 3), np.float32)}])
    assert report.op_counts == {"Add": 2}

    def singular():
        b = _placeholder(np.float32, [3, 1], "b")
        return ["b"], {"y": tf.linalg.solve(np.asarray([[1, 2, 3], [2, 4, 6], [0, 0, 1]], np.float32), b)}

    data, inputs, outputs = frozen(singular)
    with pytest.raises(OnnxExportError, match="MatrixSolve.*not invertible"):
        export_with_report(load_graph_bytes(data), inputs, outputs)


def test_refusals_name_op_and_node():
    def build(shape, dtype=np.float32):
        def graph():
            a = _placeholder(dtype, shape, "a")
            return ["a"], {"inverse": tf.linalg.inv(a)}
        return frozen(graph)

    for shape, dtype, reason in [([9, 9], np.float32, "only up to 8x8 .its size is 9"),
                                 ([None, None], np.float32, "size is unknown"),
                                 ([3, 3], np.float16, "type half")]:
        data, inputs, outputs = build(shape, dtype)
        with pytest.raises(UnsupportedOpError, match=rf"'MatrixInverse' \(node 'MatrixInverse'\).*{reason}"):
            export_with_report(load_graph_bytes(data), inputs, outputs)


def test_what_tf2onnx_makes_of_them():
    """tf2onnx leaves all four ops unconverted (MatrixInverse maps only to com.microsoft's Inverse, when asked)."""
    def build():
        a = _placeholder(np.float32, [None, 3, 3], "a")
        b = _placeholder(np.float32, [None, 3, 1], "b")
        chol = tf.linalg.cholesky(a)
        return ["a", "b"], {"i": tf.linalg.inv(a), "s": tf.linalg.solve(a, b), "c": chol,
                            "t": tf.linalg.triangular_solve(chol, b)}

    data, inputs, outputs = frozen(build)
    theirs = {node.op_type for node in convert_with_tf2onnx(data, inputs, outputs).graph.node}
    assert {"MatrixInverse", "MatrixSolve", "Cholesky", "MatrixTriangularSolve"} <= theirs
