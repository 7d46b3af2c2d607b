"""fd.ops.batch_norm (fuser_dialect/builder_norm.py) against torch: the output, the batch (or
running) statistics it returns, and the running statistics it updates in place, in training and
inference, NCHW and channels-last, f32 and 16-bit inputs, on the reference and cpu backends."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fuser import DataType, FusionDefinition

BACKENDS = ["reference", "cpu"]
DTYPES = {torch.float32: DataType.Float, torch.bfloat16: DataType.BFloat16, torch.float16: DataType.Half}


def _fusion(dtype: DataType, training: bool, channels_last: bool, affine=True, running=True, momentum=0.1):
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1, -1, -1], dtype=dtype)
        w, b = (fd.define_tensor([-1]), fd.define_tensor([-1])) if affine else (None, None)
        rm, rv = (fd.define_tensor([-1]), fd.define_tensor([-1])) if running else (None, None)
        if isinstance(momentum, str):
            momentum = fd.define_scalar(dtype=DataType.Double)
        y, mean, invstd = fd.ops.batch_norm(x, w, b, rm, rv, momentum, 1e-5, training, channels_last)
        for t in (y, mean, invstd):
            fd.add_output(t)
    return fd


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_matches_torch(backend, training, channels_last, dtype):
    torch.manual_seed(0)
    fd = _fusion(DTYPES[dtype], training, channels_last)
    x = (torch.randn(4, 3, 5, 6) * 2 + 1).to(dtype)
    w, b = torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    layout = x.permute(0, 2, 3, 1).contiguous() if channels_last else x  # channels as the last dim
    ours_rm, ours_rv = rm.clone(), rv.clone()
    y, mean, invstd = fd.execute([layout, w, b, ours_rm, ours_rv], backend=backend)
    want_rm, want_rv = rm.clone(), rv.clone()
    want, save_mean, save_invstd = torch.ops.aten.native_batch_norm(x.float(), w, b, want_rm, want_rv, training,
                                                                   0.1, 1e-5)
    want = want.to(dtype)
    if channels_last:
        want = want.permute(0, 2, 3, 1)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    assert y.dtype == dtype and mean.dtype == invstd.dtype == torch.float32
    torch.testing.assert_close(y, want, **tol)
    if training:
        torch.testing.assert_close(mean, save_mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(invstd, save_invstd, rtol=1e-5, atol=1e-6)
    else:  # nvFuser's inference statistics: the running mean and 1/sqrt(running_var + eps)
        torch.testing.assert_close(mean, rm)
        torch.testing.assert_close(invstd, torch.rsqrt(rv + 1e-5))
    torch.testing.assert_close(ours_rm, want_rm, rtol=1e-5, atol=1e-6)  # updated in place (training)
    torch.testing.assert_close(ours_rv, want_rv, rtol=1e-5, atol=1e-6)
    fd.execute([layout, w, b, ours_rm, ours_rv], backend=backend)  # a cached call updates them again
    torch.ops.aten.native_batch_norm(x.float(), w, b, want_rm, want_rv, training, 0.1, 1e-5)
    torch.testing.assert_close((ours_rm, ours_rv), (want_rm, want_rv), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_affine_or_running_stats_and_with_a_scalar_momentum(backend):
    x = torch.randn(2, 4, 7, 3)
    fd = _fusion(DataType.Float, True, False, affine=False, running=False)
    y, mean, invstd = fd.execute([x], backend=backend)
    torch.testing.assert_close(y, F.batch_norm(x, None, None, training=True, eps=1e-5), rtol=1e-5, atol=1e-5)
    fd = _fusion(DataType.Float, True, False, affine=False, momentum="input")
    rm, rv = torch.zeros(4), torch.ones(4)
    want_rm, want_rv = rm.clone(), rv.clone()
    fd.execute([x, rm, rv, 0.3], backend=backend)
    F.batch_norm(x, want_rm, want_rv, training=True, momentum=0.3, eps=1e-5)
    torch.testing.assert_close((rm, rv), (want_rm, want_rv), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("build, error, message", [
    (lambda fd, x, v: fd.ops.batch_norm(x, None, None, None, None, 0.1, 1e-5, False), ValueError,
     r"inference \(training=False\) normalizes with running_mean and running_var"),
    (lambda fd, x, v: fd.ops.batch_norm(x, None, None, v, None, 0.1, 1e-5, True), ValueError,
     "give both running_mean and running_var, or neither"),
    (lambda fd, x, v: fd.ops.batch_norm(v, None, None, None, None, 0.1, 1e-5, True), ValueError,
     r"input needs a channel dim \(rank >= 2\), got the 1-d"),
    (lambda fd, x, v: fd.ops.batch_norm(x, None, None, None, None, 0.1, 1e-5, 1), TypeError,
     "training must be a Python bool"),
    (lambda fd, x, v: fd.ops.batch_norm(x, x, None, None, None, 0.1, 1e-5, True), ValueError,
     r"per-channel tensors are 1-d \[C\]"),
])
def test_errors_name_the_argument(build, error, message):
    with pytest.raises(error, match=message):
        with FusionDefinition() as fd:
            build(fd, fd.define_tensor([-1, -1, -1]), fd.define_tensor([-1]))
