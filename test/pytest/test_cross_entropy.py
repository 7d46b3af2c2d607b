"""Cross-entropy on the cpu backend: one kernel for the per-row loss that reads the logits
once and writes N numbers (plus, for the mean, one tiny reduction kernel), in both forms
users write; results against the reference interpreter and an independent numpy formula,
ignore_index rows included; backward as one kernel."""

from __future__ import annotations

import numpy as np
import pytest

from fuser.benchmarks import cases
from fuser.lowering.backends.cpu_runtime import cpu_compiler_available

pytestmark = pytest.mark.skipif(not cpu_compiler_available(), reason="no C++20 compiler for the cpu backend")

SHAPES = [(64, 1000), (4096, 1000), (96, 4099), (64, 32768), (8, 50000)]
TOLERANCE = {"f32": 2e-5, "bf16": 2e-2}


def _row_kernel(kernels):
    persistent = [k for k in kernels if k.scheduler == "inner_persistent" or k.scheduler == "reduction"]
    return max(persistent, key=lambda k: k.bytes_loaded)


def _check(outputs, reference, dtype):
    for out, ref in zip(outputs, reference):
        np.testing.assert_allclose(np.asarray(out, np.float64), np.asarray(ref, np.float64),
                                   rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", SHAPES)
def test_nvfuser_form_is_one_kernel_reading_logits_once(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    fd = cases.build_ce_fwd_nvf(dtype, shape)
    x, y = cases.inputs_ce_fwd_nvf(rng, shape, dtype)
    out = fd.execute([x, y], backend="cpu")
    _check(out, cases.ref_ce_fwd_nvf(x, y), dtype)
    kernels = fd.last_kernels()
    kernel = kernels[0] if kernels else None
    _check(out, fd.execute([x, y], backend="reference"), dtype)
    assert fd.last_kernels() == []  # the reference backend launches nothing
    assert len(kernels) == 1, [k.name for k in kernels]
    n = shape[0]
    assert kernel is not None
    assert kernels[0].bytes_loaded <= 1.02 * (x.nbytes + y.nbytes)
    assert kernels[0].bytes_stored <= 1.02 * n * 4


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", SHAPES)
def test_aot_form_never_writes_log_probabilities(shape, dtype):
    rng = np.random.default_rng(sum(shape) + 1)
    fd = cases.build_ce_fwd_aot(dtype, shape)
    x, y = cases.inputs_ce_fwd_aot(rng, shape, dtype)
    y[1] = cases.IGNORE_INDEX
    out = fd.execute([x, y], backend="cpu")
    _check(out, cases.ref_ce_fwd_aot(x, y), dtype)
    kernels = fd.last_kernels()
    # One kernel: the per-row losses and the mean over non-ignored rows (a grid reduction:
    # the last block combines the blocks' partial sums and counts, 12 bytes a block).
    assert len(kernels) == 1, [(k.name, k.scheduler) for k in kernels]
    (row,) = kernels
    workspace = 16 + kernels[0].grid[0] * 12
    assert row.bytes_loaded <= 1.02 * (x.nbytes + y.nbytes) + workspace
    assert row.bytes_stored <= 4 + workspace


def test_aot_form_with_a_shorter_label_tensor_still_matches_torch_gather():
    """torch.gather allows fewer index rows than logits: that call must not reuse the kernel
    compiled for the exact case, and must still be right."""
    rng = np.random.default_rng(7)
    fd = cases.build_ce_fwd_aot("f32", (16, 100))
    x, y = cases.inputs_ce_fwd_aot(rng, (16, 100), "f32")
    fd.execute([x, y], backend="cpu")
    x2 = rng.standard_normal((16, 100), dtype=np.float32)
    y2 = y[:10].copy()
    # The AOT graph divides a [10] sum by a [10] count: the gather picks rows 0..9 of x2.
    out = fd.execute([x2, y2], backend="cpu")
    _check(out, fd.execute([x2, y2], backend="reference"), "f32")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", [(64, 1000), (32, 32768)])
def test_backward_is_one_kernel(shape, dtype):
    rng = np.random.default_rng(sum(shape) + 2)
    fd = cases.build_ce_bwd(dtype, shape)
    inputs = cases.inputs_ce_bwd(rng, shape, dtype)
    out = fd.execute(inputs, backend="cpu")
    _check(out, cases.ref_ce_bwd(*inputs), dtype)
    kernels = fd.last_kernels()
    assert len(kernels) == 1
    x, y = inputs[0], inputs[1]
    assert kernels[0].bytes_loaded <= 1.02 * (x.nbytes + y.nbytes)
    assert kernels[0].bytes_stored <= 1.02 * x.nbytes


def test_out_of_range_label_is_an_error_before_launch():
    fd = cases.build_ce_fwd_nvf("f32", (4, 10))
    x = np.zeros((4, 10), np.float32) + 1
    with pytest.raises(IndexError, match=r"input 1 .*index 10 is out of range .* extent 10"):
        fd.execute([x, np.array([0, 1, 10, 2])], backend="cpu")


def test_matches_torch_cross_entropy_when_available():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    fd = cases.build_ce_fwd_aot("f32", (32, 500))
    x, y = cases.inputs_ce_fwd_aot(rng, (32, 500), "f32")
    y[2] = cases.IGNORE_INDEX
    (loss,) = fd.execute([x, y], backend="cpu")
    expected = torch.nn.functional.cross_entropy(torch.from_numpy(x), torch.from_numpy(y), ignore_index=-100)
    np.testing.assert_allclose(float(loss), float(expected), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("form", ["ce_fwd_nvf", "ce_fwd_aot", "ce_bwd"])
def test_every_form_matches_the_reference_on_each_backend_under_test(form, dtype, kernel_backend):
    """The three forms on each backend of FUSER_TEST_BACKENDS (the byte counts above are the cpu
    backend's: it counts them)."""
    from lowering_checks import as_numpy

    shape = (96, 4099)
    rng = np.random.default_rng(11)
    fd = getattr(cases, f"build_{form}")(dtype, shape)
    inputs = getattr(cases, "inputs_" + ("ce_bwd" if form == "ce_bwd" else form))(rng, shape, dtype)
    expected = fd.execute(inputs, backend="reference")
    got = fd.execute(inputs, backend=kernel_backend)
    _check([np.asarray(as_numpy(g), np.float64) for g in got],
           [np.asarray(e, np.float64) for e in expected], dtype)
