"""ONNX lowerings of TF's special functions, which ONNX lacks: Lgamma, Digamma, Ndtri, Erfinv,
BesselI0e, BesselI1e (elementwise formulas) and CumulativeLogsumexp (a Scan).

The elementwise ones compute in the operand's type (half through float, as TF does) with the
classic reductions -- reflection for negative arguments, the gamma recurrence, asymptotic series
for large ones -- and polynomials on the bounded pieces that remain.  The polynomials are not
tabulated: each is the Chebyshev interpolant, in a degree fixed per type, of the float64
evaluations of compiler/runtime/kernels/special_math.py, computed on first use.  Their errors
are ~1e-7 relative in float and ~1e-13 in double (tests/backends/test_onnx_special_math.py
measures them against TF):

- Lgamma: x < 0 reflects (log pi - log|sin(pi r)| - lgamma(1 - x), r = x - round(x)); from
  `stirling_from` on Stirling's series; below it the recurrence moves y into [1.5, 2.5) -- up by
  one or two steps, down by up to `stirling_from - 2` -- where lgamma(2 + e) = e P(e), exact at
  the zeros 1 and 2.  The recurrence's logarithms are one masked vector (a trailing axis of
  shifts) summed by a MatMul with the signs.
- Digamma: x <= 0 reflects (psi(1 - x) - pi cot(pi r), NaN at the poles, as TF); below `shift`
  the recurrence psi(y) = psi(y + shift) - sum 1/(y + k) (one vector again), then the
  asymptotic series.
- Ndtri: p - 1/2 times a polynomial in (p - 1/2)^2 in the centre (min(p, 1 - p) > e^-2), else
  with z = sqrt(-2 log min(p, 1 - p)) the tail form z - (log z + R(1/z)) / z, R a polynomial
  (two pieces in double).  p = 0, 1 give -+inf; a subnormal min(p, 1 - p) counts as 0, as TF's
  flushing CPU kernel has it.  Erfinv(x) is TF's ndtri((x + 1) / 2) / sqrt(2).
- BesselI0e / I1e: below |x| = 8, exp(-|x|) I0(x) (resp. x I1(x)/x) with the I's as polynomials
  in x^2; above, sqrt(1/|x|) G(1/|x|) with G a polynomial (Hankel's expansion summed).
- CumulativeLogsumexp: an ONNX Scan folding TF's step acc <- max + log1p(exp(min - max)) exactly:
  no global shift, so [-200, 0] stays finite in float; min and max are TF's comparisons (a NaN
  element is skipped, a NaN sum sticks), log1p is log(u) - ((u - 1) - e) / u with u = 1 + e.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from numpy.polynomial import chebyshev, polynomial

from compiler.backends.onnx.builder import GraphBuilder
from compiler.backends.onnx.context import INITIALIZER_ELEMENTS, LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.layout import Perm
from compiler.backends.onnx.ops_reduce import StepNode, cumulative_step
from compiler.backends.onnx.registry import AGNOSTIC, lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op
from compiler.runtime.kernels import special_math as reference

# -- polynomial fits ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """A polynomial in (x - center): coefficients lowest degree first."""

    center: float
    coefficients: tuple[float, ...]


def chebyshev_fit(fn: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, degree: int,
                  center: Optional[float] = None) -> Fit:
    """The degree-`degree` Chebyshev interpolant of `fn` on [lo, hi], as a power series around
    `center`, by default the midpoint (well conditioned there: the functions fitted are analytic
    well beyond; a series of positive terms is best taken around its left end)."""
    center = 0.5 * (lo + hi) if center is None else center
    interpolant = chebyshev.Chebyshev.interpolate(lambda s: fn(s + center), degree, domain=[lo - center, hi - center])
    shifted = interpolant.convert(kind=polynomial.Polynomial)
    return Fit(center, tuple(float(c) for c in shifted.coef))


@dataclass(frozen=True)
class Precision:
    """Per compute type: polynomial degrees and series lengths giving the type's accuracy."""

    lgamma_degree: int
    stirling_from: int
    stirling_terms: int
    digamma_shift: int
    digamma_terms: int
    ndtri_central_degree: int
    ndtri_tails: tuple[tuple[float, float, int], ...]  # (z from, z to, degree)
    bessel_near_degree: int
    bessel_far_degree: int


