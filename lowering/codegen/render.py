"""`render(plan, schedule)`: the CUDA C of one kernel, as a pure function of its inputs.

The scheduler unit that owns the plan (lowering/schedulers/) emits the body under its
schedule; this module only puts it between the prelude and the host launcher. Kernel shapes
are described in each unit's module.

A source starts with one `#define` per header family its dtypes or ops need
(cuda_exprs.HEADER_MACRO, OP_HEADER_MACRO), so only kernels with 16-bit floats or fp8 carry
fuser's own types for them (runtime/fuser_f16.h; no program includes a CUDA header), and only
kernels with random ops carry the Philox header: decided here from the plan's values and ops,
never by searching the C text."""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.ir import SSAValue

from fuser_dialect.types import TensorType, dtype_name
from fuser.lowering.codegen import cuda_exprs as X
from fuser.lowering.codegen.emit_cuda import EmitOptions, EmittedKernel
from fuser.lowering.runtime import prelude
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.device import DEFAULT, check_parameter_bytes, parameter_bytes


def header_macros(plan: KernelPlan) -> frozenset[str]:
    """The macros the dtypes of `plan`'s values (inputs, outputs, every operand and result) and
    its ops (a random op needs the Philox header) need."""
    values = [*plan.inputs, *plan.outputs]
    for op in plan.ops:
        values += op.operands
        values += op.results
    dtype_macros = {X.HEADER_MACRO.get(dtype) for dtype in {_dtype(v) for v in values}}
    op_macros = {X.OP_HEADER_MACRO.get(op.name) for op in plan.ops}
    return frozenset(macro for macro in dtype_macros | op_macros if macro)


def _dtype(value: SSAValue) -> str | None:
    """The fuser dtype of a tensor or scalar value; None for other types (an index, say)."""
    if isinstance(value.type, TensorType):
        return value.type.dtype
    try:
        return dtype_name(value.type)
    except ValueError:
        return None


_PARAM_SIZES = {"double": 8, "long long": 8, "unsigned long long": 8, "float": 4, "int": 4, "unsigned": 4,
                "bool": 1, "__half": 2, "__nv_bfloat16": 2}


def param_size(ctype: str) -> int:
    """Bytes of a kernel parameter of C type `ctype` (a pointer: 8)."""
    if "*" in ctype:
        return 8
    return _PARAM_SIZES.get(" ".join(ctype.replace("const", " ").split()), 16)


def source_head(macros: Iterable[str]) -> str:
    """What every kernel source of a program starts with: its macros, the prelude, the support
    functions. Kernels rendered with the same macros share it (one program per fusion)."""
    macros = frozenset(macros)
    return "\n".join([*(f"#define {m}" for m in sorted(macros)), prelude(macros), X.SUPPORT])


def render(plan: KernelPlan, schedule, macros: Iterable[str] | None = None,
           index_checks: bool = True) -> EmittedKernel:
    """The CUDA C source of `plan` under `schedule`, and its parameters in order. `macros`: the
    header macros of the whole program the kernel goes into (default: the plan's own).
    index_checks: gather/scatter indices are checked in the kernel (lowering/execution/index_errors.py)."""
    body = plan.unit.emit(plan, schedule, EmitOptions(index_checks=index_checks))
    name = plan.name
    # What NVRTC would refuse ("formal parameter space overflowed") is refused here, on every
    # backend; segmentation keeps kernels within it (schedulers/__init__.py PARAMETER_BUDGET).
    check_parameter_bytes(DEFAULT, name, parameter_bytes([param_size(p.ctype) for p in body.params]))
    bounds = f"{schedule.block}, {body.min_blocks_per_sm}" if body.min_blocks_per_sm else f"{schedule.block}"
    signature = ",\n    ".join(f"{p.ctype} {p.name}" for p in body.params)
    source = "\n".join([
        source_head(header_macros(plan) if macros is None else macros),
        f"// scheduler: {plan.scheduler}, {schedule.describe()}",
        f'extern "C" __global__ void __launch_bounds__({bounds}) {name}(\n    {signature}) {{',
        *body.shared,
        *body.lines,
        "}",
        f"FUSER_HOST_LAUNCHER({name})",
        "",
    ])
    return EmittedKernel(name, source, body.params, schedule, body.needs_sync, body.shared_bytes)
