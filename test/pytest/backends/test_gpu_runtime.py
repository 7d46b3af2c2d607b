"""lowering.backends.gpu_runtime: load cubins, move arrays, launch and time kernels through pycuda.

The `gpu`-marked tests need an NVIDIA GPU, its driver and pycuda; they skip with the reason
`gpu_available()` gives. Results are compared with numpy. The tests above them check, on any
machine, the pieces that need no device: argument packing and host-side layouts.
"""

from __future__ import annotations

import numpy as np
import pytest

from fuser.lowering.backends import gpu_runtime as gr
from fuser.lowering.errors import FuserError

# --------------------------------------------------------------------------- no device needed


def test_gpu_available_never_raises_and_says_why():
    ok, why = gr.gpu_available()
    assert isinstance(ok, bool) and why
    if not ok:
        assert why.startswith(("pycuda not installed", "no CUDA driver (libcuda.so.1)", "no GPU device"))


@pytest.mark.skipif(gr.gpu_available()[0], reason="checks the refusal on machines without a GPU")
def test_gpu_calls_refuse_without_gpu():
    with pytest.raises(gr.GpuUnavailable, match=gr.gpu_available()[1].split(" (")[0]):
        gr.to_device(np.ones(4, np.float32))


def test_pack_scalar_types_and_pointers():
    arr = gr.DeviceArray(0x7F0000001000, (4,), np.float32, (1,), owner=None)
    assert gr._pack(arr, 0, "k") == ("P", 0x7F0000001000)
    assert gr._pack(gr.DevicePtr(4096), 0, "k") == ("P", 4096)
    assert gr._pack(np.float32(1.5), 0, "k")[0] == "f"
    assert gr._pack(np.float64(1.5), 0, "k")[0] == "d"
    assert gr._pack(np.int32(-3), 0, "k")[0] == "i"
    assert gr._pack(np.int64(-3), 0, "k")[0] in "lq"
    assert gr._pack(np.bool_(True), 0, "k")[0] == "?"
    # __half / __nv_bfloat16 parameters are 2-byte structs: their bits travel as an unsigned short.
    assert gr._pack(np.float16(1.5), 0, "k") == ("H", 0x3E00)
    import ml_dtypes

    assert gr._pack(ml_dtypes.bfloat16(1.5), 0, "k") == ("H", 0x3FC0)


@pytest.mark.parametrize("value", [3, 2.5, "x", None])
def test_pack_refuses_untyped_values(value):
    with pytest.raises(TypeError, match=r"argument 2 of kernel saxpy: .*numpy scalar"):
        gr._pack(value, 2, "saxpy")


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,  # C order
        lambda a: np.asfortranarray(a),
        lambda a: a.transpose(2, 0, 1),  # dense, permuted
        lambda a: a[:, ::2, :],  # not dense
        lambda a: a[::-1],  # negative stride
        lambda a: np.broadcast_to(a[:, :1, :], a.shape),  # stride 0
    ],
)
def test_dense_copy_keeps_values_and_stride_order(make):
    x = make(np.arange(2 * 6 * 5, dtype=np.float32).reshape(2, 6, 5))
    dense, strides = gr.dense_copy(x)
    assert dense.flags.c_contiguous
    # The strides describe `dense` in x's dimension order...
    back = np.lib.stride_tricks.as_strided(dense.reshape(-1), x.shape, [s * x.itemsize for s in strides])
    np.testing.assert_array_equal(back, x)
    np.testing.assert_array_equal(gr.from_dense(dense.reshape(-1), x.shape, strides), x)
    # ...and keep its order of dimensions from outermost to innermost.
    moving = [d for d in range(x.ndim) if x.shape[d] > 1 and x.strides[d] != 0]
    by_x = sorted(moving, key=lambda d: -abs(x.strides[d]))
    by_copy = sorted(moving, key=lambda d: -strides[d])
    assert by_x == by_copy


def test_dense_strides_follow_nvfuser_stride_order():
    assert gr.dense_strides((2, 3, 4)) == (12, 4, 1)
    assert gr.dense_strides((2, 3, 4), [2, 1, 0]) == (12, 4, 1)
    assert gr.dense_strides((2, 3, 4), [0, 1, 2]) == (1, 2, 6)  # column-major
    # NHWC of an NCHW tensor: C fastest, then W, H, N.
    assert gr.dense_strides((2, 3, 4, 5), [3, 0, 2, 1]) == (60, 1, 15, 3)
    with pytest.raises(ValueError, match="permutation"):
        gr.dense_strides((2, 3), [0, 0])


