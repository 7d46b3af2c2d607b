"""Static and symbolic extents unified (issue #12).

A fusion written as frameworks emit it — `broadcast_in_dim(w, [64, 4096], [1])` against a
`[-1, -1]` input — and its symbolic spelling (`broadcast_in_dim(w, x.shape(), [1])`) give the
same kernels and move the same bytes; an input extent that disagrees with a static extent it is
tied to is one clear error, before anything is compiled; only dims tied to a static extent
become static (a batch dim tied to none keeps serving every batch size); and no kernel that
writes nothing is ever planned."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.parser import Parser

from fuser import DataType, FusionDefinition
from fuser_dialect.extents import ExtentError, ExtentPlan, runtime_arguments
from fuser_dialect.fusion import make_context, the_fusion
from fuser_dialect.inputs import check_inputs
from fuser_dialect.types import TensorType
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.schedulers import scheduler_named
from fuser.lowering.segmentation.segment import plan_kernels
from fuser.passes.concretize import concretize
from lowering_checks import check, dram_bytes


def broadcast_to(fd, t, shape, dims, static: bool, like):
    """`broadcast_in_dim` to a static shape (a framework's spelling) or to `like`'s extents."""
    return fd.ops.broadcast_in_dim(t, shape if static else like.shape(), dims)


# --- the fusions, each in both spellings --------------------------------------------------------


def layer_norm(static: bool, n: int = 8, h: int = 64):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        mean = fd.ops.mul(fd.ops.sum(x, [1], keepdim=True), 1.0 / h)
        xc = fd.ops.sub(x, mean)
        var = fd.ops.mul(fd.ops.sum(fd.ops.mul(xc, xc), [1], keepdim=True), 1.0 / h)
        y = fd.ops.mul(xc, fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
        y = fd.ops.mul(y, broadcast_to(fd, w, [n, h], [1], static, x))
        fd.add_output(fd.ops.add(y, broadcast_to(fd, b, [n, h], [1], static, x)))
    rng = np.random.default_rng(0)
    return fd, [rng.standard_normal((n, h), np.float32), rng.standard_normal(h, np.float32),
                rng.standard_normal(h, np.float32)]


def rms_norm(static: bool, n: int = 8, h: int = 64):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        ms = fd.ops.mul(fd.ops.sum(fd.ops.mul(x, x), [1], keepdim=True), 1.0 / h)
        y = fd.ops.mul(x, fd.ops.rsqrt(fd.ops.add(ms, 1e-6)))
        fd.add_output(fd.ops.mul(y, broadcast_to(fd, w, [n, h], [1], static, x)))
    rng = np.random.default_rng(1)
    return fd, [rng.standard_normal((n, h), np.float32), rng.standard_normal(h, np.float32)]


def softmax_mask(static: bool, n: int = 8, h: int = 64):
    """An additive mask before the max, a multiplicative one after the normalisation."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        mask = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        keep = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        xm = fd.ops.add(fd.ops.mul(x, 0.125), broadcast_to(fd, mask, [n, h], [1], static, x))
        e = fd.ops.exp(fd.ops.sub(xm, fd.ops.max(xm, [1], keepdim=True)))
        p = fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True))
        fd.add_output(fd.ops.mul(p, broadcast_to(fd, keep, [n, h], [1], static, x)))
    rng = np.random.default_rng(2)
    return fd, [rng.standard_normal((n, h), np.float32), rng.standard_normal(h, np.float32),
                (rng.random(h) > 0.2).astype(np.float32)]


def bias_gelu(static: bool, n: int = 8, h: int = 96):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        bias = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        t = fd.ops.add(x, broadcast_to(fd, bias, [n, h], [1], static, x))
        inner = fd.ops.mul(fd.ops.add(t, fd.ops.mul(fd.ops.mul(fd.ops.mul(t, t), t), 0.044715)), 0.7978845608)
        fd.add_output(fd.ops.mul(fd.ops.mul(t, 0.5), fd.ops.add(fd.ops.tanh(inner), 1.0)))
    rng = np.random.default_rng(3)
    return fd, [rng.standard_normal((n, h), np.float32), rng.standard_normal(h, np.float32)]


def rope_like(static: bool, b: int = 2, s: int = 16, d: int = 8):
    with FusionDefinition() as fd:
        q = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.Float)
        cos = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        sin = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        qc = fd.ops.mul(q, broadcast_to(fd, cos, [b, s, d], [1, 2], static, q))
        qs = fd.ops.mul(fd.ops.neg(q), broadcast_to(fd, sin, [b, s, d], [1, 2], static, q))
        fd.add_output(fd.ops.add(qc, qs))
    rng = np.random.default_rng(4)
    return fd, [rng.standard_normal((b, s, d), np.float32), rng.standard_normal((s, d), np.float32),
                rng.standard_normal((s, d), np.float32)]


CASES = [layer_norm, rms_norm, softmax_mask, bias_gelu, rope_like]


