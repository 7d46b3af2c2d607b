"""The nvFuser frontend API surface of issue 22: class-based definitions, positional
define_scalar(DataType), is_tensor, slice(manual_normalization=) and cat(manual_padding=),
nextafter on scalars, inspection (inputs, outputs, extents, fusion_ir, last_scheduled_fusion_ir,
cuda_code_for, scheduled_fusion_ir_for, repro_script_for), compute_contiguity,
compute_tensor_descriptor, version, execute(profile=True) with fd.profile(), and
_enable_options / _disable_options — on the "reference" and "cpu" backends against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fuser
from fuser import DataType, FusionDefinition, compute_contiguity, compute_tensor_descriptor

BACKENDS = ["reference", "cpu"]


# --- class-based definitions -------------------------------------------------------------------


class ScaledSum(FusionDefinition):
    def definition(self):
        t = self.define_tensor(shape=[-1, -1])
        s = self.define_scalar(DataType.Double)  # positional dtype: an input, as in nvFuser
        self.add_output(self.ops.sum(self.ops.mul(t, s), dims=[1]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_based_definition(backend):
    fd = ScaledSum()
    x = torch.randn(3, 5)
    (out,) = fd.execute([x, 2.0], backend=backend)
    torch.testing.assert_close(out, (x * 2.0).sum(1))
    (again,) = fd.execute([x, 3.0], backend=backend)  # defined once, reused
    torch.testing.assert_close(again, (x * 3.0).sum(1))
    assert "fuser.reduction sum" in fd.fusion_ir()


def test_class_based_definition_errors():
    with pytest.raises(NotImplementedError, match="defines nothing"):
        FusionDefinition().execute([])

    class Scheduled(ScaledSum):
        def schedule(self):
            pass

    with pytest.raises(NotImplementedError, match="user schedules are not supported"):
        Scheduled().execute([torch.ones(1, 1), 1.0])



@pytest.mark.parametrize("inputs", [[], [torch.ones(4, 4)]], ids=["no inputs", "a tensor"])
def test_executing_a_definition_that_defines_nothing_is_not_implemented(inputs):
    """nvFuser's test_fusion_not_defined: FusionDefinition().execute(inputs) calls the base
    definition(), which raises NotImplementedError."""
    with pytest.raises(NotImplementedError, match="defines nothing: define it in a `with FusionDefinition"):
        FusionDefinition().execute(inputs)


def test_executing_an_unfinished_definition_says_to_leave_the_with_block():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        with pytest.raises(RuntimeError, match="not finished: leave the `with FusionDefinition"):
            fd.execute([np.ones(2, np.float32)])
        fd.add_output(fd.ops.neg(t))


def test_define_scalar_positional_dtype_and_is_tensor():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        n = fd.define_scalar(DataType.Int)
        c = fd.define_scalar(2.5)
        fd.add_output(fd.ops.mul(t, n))
    assert (n.dtype, c.dtype) == ("i64", "f64")
    assert t.is_tensor() and not n.is_tensor() and not c.is_tensor()
    assert [a.is_tensor() for a in fd.inputs()] == [True, False]
    with pytest.raises(TypeError, match="dtype twice"):
        with FusionDefinition() as bad:
            bad.define_scalar(DataType.Int, DataType.Int)


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_scalars_constants_and_inputs(backend):
    """define_scalar(complex) and dtype=ComplexFloat/ComplexDouble, constants and inputs, in
    arithmetic with complex and real tensors, promoting as torch's Python complex does."""
    x, r = torch.randn(3, dtype=torch.complex64), torch.randn(3, dtype=torch.float64)
    with FusionDefinition() as fd:
        tx, tr = fd.from_pytorch(x), fd.from_pytorch(r)
        c = fd.define_scalar(complex(3.0, 0.5))
        s = fd.define_scalar(dtype=DataType.ComplexDouble)
        f = fd.define_scalar(2.0, dtype=DataType.ComplexFloat)
        assert (c.dtype, s.dtype, f.dtype) == ("c128", "c128", "c64") and not c.is_tensor()
        fd.add_output(fd.ops.mul(tx, c))  # c64 tensor: stays c64
        fd.add_output(fd.ops.add(tr, s))  # f64 tensor: c128
        fd.add_output(fd.ops.sub(fd.ops.mul(tx, fd.ops.add(s, f)), 1j))  # a complex Scalar expression
        fd.add_output(fd.ops.full([2], s, DataType.ComplexFloat))
    outs = fd.execute([x, r, 1.0 - 2.0j], backend=backend)
    s = 1.0 - 2.0j
    wants = [x * (3.0 + 0.5j), r + s, x * (s + 2.0) - 1j, torch.full((2,), s, dtype=torch.complex64)]
    for got, want in zip(outs, wants):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
    with pytest.raises(TypeError, match="needs a complex dtype"):
        with FusionDefinition() as bad:
            bad.define_scalar(1j, dtype=DataType.Double)