# z = sqrt(-2 log q) reaches 13.2 at float's smallest normal q and 37.6 at double's.
_PRECISION = {
    DType.FLOAT: Precision(lgamma_degree=9, stirling_from=8, stirling_terms=2, digamma_shift=8, digamma_terms=3,
                           ndtri_central_degree=9, ndtri_tails=((2.0, 13.3, 10),), bessel_near_degree=10,
                           bessel_far_degree=8),
    DType.DOUBLE: Precision(lgamma_degree=17, stirling_from=16, stirling_terms=6, digamma_shift=16, digamma_terms=6,
                            ndtri_central_degree=17, ndtri_tails=((2.0, 8.0, 17), (8.0, 37.7, 13)),
                            bessel_near_degree=14, bessel_far_degree=16),
}
_COMPUTE_TYPE = {DType.HALF: DType.FLOAT, DType.FLOAT: DType.FLOAT, DType.DOUBLE: DType.DOUBLE}
_BESSEL_SPLIT = 8.0
_NDTRI_TAIL_FROM = math.exp(-2.0)


def _lgamma_ratio(e: np.ndarray) -> np.ndarray:
    """lgamma(2 + e) / e, from the Taylor series at 2 (1 - gamma at e = 0)."""
    safe = np.where(e == 0, 1.0, e)
    return np.where(e == 0, 1.0 - reference.EULER_GAMMA, reference.lgamma_taylor_at_two(e) / safe)


def _ndtri_central(u: np.ndarray) -> np.ndarray:
    """ndtri(1/2 + c) / c as a function of u = c^2."""
    c = np.sqrt(u)
    safe = np.where(c == 0, 1.0, c)
    return np.where(c == 0, math.sqrt(2 * math.pi), reference.ndtri(0.5 + c) / safe)


def _ndtri_tail(t: np.ndarray) -> np.ndarray:
    """R(t) = z (z - log(z) / z - |ndtri(q)|) for z = 1/t, q = exp(-z^2 / 2)."""
    z = 1.0 / t
    return z * (z - np.log(z) / z + reference.ndtri(np.exp(-0.5 * z * z)))


def _bessel_near(order: int) -> Callable[[np.ndarray], np.ndarray]:
    """I0(x), resp. I1(x) / x, as a function of u = x^2."""
    def fn(u: np.ndarray) -> np.ndarray:
        x = np.sqrt(u)
        value = reference.bessel_scaled(x, order) * np.exp(x)
        return value if order == 0 else np.where(x == 0, 0.5, value / np.where(x == 0, 1.0, x))
    return fn


def _bessel_far(order: int) -> Callable[[np.ndarray], np.ndarray]:
    """sqrt(x) exp(-x) I_order(x) as a function of t = 1/x."""
    def fn(t: np.ndarray) -> np.ndarray:
        x = 1.0 / t
        return reference.bessel_scaled(x, order) * np.sqrt(x)
    return fn


@functools.lru_cache(maxsize=None)
def fits(dtype: DType) -> dict[str, Fit]:
    """Every polynomial one compute type uses, made once."""
    p = _PRECISION[dtype]
    found = {"lgamma": chebyshev_fit(_lgamma_ratio, -0.5, 0.5, p.lgamma_degree),
             "ndtri_central": chebyshev_fit(_ndtri_central, 0.0, (0.5 - _NDTRI_TAIL_FROM) ** 2,
                                            p.ndtri_central_degree)}
    for i, (z_from, z_to, degree) in enumerate(p.ndtri_tails):
        found[f"ndtri_tail{i}"] = chebyshev_fit(_ndtri_tail, 1.0 / z_to, 1.0 / z_from, degree)
    for order in (0, 1):
        found[f"bessel{order}_near"] = chebyshev_fit(_bessel_near(order), 0.0, _BESSEL_SPLIT ** 2,
                                                     p.bessel_near_degree, center=0.0)
        found[f"bessel{order}_far"] = chebyshev_fit(_bessel_far(order), 0.0, 1.0 / _BESSEL_SPLIT,
                                                    p.bessel_far_degree)
    return found


