"""Extents given by scalars and constants, and the outputs `execute` returns, on the "reference" and
"cpu" backends: a scalar input as an expand extent, constant and static extents folded, int32
scalars as extents and pad widths, a float scalar as an extent refused with a clear TypeError;
a required output stride order kept with torch inputs, 0-d outputs as tensors (torch inputs) or
arrays (numpy inputs). Each test pins a frontend defect fixed in issue #13."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition

BACKENDS = ["reference", "cpu"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make_input", [lambda x: x, lambda x: x.numpy()], ids=["torch", "numpy"])
def test_required_output_stride_order_kept_with_torch_inputs(backend, make_input):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.neg(t), stride_order=[0, 1])
    x = torch.randn(2, 3)
    for _ in range(2):  # the second call replays a launch plan on the cpu backend
        (out,) = fd.execute([make_input(x)], backend=backend)
        strides = out.stride() if isinstance(out, torch.Tensor) else tuple(s // out.itemsize for s in out.strides)
        assert strides == (1, 2)
        np.testing.assert_array_equal(np.asarray(out), -x.numpy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_expand_of_dynamic_dim_by_scalar_input(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.expand(t, [t.size(0), n]))
    x = torch.randn(3, 1)
    (out,) = fd.execute([x, 5], backend=backend)
    assert tuple(out.shape) == (3, 5)
    torch.testing.assert_close(out, x.expand(3, 5))


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_extents_fold(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        r = fd.ops.reshape(t, [fd.define_scalar(1), t.size(1)])
        assert r.type.shape[0] == -2  # a constant 1 is a broadcast dim, as in nvFuser
        fd.add_output(fd.ops.squeeze(r, [0]))
    x = torch.randn(1, 7)
    (out,) = fd.execute([x], backend=backend)
    torch.testing.assert_close(out, x.reshape(7))


def test_size_of_static_dim_folds_to_its_constant():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[4, -1])
        r = fd.ops.reshape(t, [t.size(1), t.size(0)])
        fd.add_output(r)
    assert r.type.shape == (-1, 4)
    assert "fuser.dim %0, 0" not in str(fd)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(fd.execute([x], backend="cpu")[0], x.reshape(3, 4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_int32_scalars_as_extents_and_pad_widths(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        rows = fd.define_scalar(dtype=DataType.Int32)
        w = fd.define_scalar(dtype=DataType.Int32)
        r = fd.ops.reshape(t, [rows, -1])
        fd.add_output(fd.ops.pad(r, [w, w]))
        fd.add_output(fd.ops.reshape(t, [fd.define_scalar(2, dtype=DataType.Int32), -1]))
    x = torch.arange(6, dtype=torch.float32)
    padded, halves = fd.execute([x, np.int32(3), np.int32(1)], backend=backend)
    torch.testing.assert_close(padded, torch.nn.functional.pad(x.reshape(3, 2), [1, 1]))
    torch.testing.assert_close(halves, x.reshape(2, 3))


def test_float_scalar_as_extent_is_a_clear_type_error():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        with pytest.raises(TypeError, match="expected an integer scalar .* got a f64 Scalar"):
            fd.ops.reshape(t, [fd.define_scalar(dtype=DataType.Double), -1])
        fd.add_output(t)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_dim_outputs_with_torch_inputs(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[])
        fd.add_output(fd.ops.gt(t, 0.0))
        fd.add_output(fd.ops.erf(t))
    x = torch.tensor(0.75)
    positive, erf = fd.execute([x], backend=backend)
    assert isinstance(positive, torch.Tensor) and positive.dim() == 0
    assert positive.item() is True
    torch.testing.assert_close(erf, torch.erf(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_dim_outputs_with_numpy_inputs_are_arrays(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[])
        fd.add_output(fd.ops.lt(t, 0.0))
        fd.add_output(fd.ops.erf(t))
    below, erf = fd.execute([np.array(-0.5, np.float32)], backend=backend)
    assert isinstance(below, np.ndarray) and below.shape == () and bool(below)
    np.testing.assert_allclose(erf, torch.erf(torch.tensor(-0.5)).numpy(), rtol=1e-6)
