"""fd.ops.matmul and fd.ops.linear against torch, on the "reference" backend (the interpreter)
and the "cpu" backend (host segments between generated kernels), with numpy and torch CPU
inputs; segmentation around host segments; their records, bytes and launch-plan replay."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fuser import DataType, FusionDefinition
from lowering_checks import requires_cpu_backend

BACKENDS = ["reference", pytest.param("cpu", marks=requires_cpu_backend)]
DTYPES = {  # fuser dtype: (torch dtype, rtol, atol)
    DataType.Double: (torch.float64, 1e-10, 1e-10),
    DataType.Float: (torch.float32, 1e-5, 1e-5),
    DataType.Half: (torch.float16, 2e-3, 4e-3),
    DataType.BFloat16: (torch.bfloat16, 1.6e-2, 3e-2),
}


def _random(shape, torch_dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(torch_dtype)


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _as_torch(x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.asarray(x))


def _run(fd, tensors, backend, as_torch_inputs):
    inputs = list(tensors) if as_torch_inputs else [_as_numpy(t) for t in tensors]
    outs = fd.execute(inputs, backend=backend)
    if as_torch_inputs:
        assert all(isinstance(o, torch.Tensor) for o in outs), "torch inputs give torch outputs"
    return [_as_torch(o) for o in outs]


def _close(got: torch.Tensor, want: torch.Tensor, dtype: DataType) -> None:
    _, rtol, atol = DTYPES[dtype]
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    torch.testing.assert_close(got.double(), want.double(), rtol=rtol, atol=atol)


def _matmul_fusion(a_def, b_def, dtype):
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=a_def, dtype=dtype)
        b = fd.define_tensor(shape=b_def, dtype=dtype)
        fd.add_output(fd.ops.matmul(a, b))
    return fd


# (arg1 shape, arg2 shape, arg1 definition, arg2 definition): 1 in a definition is a broadcast dim.
MATMUL_CASES = {
    "1d@1d": ((7,), (7,), [-1], [-1]),
    "2d@1d": ((5, 7), (7,), [-1, -1], [-1]),
    "1d@2d": ((7,), (7, 3), [-1], [-1, -1]),
    "2d@2d": ((13, 7), (7, 5), [-1, -1], [-1, -1]),
    "2d@2d_static": ((13, 7), (7, 5), [13, 7], [7, 5]),
    "batched": ((3, 5, 7), (3, 7, 2), [-1, -1, -1], [-1, -1, -1]),
    "batch_broadcast": ((2, 1, 5, 7), (4, 7, 3), [-1, 1, -1, -1], [-1, -1, -1]),
    "1d@3d": ((7,), (2, 7, 3), [-1], [-1, -1, -1]),
    "3d@1d": ((2, 5, 7), (7,), [-1, -1, -1], [-1]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(MATMUL_CASES))
def test_matmul_shapes_against_torch(case, backend):
    a_shape, b_shape, a_def, b_def = MATMUL_CASES[case]
    fd = _matmul_fusion(a_def, b_def, DataType.Float)
    a, b = _random(a_shape, torch.float32, 0), _random(b_shape, torch.float32, 1)
    for as_torch_inputs in (False, True):
        (got,) = _run(fd, [a, b], backend, as_torch_inputs)
        _close(got, torch.matmul(a, b), DataType.Float)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: d.name)
def test_matmul_dtypes(dtype, backend):
    """The result keeps the operands' dtype; f16/bf16 accumulate in f32 (K = 33: an odd length)."""
    torch_dtype = DTYPES[dtype][0]
    fd = _matmul_fusion([-1, -1, -1], [-1, -1], dtype)
    a, b = _random((2, 9, 33), torch_dtype, 2), _random((33, 11), torch_dtype, 3)
    for as_torch_inputs in (False, True):
        (got,) = _run(fd, [a, b], backend, as_torch_inputs)
        _close(got, torch.matmul(a, b), dtype)


def _linear_fusion(x_def, w_def, bias_def, dtype=DataType.Float):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=x_def, dtype=dtype)
        w = fd.define_tensor(shape=w_def, dtype=dtype)
        bias = fd.define_tensor(shape=bias_def, dtype=dtype) if bias_def is not None else None
        fd.add_output(fd.ops.linear(x, w, bias))
    return fd


LINEAR_CASES = {  # x shape, w shape, bias shape (None: no bias)
    "2d_bias": ((6, 9), (5, 9), (5,)),
    "2d_no_bias": ((6, 9), (5, 9), None),
    "3d_input_bias": ((2, 3, 9), (4, 9), (4,)),
    "1d_input": ((9,), (4, 9), (4,)),
    "1d_weight": ((3, 9), (9,), None),
    "scalar_bias": ((3, 9), (4, 9), ()),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(LINEAR_CASES))