# -- emission -----------------------------------------------------------------------------------


class Emitter:
    """Helper nodes of one TF node, computing in one float type; `finish` emits the main node
    (cast back to half when the operand is half)."""

    def __init__(self, ctx: LoweringContext, op: Op, dtype: DType, compute: DType) -> None:
        self.ctx, self.op, self.dtype, self.compute = ctx, op, dtype, compute

    def __call__(self, op_type: str, *inputs: str, **attrs: object) -> str:
        return self.ctx.helper1(self.op, op_type.lower(), op_type, list(inputs), **attrs)

    def c(self, value: float) -> str:
        """A scalar constant in the compute type."""
        return self.ctx.scalar(value, self.compute, "c")

    def vector(self, values) -> str:
        return self.ctx.initializer(np.asarray(values, self.compute.to_numpy()), f"{self.op.name}/shifts")

    def poly(self, x: str, fit: Fit) -> str:
        """The fitted polynomial at x, by Horner's rule in (x - center)."""
        t = self("Sub", x, self.c(fit.center))
        acc = self.c(fit.coefficients[-1])
        for coefficient in reversed(fit.coefficients[:-1]):
            acc = self("Add", self("Mul", acc, t), self.c(coefficient))
        return acc

    def series(self, x: str, coefficients) -> str:
        """sum_k coefficients[k] x^k by Horner's rule."""
        acc = self.c(coefficients[-1])
        for coefficient in reversed(coefficients[:-1]):
            acc = self("Add", self("Mul", acc, x), self.c(coefficient))
        return acc

    def unsqueezed(self, x: str) -> str:
        """x with a trailing axis of size 1 (for a vector of shifts to broadcast along)."""
        return self("Unsqueeze", x, self.ctx.ints([-1], f"{self.op.name}/last"))

    def finish(self, op_type: str, *inputs: str, perm: Perm = None) -> None:
        if self.dtype == self.compute:
            out = self.ctx.emit1(self.op, op_type, list(inputs))
        else:
            out = self.ctx.emit1(self.op, "Cast", [self(op_type, *inputs)], to=onnx_type(self.dtype))
        self.ctx.bind(self.op.results[0], out, perm)


_ELEMENTWISE_TYPES = {"Lgamma": (DType.HALF, DType.FLOAT, DType.DOUBLE), "Digamma": (DType.HALF, DType.FLOAT, DType.DOUBLE),
                      "BesselI0e": (DType.HALF, DType.FLOAT, DType.DOUBLE),
                      "BesselI1e": (DType.HALF, DType.FLOAT, DType.DOUBLE),
                      "Ndtri": (DType.FLOAT, DType.DOUBLE), "Erfinv": (DType.FLOAT, DType.DOUBLE)}


def _type_name(dtype: Optional[DType]) -> str:
    return "an unknown type" if dtype is None else dtype.name.lower()


def _start(ctx: LoweringContext, op: Op) -> tuple[Emitter, str, Perm]:
    """The emitter and the operand in the compute type (in whatever layout it is stored)."""
    dtype = ctx.dtype(op.results[0])
    allowed = _ELEMENTWISE_TYPES[op.type]
    if dtype not in allowed:
        names = ", ".join(t.name.lower() for t in allowed)
        raise UnsupportedOpError(op.type, op.name, f"{_type_name(dtype)} (TF's CPU kernel, and this lowering, "
                                                   f"take {names})")
    compute = _COMPUTE_TYPE[dtype]
    found = ctx.agnostic_operand(op)
    em = Emitter(ctx, op, dtype, compute)
    x = found.tensor if dtype == compute else em("Cast", found.tensor, to=onnx_type(compute))
    return em, x, found.perm


def _mantissa_limit(compute: DType) -> float:
    """From this magnitude on every float of the type is an integer."""
    return 2.0 ** (24 if compute == DType.FLOAT else 53)


# -- Lgamma -------------------------------------------------------------------------------------