def test_launch_dimensions():
    assert gr._dim3(7, "grid") == (7, 1, 1)
    assert gr._dim3(np.int64(7), "grid") == (7, 1, 1)
    assert gr._dim3((4, 2), "block") == (4, 2, 1)
    for bad in ((), (1, 1, 1, 1), (0,)):
        with pytest.raises(ValueError, match="block must be 1 to 3 positive extents"):
            gr._dim3(bad, "block")


# --------------------------------------------------------------------------- on a GPU



def gpu(test):
    return pytest.mark.gpu(pytest.mark.skipif(not gr.gpu_available()[0], reason=gr.gpu_available()[1])(test))


SAXPY = """\
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

# Packs one parameter of each kind: misplaced padding would scramble the values read back.
SCALARS = """\
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void scalars(bool flag, double d, int i, long long q, __half h, __nv_bfloat16 b,
                                   float f, double* out) {
    out[0] = flag ? 1.0 : 0.0; out[1] = d; out[2] = i; out[3] = (double)q;
    out[4] = __half2float(h); out[5] = __bfloat162float(b); out[6] = f;
}
"""

# Dynamic shared memory beyond 48 KB must be opted into per kernel.
BLOCK_SUM = """\
extern "C" __global__ void block_sum(const float* x, float* out, int per_thread) {
    extern __shared__ float buf[];
    int t = threadIdx.x;
    for (int k = 0; k < per_thread; ++k) buf[t * per_thread + k] = x[t * per_thread + k];
    __syncthreads();
    if (t == 0) {
        float s = 0.f;
        for (int k = 0; k < blockDim.x * per_thread; ++k) s += buf[k];
        out[0] = s;
    }
}
"""


def module(source: str) -> gr.GpuModule:
    from fuser.lowering.backends.compile import compile_cuda

    return gr.GpuModule(compile_cuda(source).cubin)  # default arch: the device's


@gpu
def test_saxpy_matches_numpy():
    rng = np.random.default_rng(0)
    n = 100_003  # not a multiple of the block: the bounds check matters
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    dx, dy = gr.to_device(x), gr.to_device(y)
    mod = module(SAXPY)
    mod.launch("saxpy", ((n + 255) // 256,), (256,), [np.float32(2.5), dx, dy, np.int32(n)])
    np.testing.assert_allclose(dy.to_numpy(), np.float32(2.5) * x + y, rtol=1e-6, atol=1e-6)
    # A second launch reuses the prepared call.
    mod.launch("saxpy", ((n + 255) // 256,), (256,), [np.float32(-1.0), dx, dy, np.int32(n)])
    np.testing.assert_allclose(dy.to_numpy(), np.float32(1.5) * x + y, rtol=1e-5, atol=1e-5)


@gpu
def test_scalar_arguments_arrive_intact():
    import ml_dtypes

    out = gr.empty((7,), np.float64)
    args = [np.bool_(True), np.float64(-2.25), np.int32(-7), np.int64(3 << 40), np.float16(0.5),
            ml_dtypes.bfloat16(-3.0), np.float32(1.25), out]
    module(SCALARS).launch("scalars", 1, 1, args)
    np.testing.assert_array_equal(out.to_numpy(), [1.0, -2.25, -7.0, float(3 << 40), 0.5, -3.0, 1.25])


@gpu
def test_layouts_survive_the_round_trip():
    a = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    for x in (a, np.asfortranarray(a), a.transpose(1, 2, 0), a[:, ::2]):
        d = gr.to_device(x)
        np.testing.assert_array_equal(d.to_numpy(), x)
    import ml_dtypes

    bf = a.astype(ml_dtypes.bfloat16).transpose(2, 0, 1)  # bfloat16 refuses the buffer protocol
    np.testing.assert_array_equal(gr.to_device(bf).to_numpy().astype(np.float32), bf.astype(np.float32))
    out = gr.empty((3, 4, 5), np.float32, stride_order=[0, 1, 2])
    assert out.strides == (1, 3, 12)


@gpu
def test_dynamic_shared_memory_over_48k():
    threads, per_thread = 256, 64  # 64 KB of floats
    x = np.random.default_rng(2).random(threads * per_thread, dtype=np.float32)
    out = gr.empty((1,), np.float32)
    module(BLOCK_SUM).launch("block_sum", 1, threads, [gr.to_device(x), out, np.int32(per_thread)],
                             shared_bytes=x.nbytes)
    np.testing.assert_allclose(out.to_numpy()[0], x.sum(dtype=np.float64), rtol=1e-4)


@gpu
def test_errors_name_the_problem():
    mod = module(SAXPY)
    with pytest.raises(FuserError, match="no kernel 'saxpi'"):
        mod.launch("saxpi", 1, 1, [])
    from fuser.lowering.backends.compile import compile_cuda, default_arch

    major = int(default_arch()[3:]) // 10
    other = "sm_75" if major >= 8 else "sm_90"  # SASS never runs on another major version
    with pytest.raises(FuserError, match="cannot load this cubin"):
        gr.GpuModule(compile_cuda(SAXPY, other).cubin)


@gpu
def test_time_kernel_returns_event_times():
    n = 1 << 22
    x = gr.to_device(np.random.default_rng(3).random(n, dtype=np.float32))
    y = gr.to_device(np.random.default_rng(4).random(n, dtype=np.float32))
    mod = module(SAXPY)
    times = gr.time_kernel(lambda: mod.launch("saxpy", (n // 256,), (256,), [np.float32(1), x, y, np.int32(n)]),
                           warmup=3, iters=20)
    assert len(times) == 20 and all(0 < t < 1000 for t in times)


@gpu
def test_torch_tensors_are_used_in_place():
    torch = pytest.importorskip("torch")
    n = 4099
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    expected = 3.0 * x + y
    dy = gr.to_device(y)
    assert dy.ptr == y.data_ptr() and dy.tensor is y
    module(SAXPY).launch("saxpy", ((n + 127) // 128,), (128,), [np.float32(3.0), x, dy, np.int32(n)])
    torch.cuda.synchronize()
    torch.testing.assert_close(y, expected)  # y itself was written
    out = gr.empty((2, 3), np.float32, like=[x])
    assert isinstance(out.output(), torch.Tensor) and out.output().is_cuda
    bf = torch.tensor([1.5, -2.0], dtype=torch.bfloat16, device="cuda")
    np.testing.assert_array_equal(gr.to_device(bf).to_numpy().astype(np.float32), [1.5, -2.0])


@pytest.mark.parametrize("make", [
    lambda b: np.broadcast_to(b[:1, :1], (4, 6)),  # stride 0 in both dims: one element
    lambda b: b[:, 1:4],  # a slice: reaches past its dense size
    lambda b: b[::2, ::3],
    lambda b: np.broadcast_to(b[:, :1], (5, 9)),
])
def test_a_strided_view_goes_to_the_device_as_the_bytes_it_reaches(make):
    """An expanded input of 2**31 elements was copied densely (16 GiB); now a view with
    non-negative strides travels as its span and is read through its strides."""
    x = make(np.arange(30, dtype=np.float32).reshape(5, 6))
    raw, strides = gr.memory_span(x)
    assert raw.nbytes == (sum((n - 1) * s for n, s in zip(x.shape, x.strides)) + x.itemsize)
    assert raw.nbytes <= 30 * 4
    rebuilt = np.lib.stride_tricks.as_strided(raw.view(np.float32), x.shape, [s * 4 for s in strides])
    np.testing.assert_array_equal(rebuilt, x)
    assert gr.memory_span(np.ascontiguousarray(x)) is None and gr.memory_span(x.T.copy().T) is None


def test_a_strided_cpu_tensor_is_moved_as_its_span():
    torch = pytest.importorskip("torch")
    base = torch.arange(30, dtype=torch.float32).view(5, 6)
    for t in (base[:, :1].expand(5, 9), base[::2, 1:4], torch.ones(1).expand(2**20)):
        moved = gr._torch_span_to(t, "cpu")  # the same arithmetic as to cuda, without a GPU
        assert moved.stride() == t.stride()
        torch.testing.assert_close(moved, t)