def concretized_types(fd, inputs) -> list[str]:
    module = fd.module.clone()
    shapes, scalars = runtime_arguments(fd.fusion, check_inputs(fd.fusion, inputs))
    concretize(module, shapes, scalars)
    return [a.type.describe() for a in the_fusion(module).body.block.args if isinstance(a.type, TensorType)]


# --- same kernels, same bytes ------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_static_and_symbolic_spellings_give_the_same_kernels_and_bytes(case):
    fd_static, inputs = case(True)
    fd_symbolic, _ = case(False)
    # Both against the reference interpreter (random inputs, memcheck on in the suite).
    static = check(fd_static, inputs)
    symbolic = check(fd_symbolic, inputs)
    # The DRAM traffic (a broadcast input that each thread re-reads counts once: L2 serves the
    # rest) and every store; how often a thread re-reads a broadcast input may differ with the
    # loop a static extent gives (bias_gelu: 96 static columns are too few for an outer loop).
    assert [(k.scheduler, dram_bytes(k), k.bytes_stored) for k in static] == \
        [(k.scheduler, dram_bytes(k), k.bytes_stored) for k in symbolic]
    assert all(min(k.grid) > 0 for k in static)


def test_static_layer_norm_is_one_row_kernel():
    """The issue's repro: it was inner_persistent + an empty pointwise + a pointwise re-reading
    x (2.95x / 2.00x the minimum bytes)."""
    fd, inputs = layer_norm(True)
    (kernel,) = check(fd, inputs)
    assert kernel.scheduler == "inner_persistent"
    assert kernel.bytes_stored == inputs[0].nbytes


def test_static_spelling_makes_the_tied_input_static():
    fd, inputs = layer_norm(True)
    # w and b expand `?` -> 64; this run decides (in the cache key) that they do not expand, so
    # in every run with that key they are 64 too.
    assert concretized_types(fd, inputs) == ["f32[8, 64]", "f32[64]", "f32[64]"]
    fd, inputs = layer_norm(False)
    assert concretized_types(fd, inputs) == ["f32[?, ?]", "f32[?]", "f32[?]"]


# --- only tied dims become static: the batch keeps serving every size ---------------------------------


def static_hidden(h: int = 16):
    """A static weight [h] fixes x's dim 1; x's batch dim is tied to no static extent."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        w = fd.define_tensor(shape=[h], dtype=DataType.Float)
        fd.add_output(fd.ops.relu(fd.ops.add(x, fd.ops.broadcast(w, [True, False]))))
    return fd


def test_a_batch_dim_tied_to_no_static_extent_stays_symbolic():
    fd = static_hidden()
    rng = np.random.default_rng(5)
    w = rng.standard_normal(16, np.float32)
    assert concretized_types(fd, [rng.standard_normal((3, 16), np.float32), w]) == ["f32[?, 16]", "f32[16]"]
    for batch in (3, 7, 1):
        check(fd, [rng.standard_normal((batch, 16), np.float32), w])
    info = fd.cache_info()
    assert info.misses == 1 and len(info.entries) == 1, info


# --- the run-time check --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("shape, dim, got, needs", [((8, 32), 1, 32, 64), ((4, 64), 0, 4, 8)])
def test_an_extent_disagreeing_with_a_tied_static_extent_is_one_clear_error(backend, shape, dim, got, needs):
    fd, _ = layer_norm(True)
    rng = np.random.default_rng(6)
    inputs = [rng.standard_normal(shape, np.float32)] + [rng.standard_normal(shape[1], np.float32)] * 2
    message = (f"input 0 (f32[?, ?]) dim {dim} has extent {got} but the fusion needs {needs}: "
               f"the dim is tied to fuser.expand -> f32[8, 64], dim {dim}")
    with pytest.raises(ValueError, match=re.escape(message)):
        fd.execute(inputs, backend=backend)
    if backend == "cpu":
        assert fd.cache_info().misses == 0  # rejected before any key or compilation


def test_a_tied_static_input_extent_names_that_input():
    fd = static_hidden()
    rng = np.random.default_rng(7)
    with pytest.raises(ExtentError, match=re.escape(
            "input 0 (f32[?, ?]) dim 1 has extent 15 but the fusion needs 16: the dim is tied to input 1 (f32[16]) dim 0")):
        fd.execute([rng.standard_normal((3, 15), np.float32), rng.standard_normal(16, np.float32)], backend="cpu")


def test_a_cached_static_kernel_is_never_reused_for_other_extents():
    fd, inputs = layer_norm(True)
    check(fd, inputs)
    misses = fd.cache_info().misses
    rng = np.random.default_rng(8)
    for shape in [(16, 64), (8, 128)]:
        bad = [rng.standard_normal(shape, np.float32)] + [rng.standard_normal(shape[1], np.float32)] * 2
        with pytest.raises(ExtentError):
            fd.execute(bad, backend="cpu")
    check(fd, inputs)
    assert fd.cache_info().misses == misses


# --- must not fire ---------------------------------------------------------------------------------------


def test_an_extent_one_weight_is_not_rejected():
    """expand's tie of a `?` dim is not exact (extent 1 expands): the weight stays `?`, and a
    weight of extent 1 passes the check."""
    fd, (x, _, b) = layer_norm(True)
    assert ExtentPlan(fd.fusion).requirements == [
        (0, 0, 8, "fuser.expand -> f32[8, 64], dim 0"), (0, 1, 64, "fuser.expand -> f32[8, 64], dim 1")]
    (out,) = fd.execute([x, np.full(1, 2.0, np.float32), b], backend="reference")
    assert out.shape == (8, 64)


@pytest.mark.parametrize("static", [False, True], ids=["symbolic", "static"])
def test_an_extent_one_weight_expands_in_kernels(static):
    """A `?` weight of extent 1 expanded to the rows: concretize makes it (and what is tied
    to it) broadcast for this run, so kernels read it at index 0; the decision is part of
    the cache key, so the same fusion with a full-length weight still iterates."""
    fd, (x, w, b) = layer_norm(static)
    check(fd, [x, np.full(1, 2.0, np.float32), b])
    check(fd, [x, w, b])
    check(fd, [x, np.full(1, 2.0, np.float32), np.full(1, -1.0, np.float32)])
    assert fd.cache_info().misses == 3


def sliced_then_combined():
    """p = x[:, lo:hi] may broadcast (extent 1); z = p + q; out = z * y with y's dim 1 static 8.
    q's dim 1 must be 8 in every run; x's and p's need not."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        q = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1, 8], dtype=DataType.Float)
        lo = fd.define_scalar(dtype=DataType.Int)
        hi = fd.define_scalar(dtype=DataType.Int)
        p = fd.ops.slice(x, [0, lo], [x.size(0), hi])
        fd.add_output(fd.ops.mul(fd.ops.add(p, q), y))
    return fd