def _stirling(em: Emitter, z: str, terms: int) -> str:
    """lgamma(z) = (z - 1/2)(log z - 1) + log(2 pi)/2 - 1/2 + sum_k B_2k / (2k (2k-1) z^(2k-1))."""
    bernoulli = reference.bernoulli_even(terms)
    u = em("Reciprocal", z)
    coefficients = [b / (2 * k * (2 * k - 1)) for k, b in enumerate(bernoulli, start=1)]
    correction = em("Mul", em.series(em("Mul", u, u), coefficients), u)
    base = em("Mul", em("Sub", z, em.c(0.5)), em("Sub", em("Log", z), em.c(1.0)))
    return em("Add", em("Add", base, em.c(0.5 * math.log(2 * math.pi) - 0.5)), correction)


@lowers("Lgamma", layout=AGNOSTIC)
def _lgamma(ctx: LoweringContext, op: Op) -> None:
    em, x, perm = _start(ctx, op)
    p = _PRECISION[em.compute]
    negative = em("Less", x, em.c(0.0))
    finite_x = em("Max", x, em.c(-_mantissa_limit(em.compute)))  # -inf: a pole like any huge negative
    y = em("Where", negative, em("Sub", em.c(1.0), finite_x), x)
    # Recurrence into [1.5, 2.5): shift = floor(y - 1/2) - 1 steps down (negative: up).
    top = float(p.stirling_from)
    clipped = em("Min", y, em.c(top))
    steps = em("Floor", em("Sub", clipped, em.c(0.5)))  # shift + 1
    e = em("Sub", em("Sub", clipped, em.c(1.0)), steps)  # exact where it matters (near 1 and 2)
    shifts = list(range(-1, p.stirling_from - 1))  # up: log(y + 1), log(y); down: log(y - 1), ...
    lowered = em("Sub", em.unsqueezed(clipped), em.vector(shifts))
    below = em("Less", em.vector(shifts), em.unsqueezed(steps))
    taken = em("Equal", below, ctx.initializer(np.asarray([s >= 1 for s in shifts]), f"{op.name}/downward"))
    logs = em("Where", taken, em("Log", lowered), em.c(0.0))
    signs = em.vector([1.0 if s >= 1 else -1.0 for s in shifts])
    recurrence = em("MatMul", logs, signs)
    near = em("Add", em("Mul", em.poly(e, fits(em.compute)["lgamma"]), e), recurrence)
    positive = em("Where", em("Less", y, em.c(top)), near, _stirling(em, y, p.stirling_terms))
    # Reflection: lgamma(x) = log pi - log|sin(pi r)| - lgamma(1 - x); r = 0 at the poles.
    r = em("Sub", finite_x, em("Round", finite_x))
    log_sine = em("Log", em("Abs", em("Sin", em("Mul", r, em.c(math.pi)))))
    reflected = em("Sub", em("Sub", em.c(math.log(math.pi)), log_sine), positive)
    em.finish("Where", negative, reflected, positive, perm=perm)


# -- Digamma ------------------------------------------------------------------------------------


@lowers("Digamma", layout=AGNOSTIC)
def _digamma(ctx: LoweringContext, op: Op) -> None:
    em, x, perm = _start(ctx, op)
    p = _PRECISION[em.compute]
    reflect = em("LessOrEqual", x, em.c(0.0))
    y = em("Where", reflect, em("Sub", em.c(1.0), x), x)
    shift = float(p.digamma_shift)
    low = em("Less", y, em.c(shift))
    m = em("Where", low, em("Add", y, em.c(shift)), y)
    axis = ctx.ints([-1], f"{op.name}/last")
    steps = em("ReduceSum", em("Reciprocal", em("Add", em.unsqueezed(y), em.vector(range(p.digamma_shift)))), axis,
               keepdims=0)
    lifted = em("Where", low, steps, em.c(0.0))
    r = em("Reciprocal", m)
    u = em("Mul", r, r)
    coefficients = [b / (2 * k) for k, b in enumerate(reference.bernoulli_even(p.digamma_terms), start=1)]
    series = em("Mul", em.series(u, coefficients), u)
    value = em("Sub", em("Sub", em("Sub", em("Log", m), em("Mul", r, em.c(0.5))), series), lifted)
    # Reflection: psi(x) = psi(1 - x) - pi cot(pi r), r = x - round(x) (NaN at the poles, as TF).
    nearest = em("Sub", x, em("Round", x))
    angle = em("Mul", nearest, em.c(math.pi))
    if em.compute == DType.FLOAT:
        cotangent = em("Div", em.c(math.pi), em("Tan", angle))
    else:  # onnxruntime has no double Tan
        cotangent = em("Div", em("Mul", em("Cos", angle), em.c(math.pi)), em("Sin", angle))
    reflected = em("Where", em("Equal", nearest, em.c(0.0)), em.c(math.nan), em("Sub", value, cotangent))
    em.finish("Where", reflect, reflected, value, perm=perm)