def test_linear_against_torch(case, backend):
    x_shape, w_shape, bias_shape = LINEAR_CASES[case]
    dyn = lambda shape: None if shape is None else [-1] * len(shape)  # noqa: E731
    fd = _linear_fusion(dyn(x_shape), dyn(w_shape), dyn(bias_shape))
    tensors = [_random(x_shape, torch.float32, 4), _random(w_shape, torch.float32, 5)]
    if bias_shape is not None:
        tensors.append(_random(bias_shape, torch.float32, 6))
    for as_torch_inputs in (False, True):
        (got,) = _run(fd, tensors, backend, as_torch_inputs)
        _close(got, F.linear(*tensors), DataType.Float)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [DataType.BFloat16, DataType.Half, DataType.Double], ids=lambda d: d.name)
def test_linear_dtypes(dtype, backend):
    torch_dtype = DTYPES[dtype][0]
    fd = _linear_fusion([-1, -1, -1], [-1, -1], [-1], dtype)
    tensors = [_random((2, 5, 24), torch_dtype, 7), _random((10, 24), torch_dtype, 8), _random((10,), torch_dtype, 9)]
    (got,) = _run(fd, tensors, backend, as_torch_inputs=True)
    _close(got, F.linear(*tensors), dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_shapes_reuse_one_definition(backend):
    """One definition with `?` dims runs for several extents (a new concretization each)."""
    fd = _linear_fusion([-1, -1], [-1, -1], [-1])
    for m, k, n in [(3, 4, 5), (17, 1, 2), (1, 31, 9), (0, 4, 3)]:
        tensors = [_random((m, k), torch.float32, m), _random((n, k), torch.float32, k), _random((n,), torch.float32, n)]
        (got,) = _run(fd, tensors, backend, as_torch_inputs=False)
        _close(got, F.linear(*tensors), DataType.Float)


def test_contraction_mismatch_is_quoted_by_the_builder():
    with pytest.raises(ValueError, match=r"arg1 f32\[4, 5\] has K = 5 \(dim 1\) but arg2 f32\[6, 3\] has K = 6"):
        _matmul_fusion([4, 5], [6, 3], DataType.Float)
    with pytest.raises(ValueError, match=r"input f32\[\?, 8\] has K = 8 .* weight f32\[3, 9\] has K = 9"):
        _linear_fusion([-1, 8], [3, 9], None)
    with pytest.raises(ValueError, match=r"different dtypes"):
        with FusionDefinition() as fd:
            fd.ops.matmul(fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1], dtype=DataType.Half))
    with pytest.raises(TypeError, match=r"matmul: arg2 must be a Tensor"):
        with FusionDefinition() as fd:
            fd.ops.matmul(fd.define_tensor([-1, -1]), 2.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_contraction_mismatch_at_run_time(backend):
    fd = _matmul_fusion([-1, -1], [-1, -1], DataType.Float)
    a, b = np.ones((4, 5), np.float32), np.ones((6, 3), np.float32)
    with pytest.raises(ValueError, match=r"fuser.matmul: arg1 \[4, 5\] has K = 5 but arg2 \[6, 3\] has K = 6 at run time"):
        fd.execute([a, b], backend=backend)
    fd = _matmul_fusion([-1, -1, -1], [-1, -1, -1], DataType.Float)
    with pytest.raises(ValueError, match=r"batch dim 0 has extents 2 and 3 at run time"):
        fd.execute([np.ones((2, 4, 5), np.float32), np.ones((3, 5, 2), np.float32)], backend=backend)


# --- host segments between kernels ----------------------------------------------------------


def _gelu(fd, y):
    """The exact (erf) gelu, composed as nvFuser users do."""
    inner = fd.ops.erf(fd.ops.mul(y, 1 / math.sqrt(2.0)))
    return fd.ops.mul(fd.ops.mul(y, 0.5), fd.ops.add(inner, 1.0))


def _epilogue_fusion():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        w = fd.define_tensor(shape=[-1, -1])
        b = fd.define_tensor(shape=[-1])
        y = fd.ops.add(fd.ops.matmul(x, w), fd.ops.broadcast(b, [True, False]))
        fd.add_output(fd.ops.mul(_gelu(fd, y), 2.0))
    return fd


@requires_cpu_backend
def test_epilogue_is_one_kernel_after_the_host_segment():
    fd = _epilogue_fusion()
    # N = 256: rows wide enough for the pointwise scheduler to load the bias once per column.
    x, w, b = _random((9, 6), torch.float32, 10), _random((6, 256), torch.float32, 11), _random((256,), torch.float32, 12)
    want = F.gelu(x @ w + b) * 2
    for backend in ("reference", "cpu"):
        (got,) = fd.execute([x, w, b], backend=backend)
        _close(got, want, DataType.Float)
    kernels = fd.last_kernels()
    assert [k.scheduler for k in kernels] == ["host", "pointwise"]
    host, epilogue = kernels
    assert host.name == "fuser_host_0_matmul" and host.grid is None and host.block is None and host.source == ""
    # The host segment reads each operand once and writes its result once.
    assert (host.bytes_loaded, host.bytes_stored) == (4 * (9 * 6 + 6 * 256), 4 * 9 * 256)
    # The epilogue moves what the same epilogue over a product given as an input moves.
    with FusionDefinition() as alone:
        m = alone.define_tensor(shape=[-1, -1])
        b_alone = alone.define_tensor(shape=[-1])
        y = alone.ops.add(m, alone.ops.broadcast(b_alone, [True, False]))
        alone.add_output(alone.ops.mul(_gelu(alone, y), 2.0))
    alone.execute([(x @ w).numpy(), b.numpy()], backend="cpu")
    (only,) = alone.last_kernels()
    assert (epilogue.bytes_loaded, epilogue.bytes_stored) == (only.bytes_loaded, only.bytes_stored)
    assert epilogue.bytes_stored == 4 * 9 * 256
    assert "fuser_host" not in fd.last_cuda_code() and "__global__" in fd.last_cuda_code()


@requires_cpu_backend
def test_cached_calls_replay_the_host_segment_with_new_data():
    """A launch plan replays the host call like a kernel launch, on each call's own data."""
    fd = _epilogue_fusion()
    shapes = [(9, 6), (6, 7), (7,)]
    for seed in range(3):
        tensors = [_random(s, torch.float32, 20 + 3 * seed + i) for i, s in enumerate(shapes)]
        for as_torch_inputs in (False, True):
            (got,) = _run(fd, tensors, "cpu", as_torch_inputs)
            _close(got, F.gelu(tensors[0] @ tensors[1] + tensors[2]) * 2, DataType.Float)
    info = fd.cache_info()
    assert info.misses == 2 and info.hits == 4  # one compile per input kind (numpy, torch)
    assert fd._get_executor().last_call_used_plan()
    host = fd.last_kernels()[0]
    assert host.scheduler == "host" and host.bytes_stored == 4 * 9 * 7


@requires_cpu_backend
def test_operand_producers_fuse_into_the_preceding_kernel():
    """cast(x) and a transpose of w are one kernel that writes both operands."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[-1, -1])
        xf = fd.ops.cast(x, DataType.Float)
        fd.add_output(fd.ops.matmul(fd.ops.relu(xf), fd.ops.permute(w, [1, 0])))
    x, w = _random((5, 8), torch.bfloat16, 30), _random((3, 8), torch.float32, 31)
    want = torch.relu(x.float()) @ w.T
    for backend in ("reference", "cpu"):
        (got,) = fd.execute([x, w], backend=backend)
        _close(got, want, DataType.Float)
    kernels = fd.last_kernels()
    assert [k.scheduler for k in kernels] == ["pointwise", "host"]
    producer, host = kernels
    assert (producer.bytes_loaded, producer.bytes_stored) == (2 * 5 * 8 + 4 * 3 * 8, 4 * (5 * 8 + 3 * 8))
    assert host.bytes_loaded == producer.bytes_stored


@requires_cpu_backend
def test_mlp_block_two_linears():
    """linear -> relu -> linear -> row sum: host, kernel, host, kernel."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.BFloat16)
        w1 = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        b1 = fd.define_tensor(shape=[-1], dtype=DataType.BFloat16)
        w2 = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        h = fd.ops.relu(fd.ops.linear(x, w1, b1))
        out = fd.ops.linear(h, w2)
        fd.add_output(fd.ops.sum(fd.ops.cast(out, DataType.Float), dims=[2]))
    tensors = [_random((2, 3, 16), torch.bfloat16, 40), _random((12, 16), torch.bfloat16, 41),
               _random((12,), torch.bfloat16, 42), _random((5, 12), torch.bfloat16, 43)]
    x, w1, b1, w2 = tensors
    want = F.linear(torch.relu(F.linear(x, w1, b1)), w2).float().sum(dim=2)
    for backend in ("reference", "cpu"):
        (got,) = fd.execute(tensors, backend=backend)
        torch.testing.assert_close(got, want, rtol=3e-2, atol=3e-2)
    assert [k.scheduler for k in fd.last_kernels()][:3] == ["host", "pointwise", "host"]
    assert fd.last_kernels()[3].scheduler in ("reduction", "inner_persistent")


@requires_cpu_backend
def test_required_output_layout_of_a_product():
    """A product returned with a required column-major layout is written in that layout."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1])
        b = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.matmul(a, b), stride_order=[0, 1])
    a, b = _random((4, 6), torch.float32, 50), _random((6, 3), torch.float32, 51)
    for backend in ("reference", "cpu"):
        (got,) = fd.execute([a.numpy(), b.numpy()], backend=backend)
        assert got.strides == (4, 16), got.strides
        _close(torch.from_numpy(np.ascontiguousarray(got)), a @ b, DataType.Float)
