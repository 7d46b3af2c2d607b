"""The signature of one `execute` call: what a launch plan is keyed by (lowering/execution/launch_plan.py).

Per input: for a numpy array its shape, strides, dtype and the alignment class of its data
address (address mod 16: it decides vector widths); for a torch tensor its type, shape, strides,
dtype, device and alignment class; for a scalar its type and value, or its type alone when only
random ops read it as seed or offset (`argument_kinds`). With it come the data addresses the
plan writes into its launches.

`call_signature` is the definition. An executor calls `signature_function(kinds)` instead: the
same function specialised for its fusion's argument kinds (straight-line code, one branch per
input, no loop or list appends), generated once per executor the way dataclasses generate
`__init__`. It returns exactly what `call_signature` returns
(test/pytest/execution/test_call_signature.py checks this on generated inputs); it is half the cost
on the path every cached call takes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np

from fuser.lowering import addresses
from fuser.lowering.addresses import numpy_address
from fuser_dialect.ops_random import RandomOp
from fuser_dialect.types import TensorType

Signature = tuple[tuple, list[int]]
"""(the key part of one call, the data address of each input: 0 for a scalar)."""

_SCALAR_TYPES = frozenset({int, float, bool, np.int64, np.int32, np.float64, np.float32, np.bool_, np.int16,
                           np.int8, np.uint8, np.uint16, np.uint32, np.uint64, np.float16})
_ndarray = np.ndarray
_torch_tensor: type | None = None


def _torch_tensor_type():
    global _torch_tensor
    if _torch_tensor is None:
        torch = sys.modules.get("torch")
        _torch_tensor = torch.Tensor if torch is not None else None
    return _torch_tensor


def argument_kinds(fusion) -> tuple[bool | None, ...]:
    """Per fusion input, what a signature takes of it: True a tensor; False a scalar, with its
    value; None a scalar read only as a random op's seed or offset, whose value is read per
    call (launch.RngState), so a new seed is neither a recompile nor a new plan."""
    return tuple(
        True if isinstance(a.type, TensorType)
        else None if a.uses and all(_is_rng_state_use(u) for u in a.uses)
        else False
        for a in fusion.body.block.args)


def _is_rng_state_use(use) -> bool:
    op = use.operation
    return isinstance(op, RandomOp) and op.seeded and use.index >= len(op.operands) - 2  # seed, offset: last


def _torch_part(x) -> tuple[tuple, int] | None:
    """(the signature part, the data address) of a torch tensor input; None for anything else."""
    tensor = _torch_tensor or _torch_tensor_type()
    if tensor is None or not isinstance(x, tensor):
        return None
    address = x.data_ptr()
    return (type(x), x.shape, x.stride(), x.dtype, x.device, address & 15), address


def call_signature(inputs: Sequence[object], tensor_args: tuple[bool | None, ...]) -> Signature | None:
    """The signature of one call, or None when the call cannot use a plan (a wrong input count,
    an input of an unknown type, a NaN scalar: a NaN never equals itself)."""
    if len(inputs) != len(tensor_args):
        return None
    parts: list = []
    addresses_: list[int] = []
    for x, is_tensor in zip(inputs, tensor_args):
        kind = type(x)
        if is_tensor:
            if kind is _ndarray:
                address = numpy_address(x)
                parts.append((x.shape, x.strides, x.dtype, address & 15))
            else:
                found = _torch_part(x)
                if found is None:
                    return None
                part, address = found
                parts.append(part)
            addresses_.append(address)
        else:
            if kind not in _SCALAR_TYPES or x != x:
                return None
            parts.append((kind, x) if is_tensor is False else kind)  # None: a run-time scalar
            addresses_.append(0)
    return tuple(parts), addresses_


def signature_function(tensor_args: tuple[bool | None, ...]) -> Callable[[Sequence[object]], Signature | None]:
    """`call_signature` specialised for these argument kinds (see the module doc)."""
    if not addresses.FAST:  # no direct read of numpy's data pointer here: the generic function
        return lambda inputs: call_signature(inputs, tensor_args)
    n = len(tensor_args)
    lines = ["def signature(inputs):", f"    if len(inputs) != {n}:", "        return None"]
    if n:
        lines.append(f"    {''.join(f'x{i}, ' for i in range(n))}= inputs")
    for i, kind in enumerate(tensor_args):
        if kind:
            lines += [
                f"    if type(x{i}) is ndarray:",
                f"        a{i} = read_pointer(id(x{i}) + HEADER).value or 0",
                f"        p{i} = (x{i}.shape, x{i}.strides, x{i}.dtype, a{i} & 15)",
                "    else:",
                f"        found = torch_part(x{i})",
                "        if found is None:",
                "            return None",
                f"        p{i}, a{i} = found",
            ]
        else:
            lines += [
                f"    k{i} = type(x{i})",
                f"    if k{i} not in SCALARS or x{i} != x{i}:",
                "        return None",
                f"    p{i} = {f'(k{i}, x{i})' if kind is False else f'k{i}'}",
                f"    a{i} = 0",
            ]
    lines.append(f"    return ({''.join(f'p{i}, ' for i in range(n))}), [{', '.join(f'a{i}' for i in range(n))}]")
    namespace = {"ndarray": _ndarray, "read_pointer": addresses.read_pointer, "HEADER": addresses.HEADER_BYTES,
                 "torch_part": _torch_part, "SCALARS": _SCALAR_TYPES}
    exec(compile("\n".join(lines), f"<call signature {tensor_args}>", "exec"), namespace)  # noqa: S102
    return namespace["signature"]


__all__ = ["Signature", "argument_kinds", "call_signature", "signature_function"]