# -- Ndtri and Erfinv -----------------------------------------------------------------------------


def _ndtri(em: Emitter, p: str) -> tuple[str, str, str]:
    """The normal quantile of p (see the module docstring), as the operands of its last Where."""
    prec = _PRECISION[em.compute]
    table = fits(em.compute)
    c = em("Sub", p, em.c(0.5))
    q = em("Min", p, em("Sub", em.c(1.0), p))
    central = em("Mul", c, em.poly(em("Mul", c, c), table["ndtri_central"]))
    z = em("Sqrt", em("Mul", em("Log", q), em.c(-2.0)))
    t = em("Reciprocal", z)
    remainder = em.poly(t, table["ndtri_tail0"])
    for i, (z_from, _, _) in enumerate(prec.ndtri_tails[1:], start=1):
        remainder = em("Where", em("Less", z, em.c(z_from)), remainder, em.poly(t, table[f"ndtri_tail{i}"]))
    magnitude = em("Sub", z, em("Mul", em("Add", em("Log", z), remainder), t))
    sign = em("Sign", c)
    value = em("Where", em("Less", q, em.c(_NDTRI_TAIL_FROM)), em("Mul", sign, magnitude), central)
    tiny = float(np.finfo(em.compute.to_numpy()).tiny)
    at_end = em("And", em("Less", q, em.c(tiny)), em("GreaterOrEqual", q, em.c(0.0)))
    return at_end, em("Mul", sign, em.c(math.inf)), value


@lowers("Ndtri", layout=AGNOSTIC)
def _ndtri_op(ctx: LoweringContext, op: Op) -> None:
    em, p, perm = _start(ctx, op)
    em.finish("Where", *_ndtri(em, p), perm=perm)


@lowers("Erfinv", layout=AGNOSTIC)
def _erfinv(ctx: LoweringContext, op: Op) -> None:
    """TF's ndtri((x + 1) / 2) / sqrt(2), the halving in the operand type as TF does it."""
    em, x, perm = _start(ctx, op)
    p = em("Mul", em("Add", x, em.c(1.0)), em.c(0.5))
    em.finish("Mul", em("Where", *_ndtri(em, p)), em.c(math.sqrt(0.5)), perm=perm)


# -- BesselI0e and BesselI1e ----------------------------------------------------------------------


@lowers("BesselI0e", "BesselI1e", layout=AGNOSTIC)
def _bessel(ctx: LoweringContext, op: Op) -> None:
    em, x, perm = _start(ctx, op)
    order = 0 if op.type == "BesselI0e" else 1
    table = fits(em.compute)
    magnitude = em("Abs", x)
    power = em.poly(em("Mul", x, x), table[f"bessel{order}_near"])
    if order:
        power = em("Mul", power, x)
    near = em("Mul", power, em("Exp", em("Neg", magnitude)))
    t = em("Reciprocal", magnitude)
    far = em("Mul", em.poly(t, table[f"bessel{order}_far"]), em("Sqrt", t))
    if order:
        far = em("Mul", far, em("Sign", x))
    em.finish("Where", em("Less", magnitude, em.c(_BESSEL_SPLIT)), near, far, perm=perm)


# -- CumulativeLogsumexp --------------------------------------------------------------------------

_SCAN_TYPES = (DType.HALF, DType.BFLOAT16, DType.FLOAT, DType.DOUBLE)