@pytest.mark.parametrize("backend", BACKENDS)
def test_0d_complex_tensors_work(backend):
    x, c = torch.randn(3, dtype=torch.complex64), torch.tensor(3.0 + 0.5j, dtype=torch.complex64)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.mul(fd.from_pytorch(x), fd.from_pytorch(c)))
    torch.testing.assert_close(fd.execute([x, c], backend=backend)[0], x * c)



# --- reductions: dims (a list or an int) or dim= (one int) ------------------------------------------


REDUCTIONS = {"sum": torch.sum, "prod": torch.prod, "max": torch.amax, "min": torch.amin}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_take_nvfusers_dim_keyword(backend, name):
    """nvFuser's reductions take `dim` (one int) beside `dims`: sum(t, dim=-1),
    max(t, dim=1, keepdim=True), and likewise min and prod."""
    x = torch.randn(3, 4, 5)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        op = getattr(fd.ops, name)
        fd.add_output(op(t, dim=-1))
        fd.add_output(op(t, dim=1, keepdim=True))
        fd.add_output(op(t, 0, True))  # the int overload, positionally
    last, middle, first = fd.execute([x], backend=backend)
    reduce = REDUCTIONS[name]
    for got, want in [(last, reduce(x, -1)), (middle, reduce(x, 1, keepdim=True)), (first, reduce(x, 0, True))]:
        assert got.shape == want.shape
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"dims": [0], "dim": 1}, TypeError, "sum: got both dims=\\[0\\] and dim=1; give one of them"),
    ({"dim": [0]}, TypeError, "sum: dim = \\[0\\]: expected an int"),
    ({"dim": 3}, ValueError, "dim 3"),
], ids=["dims and dim", "a list as dim", "dim out of range"])
def test_reduction_dim_keyword_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.sum(fd.define_tensor(shape=[-1, -1, -1]), **kwargs))


# --- slice(manual_normalization=), cat(manual_padding=), nextafter on scalars -----------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_slice_manual_normalization(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 8])
        n = fd.define_scalar(DataType.Int)
        fd.add_output(fd.ops.slice(t, [0, 2], [n, 7], manual_normalization=True))
        fd.add_output(fd.ops.slice(t, [0, -3], [n, 8], manual_normalization=False, python_slicing=True))
    x = torch.randn(5, 8)
    manual, normalized = fd.execute([x, 4], backend=backend)
    torch.testing.assert_close(manual, x[:4, 2:7])
    torch.testing.assert_close(normalized, x[:4, -3:])
    with pytest.raises(ValueError, match="dim 1 starts at -3"):
        with FusionDefinition() as bad:
            t = bad.define_tensor(shape=[-1, 8])
            bad.add_output(bad.ops.slice(t, [0, -3], [2, 8], manual_normalization=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_cat_manual_padding(backend):
    """Thunder's form: each input padded along the cat dim to the whole output, then cat."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, 3])
        b = fd.define_tensor(shape=[-1, 5])
        pa = fd.ops.pad(a, [0, 5])
        pb = fd.ops.pad(b, [3, 0])
        fd.add_output(fd.ops.cat([pa, pb], dim=1, manual_padding=True))
    x, y = torch.randn(2, 3), torch.randn(2, 5)
    (out,) = fd.execute([x, y], backend=backend)
    torch.testing.assert_close(out, torch.cat([x, y], 1))
    with pytest.raises(ValueError, match="padded by 2 before its values"):
        with FusionDefinition() as bad:
            a = bad.define_tensor(shape=[-1, 3])
            bad.add_output(bad.ops.cat([bad.ops.pad(a, [0, 2]), bad.ops.pad(a, [2, 0])], 1, manual_padding=True))
    with pytest.raises(ValueError, match="not the result of fd.ops.pad"):
        with FusionDefinition() as bad:
            a = bad.define_tensor(shape=[-1, 3])
            bad.add_output(bad.ops.cat([a, a], 1, manual_padding=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_nextafter_on_scalars(backend):
    """nvFuser's test_nextafter: every pair of {f32 tensor, f64 tensor, Float Scalar, Double Scalar}."""
    inputs = [torch.randn(4), torch.randn(4, dtype=torch.float64)]
    with FusionDefinition() as fd:
        t0, t1 = fd.from_pytorch(inputs[0]), fd.from_pytorch(inputs[1])
        s0 = fd.define_scalar(1.0, dtype=DataType.Float)
        s1 = fd.define_scalar(-1.0, dtype=DataType.Double)
        scalars = {}
        for i, a in enumerate([t0, t1, s0, s1]):
            for j, b in enumerate([t0, t1, s0, s1]):
                r = fd.ops.nextafter(a, b)
                if r.is_tensor():
                    fd.add_output(r)
                else:
                    scalars[i, j] = r
                    fd.add_output(fd.ops.add(fd.ops.mul(t1, 0.0), r))  # the Scalar's value, as an f64 tensor
    values = [inputs[0], inputs[1], torch.tensor(1.0), torch.tensor(-1.0, dtype=torch.float64)]
    outs = iter(fd.execute(inputs, backend=backend))
    for i, a in enumerate(values):
        for j, b in enumerate(values):
            got = next(outs)
            if (i, j) in scalars:
                dtype = torch.float32 if i == j == 2 else torch.float64
                want = torch.nextafter(a.to(dtype), b.to(dtype)).double().expand(4)
            else:
                want = torch.nextafter(*[v.to(torch.result_type(a, b)) for v in (a, b)])
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert scalars[2, 2].dtype == "f32" and scalars[2, 3].dtype == "f64"


# --- inspection ------------------------------------------------------------------------------------


def _softmax_fusion():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        v = fd.define_vector(2)
        r = fd.ops.reshape(x, v)
        m = fd.ops.max(r, [1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(r, m))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True)))
    return fd


