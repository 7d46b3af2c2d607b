"""fd.validate (fuser/validate.py): nvFuser's check of a fusion against reference outputs, with
tolerances by dtype grown with the reductions behind each output."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from fuser.validate import ValidationError


def _softmax() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, [1], keepdim=True)))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True)))
    return fd


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_validates_against_the_interpreter_and_against_torch(backend):
    fd = _softmax()
    x = np.random.default_rng(0).standard_normal((6, 50)).astype(np.float32)
    (out,) = fd.validate([x], backend=backend)  # the reference interpreter's outputs
    np.testing.assert_allclose(out, torch.softmax(torch.from_numpy(x), 1).numpy(), rtol=1e-5, atol=1e-7)
    fd.validate([torch.from_numpy(x)], [torch.softmax(torch.from_numpy(x), 1)], backend=backend)


def test_a_wrong_reference_names_the_output_and_its_worst_element():
    fd = _softmax()
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    want = torch.softmax(torch.from_numpy(x), 1).numpy().copy()
    want[2, 5] += 0.01
    with pytest.raises(ValidationError, match=r"output 0: 1 of 32 element\(s\) outside the tolerance; the worst at \[2, 5\]"):
        fd.validate([x], [want], backend="cpu")


def test_tolerance_grows_with_the_reductions_behind_an_output():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, [0]))
        fd.add_output(fd.ops.mul(x, 2.0))
    x = np.random.default_rng(2).random(10000).astype(np.float32) + 1
    total, doubled = fd.execute([x], backend="cpu")
    off = 1 + 3e-4  # inside f32's 1e-5 * sqrt(10000), outside 1e-5
    fd.validate([x], [np.float32(total * off), doubled], backend="cpu")
    with pytest.raises(ValidationError, match=r"output 1: .*rtol 1e-05, atol 1e-05\)"):
        fd.validate([x], [np.float32(total * off), doubled * off], backend="cpu")
    with pytest.raises(ValidationError, match=r"output 0: .*reductions over 10000 elements"):
        fd.validate([x], [np.float32(total * (1 + 1e-2)), doubled], backend="cpu")
    fd.validate([x], [np.float32(total * 1.01), doubled * 1.01], backend="cpu", rtol=0.02)


def test_shape_dtype_count_integer_and_nan_mismatches():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        i = fd.define_tensor(shape=[-1], dtype=DataType.Int)
        fd.add_output(fd.ops.sqrt(x))
        fd.add_output(fd.ops.add(i, 1))
    x = np.array([4.0, -1.0, 9.0], np.float32)  # sqrt(-1) is NaN
    i = np.array([1, 2, 3])
    root, plus = fd.validate([x, i], backend="cpu")
    with pytest.raises(ValidationError, match=r"output 0: shape \[3\], the reference's is \[2\]"):
        fd.validate([x, i], [root[:2], plus], backend="cpu")
    with pytest.raises(ValidationError, match=r"output 1: dtype int64, the reference's is int32"):
        fd.validate([x, i], [root, plus.astype(np.int32)], backend="cpu")
    with pytest.raises(ValidationError, match="the fusion has 2 output"):
        fd.validate([x, i], [root], backend="cpu")
    with pytest.raises(ValidationError, match=r"output 1: 1 element\(s\) differ; first at \[2\]: 4, the reference has 5"):
        fd.validate([x, i], [root, plus + np.array([0, 0, 1])], backend="cpu")
    with pytest.raises(ValidationError, match=r"output 0: 1 of 3 .* the worst at \[1\]"):
        fd.validate([x, i], [np.array([2.0, 0.0, 3.0], np.float32), plus], backend="cpu")


def test_complex_outputs_compare_both_parts():
    with FusionDefinition() as fd:
        c = fd.define_tensor(shape=[-1], dtype=DataType.ComplexFloat)
        fd.add_output(fd.ops.mul(c, c))
    c = np.array([1 + 2j, 3 - 1j], np.complex64)
    (sq,) = fd.validate([c], backend="cpu")
    with pytest.raises(ValidationError, match=r"the worst at \[1\]"):
        fd.validate([c], [sq + np.array([0, 1e-2j], np.complex64)], backend="cpu")


def test_outputs_written_into_inputs_are_updated_once_and_skipped():
    """batch_norm's running statistics are outputs aliased to inputs: validate lines the
    returned outputs up without them, and the inputs receive one update, not two."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        rm, rv = fd.define_tensor([-1]), fd.define_tensor([-1])
        y, mean, invstd = fd.ops.batch_norm(x, None, None, rm, rv, 0.5, 1e-5, True)
        fd.add_output(fd.ops.cast(fd.ops.gt(y, 0.0), DataType.Int))  # an integer output: exact check
        fd.add_output(mean)
    xs = torch.randn(64, 3)
    running_mean, running_var = torch.zeros(3), torch.ones(3)
    positive, mean = fd.validate([xs, running_mean, running_var], backend="cpu")
    assert positive.dtype == torch.int64 and mean.dtype == torch.float32
    torch.testing.assert_close(running_mean, 0.5 * xs.mean(0))  # one update from zero
    with pytest.raises(ValidationError, match=r"output 0: 1 element\(s\) differ"):
        wrong = positive.clone()
        wrong[0, 0] = 1 - wrong[0, 0]
        fd.validate([xs, torch.zeros(3), torch.ones(3)], [wrong, mean], backend="cpu")