@lowers("CumulativeLogsumexp")
def _cumulative_logsumexp(ctx: LoweringContext, op: Op) -> None:
    """A Scan along the axis (backward when reversed) carrying the log-sum-exp so far, from -inf;
    each step emits it after (inclusive) or before (exclusive) adding its slice."""
    dtype = ctx.dtype(op.results[0])
    if dtype not in _SCAN_TYPES:
        raise UnsupportedOpError(op.type, op.name, f"{_type_name(dtype)} (TF takes half, bfloat16, float and double)")
    rank = ctx.rank(op.operands[0])
    if rank is None or rank == 0:
        raise UnsupportedOpError(op.type, op.name, "needs an input of known rank >= 1")
    axis_value = ctx.constant(op.operands[1])
    if axis_value is None or axis_value.size != 1:
        raise UnsupportedOpError(op.type, op.name, "the axis must be a constant scalar (ONNX Scan takes it as an attribute)")
    axis = int(axis_value.reshape(()))
    if not -rank <= axis < rank:
        raise UnsupportedOpError(op.type, op.name, f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    tensor = ctx.operand(op, 0)
    dims = ctx.shape(op.operands[0]).dims or (None,) * rank
    if dims[axis] == 0:
        ctx.bind(op.results[0], tensor)  # nothing to scan (and onnxruntime's Scan fails on it)
        return
    compute = DType.DOUBLE if dtype == DType.DOUBLE else DType.FLOAT
    if compute != dtype:
        tensor = ctx.helper1(op, "wide", "Cast", [tensor], to=onnx_type(compute))
    slice_dims = dims[:axis] + dims[axis + 1:]
    start = _minus_infinity(ctx, op, tensor, compute, axis, rank, slice_dims)
    body = _logsumexp_step(ctx, op, compute, bool(op.attr("exclusive", False)), slice_dims)
    backward = int(bool(op.attr("reverse", False)))
    attrs = dict(body=body, num_scan_inputs=1, scan_input_axes=[axis], scan_output_axes=[axis],
                 scan_input_directions=[backward], scan_output_directions=[backward])
    scanned = ctx.helper(op, "scan", "Scan", [start, tensor], 2, **attrs)[1]
    if compute != dtype:
        scanned = ctx.emit1(op, "Cast", [scanned], to=onnx_type(dtype))
    ctx.bind(op.results[0], scanned)


def _minus_infinity(ctx: LoweringContext, op: Op, tensor: str, compute: DType, axis: int, rank: int,
                    slice_dims: tuple) -> str:
    """-inf in the shape of one slice: a constant when that shape is static and small."""
    if all(d is not None for d in slice_dims) and int(np.prod(slice_dims)) <= INITIALIZER_ELEMENTS:
        return ctx.initializer(np.full(slice_dims, -np.inf, compute.to_numpy()), f"{op.name}/start")
    others = ctx.ints([a for a in range(rank) if a != axis], f"{op.name}/other_axes")
    shape = ctx.helper1(op, "slice_shape", "Gather", [ctx.helper1(op, "shape", "Shape", [tensor]), others])
    return ctx.helper1(op, "start", "Expand", [ctx.scalar(-np.inf, compute, "minus_inf"), shape])


def _logsumexp_step(ctx: LoweringContext, op: Op, compute: DType, exclusive: bool, dims: tuple) -> GraphBuilder:
    """Scan body (sum so far, next slice) -> (new sum, the slice's output)."""
    def c(value: float) -> str:
        return ctx.scalar(value, compute, "c")

    def combine(node: StepNode, acc: str, piece: str) -> str:
        low = node("Where", node("Less", piece, acc), piece, acc)
        high = node("Where", node("Less", acc, piece), piece, acc)
        e = node("Exp", node("Sub", low, high))
        u = node("Add", e, c(1.0))
        log1p = node("Sub", node("Log", u), node("Div", node("Sub", node("Sub", u, c(1.0)), e), u))
        return node("Where", node("Equal", high, c(-math.inf)), high, node("Add", high, log1p))

    return cumulative_step(ctx, op, compute, exclusive, dims, combine)