def test_inputs_outputs_extents_and_fusion_ir():
    fd = _softmax_fusion()
    assert [repr(v) for v in fd.inputs()] == ["Tensor(f32[?, ?])", "Scalar(i64)", "Scalar(i64)"]
    assert [repr(v) for v in fd.outputs()] == ["Tensor(f32[?, ?])"]
    assert fd.extents() == [(0, 0), (0, 1)]
    assert fd.fusion_ir() == str(fd) and "fuser.reduction max" in fd.fusion_ir()


def test_cuda_code_and_scheduled_ir_for_inputs_then_last_execution():
    fd = _softmax_fusion()
    inputs = [torch.randn(4, 16), 8, 8]
    assert fd.last_scheduled_fusion_ir() == ""
    code = fd.cuda_code_for(inputs)
    assert "__global__" in code and fd.cuda_code_for(inputs, backend="reference") == ""
    scheduled = fd.scheduled_fusion_ir_for(inputs)
    assert scheduled.startswith("// segment 0: ") and "fuser.reduction max" in scheduled
    assert fd.cache_info().misses == 1  # compiled, nothing launched
    (out,) = fd.execute(inputs, backend="cpu")
    torch.testing.assert_close(out, torch.softmax(inputs[0].reshape(8, 8), 1))
    assert fd.cache_info().misses == 1 and fd.last_cuda_code() == code
    last = fd.last_scheduled_fusion_ir()
    assert last.startswith("// segment 0: ") and "grid" in last and "fuser.reduction max" in last


@pytest.mark.parametrize("make", [
    lambda: torch.randn(3, 4).t(),
    lambda: np.random.default_rng(0).standard_normal((6, 2)).astype(np.float32)[::2],
], ids=["torch-strided", "numpy-strided"])
def test_repro_script_runs_and_matches(make, capsys):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        s = fd.define_scalar(DataType.Double)
        fd.add_output(fd.ops.mul(x, s), alias_input=x)
        fd.add_output(fd.ops.sum(x, [1]))
    x = make()
    script = fd.repro_script_for([x, float("inf")])
    assert f"# fuser version: {fuser.version()}" in script and 'float("inf")' in script
    namespace: dict = {}
    exec(compile(script, "repro", "exec"), namespace)  # runs fd.execute(inputs)
    rebuilt, made = namespace["fd"], namespace["inputs"]
    assert rebuilt.aliases == fd.aliases and str(rebuilt) == str(fd)
    assert tuple(made[0].shape) == tuple(x.shape) and type(made[0]) is type(x)
    strides = made[0].stride() if isinstance(x, torch.Tensor) else made[0].strides
    assert strides == (x.stride() if isinstance(x, torch.Tensor) else x.strides)
    capsys.readouterr()
    fd.execute([x, 2.0], backend="reference", print_repro=True)
    assert capsys.readouterr().out == fd.repro_script_for([x, 2.0]) + "\n"


