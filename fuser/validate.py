"""`FusionDefinition.validate`: run a fusion and check its outputs against a reference.

nvFuser's `fd.validate(inputs, reference_outputs)` compares with tolerances chosen per dtype and
grown with the size of the reductions behind each output (its testValidate). Here the same:
without `reference_outputs`, the reference is fuser's numpy interpreter (backend "reference"),
the role ATen's evaluation plays in nvFuser.

Per output: the shape and dtype must be the reference's; integer and bool values must be equal;
float and complex values must satisfy |got - want| <= atol + rtol * |want|, NaN where the reference
has NaN and the same infinities. rtol and atol are the dtype's tolerance (`BASE_TOLERANCE`) times
sqrt(k) for an output computed through reductions over k elements in all (k = 1 without any),
unless the caller gives them. A failure raises `ValidationError` (an AssertionError) naming the
output, the worst element, both values and the tolerance."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fuser_dialect.extents import evaluate_extents, runtime_arguments
from fuser_dialect.fusion import the_fusion
from fuser_dialect.inputs import to_numpy
from fuser_dialect.interpreter import backward_slice
from fuser_dialect.ops_compute import DimsReduction
from fuser_dialect.ops_matmul import LinearOp, MatmulOp
from fuser_dialect.ops_scan import ScanOp
from fuser_dialect.types import TensorType

BASE_TOLERANCE = {"f64": 1e-10, "f32": 1e-5, "f16": 1e-3, "bf16": 8e-3, "f8E4M3FN": 0.125, "f8E5M2": 0.25,
                  "c64": 1e-5, "c128": 1e-10}
"""rtol = atol per float dtype for an output without reductions (a few units in the last place)."""


class ValidationError(AssertionError):
    """An output of `fd.validate` differs from its reference (the message says where and how)."""


def validate(fd, inputs: Sequence[object], reference_outputs: Sequence[object] | None = None,
             backend: str | None = None, rtol: float | None = None, atol: float | None = None) -> list:
    """Executes `fd` on `inputs` and checks every output (see the module doc); returns the outputs."""
    if reference_outputs is None:
        # First, on copies of the inputs that outputs are written into (batch_norm's running
        # statistics): the run below then starts from the same values, and updates them once.
        reference_outputs = fd.execute(_copies_of_alias_targets(fd, inputs), backend="reference")
    outputs = fd.execute(inputs, backend=backend)
    if len(reference_outputs) != len(outputs):
        raise ValidationError(f"the fusion has {len(outputs)} output(s) but {len(reference_outputs)} reference "
                              f"output(s) were given")
    fusion = the_fusion(fd.module)
    # The fusion's results without those written into inputs: what `execute` returns.
    returned = [v for i, v in enumerate(fusion.body.block.last_op.operands) if i not in fd.aliases]
    flat_inputs = fd._flat_inputs(inputs) if fd.vector_inputs else inputs
    sizes = _reduction_sizes(fusion, returned, flat_inputs)
    for k, (got, want) in enumerate(zip(outputs, reference_outputs)):
        dtype = returned[k].type.dtype if isinstance(returned[k].type, TensorType) else None
        _check_output(k, got, want, dtype, sizes[k], rtol, atol)
    return outputs


def _copies_of_alias_targets(fd, inputs: Sequence[object]) -> list:
    """The inputs, one per argument, with those that outputs are written into copied."""
    copied = fd._flat_inputs(inputs) if fd.vector_inputs else list(inputs)
    for arg in fd.aliases.values():
        x = copied[arg]
        copied[arg] = x.clone() if hasattr(x, "clone") else np.array(x, copy=True)
    return copied


def _reduction_sizes(fusion, returned, inputs) -> list[int]:
    """Per output, how many elements the reductions it is computed through fold in all."""
    extents = evaluate_extents(fusion, *runtime_arguments(fusion, inputs))
    return [math.prod(_folded(op, extents) for op in backward_slice(fusion, [value])) for value in returned]


def _folded(op, extents) -> int:
    """How many elements `op` folds into one (1 for an elementwise or layout op)."""
    if isinstance(op, DimsReduction):
        shape = extents.shape(op.input)
        return math.prod(shape[d] for d in op.reduced_dims)
    if isinstance(op, ScanOp):
        return extents.shape(op.input)[op.axis]
    if isinstance(op, (MatmulOp, LinearOp)):  # the contracted dim: the first operand's last
        shape = extents.shape(op.arg1 if isinstance(op, MatmulOp) else op.input)
        return shape[-1] if shape else 1
    return 1


def _show(element) -> str:
    return repr(element.item() if isinstance(element, np.generic) else element)


def _as_array(value) -> np.ndarray:
    return np.asarray(to_numpy(value))


def _check_output(k: int, got, want, dtype: str | None, reduced: int, rtol: float | None, atol: float | None):
    got, want = _as_array(got), _as_array(want)
    where = f"output {k}"
    if got.shape != want.shape:
        raise ValidationError(f"{where}: shape {list(got.shape)}, the reference's is {list(want.shape)}")
    if got.dtype != want.dtype:
        raise ValidationError(f"{where}: dtype {got.dtype}, the reference's is {want.dtype}")
    if got.size == 0:
        return
    if not (np.issubdtype(want.dtype, np.inexact) or dtype in BASE_TOLERANCE):
        bad = np.flatnonzero(got.ravel() != want.ravel())
        if bad.size:
            i = np.unravel_index(bad[0], got.shape)
            raise ValidationError(f"{where}: {bad.size} element(s) differ; first at {list(map(int, i))}: "
                                  f"{_show(got[i])}, the reference has {_show(want[i])}")
        return
    base = BASE_TOLERANCE.get(dtype or "", 1e-5) * math.sqrt(max(1, reduced))
    rtol = base if rtol is None else rtol
    atol = base if atol is None else atol
    g = got.astype(np.complex128 if np.iscomplexobj(want) or np.iscomplexobj(got) else np.float64)
    w = want.astype(g.dtype)
    parts = [(g.real, w.real), (g.imag, w.imag)] if np.iscomplexobj(g) else [(g, w)]
    for a, b in parts:
        nan_mismatch = np.isnan(a) != np.isnan(b)
        inf_mismatch = (np.isinf(a) | np.isinf(b)) & (a != b) & ~np.isnan(a) & ~np.isnan(b)
        finite = np.isfinite(a) & np.isfinite(b)
        with np.errstate(invalid="ignore"):
            excess = np.where(finite, np.abs(a - b) - (atol + rtol * np.abs(b)), 0.0)
        bad = nan_mismatch | inf_mismatch | (excess > 0)
        if bad.any():
            worst = int(np.argmax(np.where(bad, np.where(finite, excess, np.inf), -np.inf)))
            i = tuple(int(j) for j in np.unravel_index(worst, a.shape))
            raise ValidationError(
                f"{where}: {int(bad.sum())} of {a.size} element(s) outside the tolerance; the worst at {list(i)}: "
                f"{_show(got[i])}, the reference has {_show(want[i])} (rtol {rtol:.3g}, atol {atol:.3g}"
                f"{f', reductions over {reduced} elements' if reduced > 1 else ''})")


__all__ = ["BASE_TOLERANCE", "ValidationError", "validate"]
