"""Checks and normalises the inputs of `execute`, for every backend alike.

Errors name the input (position and argument name), say what was expected and what
came; they are ValueError/TypeError, never a failure deep inside a backend."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, Float64Type, IntegerType

from fuser_dialect.types import (
    BROADCAST, COMPLEX_DTYPES, DYNAMIC, TensorType, dtype_of_numpy, format_dims, numpy_dtype,
)


def arg_label(f: func.FuncOp, i: int) -> str:
    t = f.function_type.inputs.data[i]
    what = t.describe() if isinstance(t, TensorType) else str(t)
    return f"input {i} ({what})"


def is_torch_tensor(x: object) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def torch_to_numpy(x) -> np.ndarray:
    """A host numpy array of a torch tensor: a view of a CPU tensor, a copy of another device's.

    The view is taken through DLPack (the array holds the tensor), not `Tensor.numpy()`, which
    marks the tensor's storage non-resizable for good: FSDP2 frees its all-gathered parameters
    after each step with `untyped_storage().resize_(0)`, and a parameter a fused region had read
    would then raise "Trying to resize storage that is not resizable"."""
    viewed = _bits_viewed()
    if x.is_cpu and not x.requires_grad and not x.is_conj() and x.dtype not in viewed:
        return np.from_dlpack(x)  # the common case, without detach()'s new tensor
    x = x.detach().cpu()
    if x.dtype in viewed:
        name, bits = viewed[x.dtype]
        return np.from_dlpack(x.view(bits)).view(numpy_dtype(name))
    return np.from_dlpack(x.resolve_conj())


_BITS_VIEWED: dict = {}


def _bits_viewed() -> dict:
    """torch dtypes numpy lacks -> (fuser dtype, same-width integer dtype that carries the bits)."""
    if not _BITS_VIEWED:
        torch = sys.modules["torch"]
        _BITS_VIEWED.update({
            torch.bfloat16: ("bf16", torch.int16),
            torch.float8_e4m3fn: ("f8E4M3FN", torch.uint8),
            torch.float8_e5m2: ("f8E5M2", torch.uint8),
        })
    return _BITS_VIEWED


def scalar_value(f: func.FuncOp, i: int, value: object, t) -> np.generic:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(t, IntegerType) and t.width.data == 1:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{arg_label(f, i)}: expected a bool scalar, got {type(value).__name__}")
        return np.bool_(value)
    if isinstance(t, IntegerType):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{arg_label(f, i)}: expected an integer scalar, got {type(value).__name__}")
        bits = t.width.data
        if not -(2 ** (bits - 1)) <= int(value) < 2 ** (bits - 1):
            raise ValueError(f"{arg_label(f, i)}: {int(value)} does not fit in the input's {bits}-bit integer type")
        return np.int64(value) if bits == 64 else np.int32(value)
    if isinstance(t, (Float64Type, Float32Type)):
        if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
            raise TypeError(f"{arg_label(f, i)}: expected a float scalar, got {type(value).__name__}")
        return np.float64(value) if isinstance(t, Float64Type) else np.float32(value)
    raise TypeError(f"{arg_label(f, i)}: unsupported scalar type {t}")


_TORCH_DTYPES = {"torch.float64": "f64", "torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16",
                 "torch.float8_e4m3fn": "f8E4M3FN", "torch.float8_e5m2": "f8E5M2",
                 "torch.complex64": "c64", "torch.complex128": "c128",
                 "torch.int64": "i64", "torch.int32": "i32", "torch.bool": "i1"}


def torch_dtype_name(dtype: object) -> str | None:
    """The fuser dtype name of a torch dtype (looked up by name: torch is not imported); None
    when it has none."""
    return _TORCH_DTYPES.get(str(dtype))


def _dtype_name(value) -> str:
    if is_torch_tensor(value):
        return _TORCH_DTYPES.get(str(value.dtype), str(value.dtype))
    try:
        return dtype_of_numpy(value.dtype)
    except ValueError:
        return str(value.dtype)


def to_numpy(value):
    """A host numpy view/copy of a checked input (torch tensors are copied from their device)."""
    return torch_to_numpy(value) if is_torch_tensor(value) else value


def check_tensor(f: func.FuncOp, i: int, value: object, t: TensorType):
    """The input itself when valid: a numpy array, or a torch tensor left where it is (a CUDA
    tensor is used in place by the cuda backend; the others copy what they need). A 0-d complex
    input also takes a Python number: it is how a complex Scalar input is carried."""
    if t.rank == 0 and t.dtype in COMPLEX_DTYPES and isinstance(value, (int, float, complex, np.number)) \
            and not isinstance(value, (bool, np.bool_)):
        return np.asarray(value, dtype=numpy_dtype(t.dtype))
    if not isinstance(value, np.ndarray) and not is_torch_tensor(value):
        raise TypeError(f"{arg_label(f, i)}: expected a numpy array or torch tensor, got {type(value).__name__}")
    got = _dtype_name(value)
    if got != t.dtype:
        raise TypeError(f"{arg_label(f, i)}: expected dtype {numpy_dtype(t.dtype)}, got {value.dtype}")
    check_shape(lambda: arg_label(f, i), t, tuple(value.shape))
    return value


def check_shape(label: str | Callable[[], str], t: TensorType, shape: Sequence[int],
                error: type[Exception] = ValueError) -> None:
    """A shape against its declared type: the rank, and every static or broadcast extent.
    `label` names the input in errors (a function: built only when an error is raised)."""
    if len(shape) != t.rank:
        raise error(f"{_text(label)}: expected rank {t.rank}, got shape {list(shape)}")
    for d, (want, got) in enumerate(zip(t.shape, shape)):
        if got < 0:
            raise error(f"{_text(label)}: dim {d} has negative extent {got}")
        if want == DYNAMIC:
            continue
        expected = 1 if want == BROADCAST else want
        if got != expected:
            kind = "broadcast dim" if want == BROADCAST else "static extent"
            raise error(
                f"{_text(label)}: dim {d} is a {kind} of {expected} but the input has extent "
                f"{got} (shape {list(shape)}, expected {format_dims(t.shape)})"
            )


def _text(label: str | Callable[[], str]) -> str:
    return label if isinstance(label, str) else label()


def check_inputs(f: func.FuncOp, inputs: Sequence[object]) -> list[np.ndarray | np.generic]:
    """Validated inputs as numpy arrays and numpy scalars, in argument order."""
    types = f.function_type.inputs.data
    if len(inputs) != len(types):
        raise ValueError(f"fusion @{f.sym_name.data} takes {len(types)} inputs, got {len(inputs)}")
    out: list[np.ndarray | np.generic] = []
    for i, (value, t) in enumerate(zip(inputs, types)):
        if isinstance(t, TensorType):
            out.append(check_tensor(f, i, value, t))
        else:
            out.append(scalar_value(f, i, value, t))
    return out


def apply_layout(array: np.ndarray, order: Sequence[int] | None) -> np.ndarray:
    """A copy of `array` laid out in `order` (stride_order[i] ranks dim i, 0 = fastest)."""
    if order is None:
        return np.array(array, order="C", copy=True)
    slowest_first = sorted(range(array.ndim), key=lambda d: -order[d])
    dense = np.ascontiguousarray(array.transpose(slowest_first))
    inverse = np.argsort(slowest_first)
    return dense.transpose(inverse)