def test_compute_contiguity_and_tensor_descriptor():
    """nvFuser's documented examples (python_utils.h)."""
    assert compute_contiguity([2, 3], [3, 1]) == [True, True]
    assert compute_contiguity([2, 1, 3], [3, 3, 1]) == [True, None, True]
    assert compute_contiguity([2, 3], [1, 2]) == [False, False]
    assert compute_tensor_descriptor([2, 2, 2, 2], [8, 4, 2, 1]) == ([True] * 4, [3, 2, 1, 0])
    assert compute_tensor_descriptor([2, 1, 3, 1, 4], [24, 4, 8, 4, 2]) == (
        [True, True, None, None, False], [4, 2, 3, 1, 0])
    assert compute_tensor_descriptor([2, 2, 2, 2], [8, 4, 0, 2]) == ([True, True, None, False], [3, 2, 1, 0])
    x = torch.randn(2, 3, 4).permute(2, 0, 1)
    contiguity, order = compute_tensor_descriptor(x.size(), x.stride())
    assert order == [0, 2, 1] and contiguity == [True, True, True]
    with pytest.raises(ValueError, match="negative strides"):
        compute_tensor_descriptor([2], [-1])
    with pytest.raises(ValueError, match="same number of dims"):
        compute_contiguity([2], [1, 1])


def test_version():
    v = fuser.version()
    assert v == fuser.__version__ and v > "0.0.9" and v < "10.0" and fuser.version() >= v


# --- profile and options ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_profile_per_kernel_times(backend):
    fd = _softmax_fusion()
    inputs = [torch.randn(64, 64), 64, 64]
    with pytest.raises(ValueError, match="profiling enabled"):
        fd.profile()
    for _ in range(2):  # the second call replays a launch plan on the cpu backend
        (out,) = fd.execute(inputs, backend=backend, profile=True)
        profile = fd.profile()
        names = [k.name for k in fd.last_kernels()]
        assert [k.name for k in profile.kernel_profiles] == names and profile.segments == len(names)
        assert profile.host_time_ms > 0
        if backend == "cpu":
            assert names and all(k.time_ms > 0 and k.device == "cpu" for k in profile.kernel_profiles)
            assert profile.kernel_time_ms <= profile.host_time_ms
            assert profile.kernel_profiles[0].effective_bandwidth_gbs > 0
    torch.testing.assert_close(out, torch.softmax(inputs[0], 1))
    fd.execute(inputs, backend=backend)
    with pytest.raises(ValueError, match="profiling enabled"):
        fd.profile()


@pytest.mark.parametrize("backend", BACKENDS)
def test_enable_and_disable_options(backend):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.pad(x, [1, 1]))
    x = torch.randn(5)
    (out,) = fd.execute([x], backend=backend, _disable_options=["concretize_resize_extents"])
    torch.testing.assert_close(out, torch.nn.functional.pad(x, [1, 1]))
    with pytest.raises(ValueError, match="unknown _enable_options entry 'memory_promotion'; fuser knows: none"):
        fd.execute([x], backend=backend, _enable_options=["memory_promotion"])
    with pytest.raises(ValueError, match="unknown _disable_options entry 'bogus'.*concretize_resize_extents"):
        fd.execute([x], backend=backend, _disable_options=["bogus"])
    with pytest.raises(TypeError, match="list of option names"):
        fd.execute([x], backend=backend, _disable_options="concretize_resize_extents")


def test_cuda_code_of_a_segmented_fusion_is_one_compilable_program():
    """Two kernels (a segment_set cut): the code is one program, the shared head once, as the
    backends compile it; NVRTC takes it as it is (no GPU needed), the same from cuda_code_for
    and from last_cuda_code."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        y = fd.ops.segment_set(fd.ops.exp(x))
        fd.add_output(fd.ops.sum(fd.ops.mul(y, y), [1]))
    inputs = [np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)]
    code = fd.cuda_code_for(inputs, backend="cpu")
    fd.execute(inputs, backend="cpu")
    kernels = fd.last_kernels()
    assert len(kernels) == 2 and fd.last_cuda_code() == code
    assert code.count("// fuser_prelude.cuh") == 1 and all(f"FUSER_HOST_LAUNCHER({k.name})" in code for k in kernels)
    from fuser.lowering.backends import compile as cc

    try:
        cc.find_compiler("nvrtc")
    except cc.CompilerUnavailable as e:
        pytest.skip(f"nvrtc unavailable: {e}")
    assert b".entry fuser_kernel_1_" in cc.compile_cuda(code, "sm_90", backend="nvrtc", output="ptx").cubin