def test_a_dim_that_may_broadcast_ties_nothing():
    fd = sliced_then_combined()
    assert ExtentPlan(fd.fusion).requirements == [(1, 1, 8, "input 2 (f32[?, 8]) dim 1")]
    rng = np.random.default_rng(10)
    x, q, y = (rng.standard_normal(s, np.float32) for s in [(4, 5), (4, 8), (4, 8)])
    check(fd, [x, q, y, 2, 3])  # one column: broadcast
    check(fd, [rng.standard_normal((4, 8), np.float32), q, y, 0, 8])  # eight: iteration
    with pytest.raises(ValueError, match=re.escape("input 1 (f32[?, ?]) dim 1 has extent 7 but the fusion needs 8")):
        fd.execute([x, rng.standard_normal((4, 7), np.float32), y, 2, 3], backend="cpu")


def test_a_symbolic_fusion_has_no_requirements():
    fd, _ = layer_norm(False)
    assert ExtentPlan(fd.fusion).requirements == []


# --- no kernel that writes nothing ----------------------------------------------------------------------

RECOMPUTED_SEGMENT = """
func.func @recomputed(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) {
  %s = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %o = fuser.binary sub %x, %s : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %e = fuser.unary exp %y : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %c = fuser.reduction sum %o dims [0] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?xf32>
  %g = fuser.binary mul %e, %c : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %o, %g : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
"""


def test_a_segment_its_consumer_recomputes_is_not_planned():
    module = Parser(make_context(), RECOMPUTED_SEGMENT).parse_module()
    plans = plan_kernels(the_fusion(module))
    assert [p.index for p in plans] == list(range(len(plans)))
    assert all(p.outputs and p.groups for p in plans)
    exp_op = next(op for op in the_fusion(module).body.block.ops if op.name == "fuser.unary")
    assert [p.scheduler for p in plans if exp_op in p.ops] == ["pointwise"]


def test_the_recomputing_fusion_runs_without_an_empty_launch():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        o = fd.ops.sub(x, fd.ops.sum(x, [1], keepdim=True))
        fd.add_output(o)
        fd.add_output(fd.ops.mul(fd.ops.exp(y), fd.ops.sum(o, [0], keepdim=True)))
    rng = np.random.default_rng(11)
    kernels = check(fd, [rng.standard_normal((6, 10), np.float32), rng.standard_normal((6, 10), np.float32)])
    assert all(min(k.grid) > 0 for k in kernels), [k.grid for k in kernels]


def test_a_kernel_plan_without_outputs_is_refused():
    module = Parser(make_context(), RECOMPUTED_SEGMENT).parse_module()
    exp_op = next(op for op in the_fusion(module).body.block.ops if op.name == "fuser.unary")
    with pytest.raises(ValueError, match="writes no output: a kernel with nothing to compute must not be planned"):
        KernelPlan(index=0, ops=[exp_op], unit=scheduler_named("pointwise"))
