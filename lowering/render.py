"""`render(plan, schedule)`: the CUDA C of one kernel, as a pure function of its inputs.

The scheduler unit that owns the plan (lowering/schedulers/) emits the body under its
schedule; this module only puts it between the prelude and the host launcher. Kernel shapes
are described in each unit's module."""

from __future__ import annotations

from fuser.lowering import cuda_exprs as X
from fuser.lowering.emit_cuda import EmittedKernel
from fuser.lowering.runtime import prelude
from fuser.lowering.kernel import KernelPlan


def render(plan: KernelPlan, schedule) -> EmittedKernel:
    """The CUDA C source of `plan` under `schedule`, and its parameters in order."""
    body = plan.unit.emit(plan, schedule)
    name = plan.name
    signature = ",\n    ".join(f"{p.ctype} {p.name}" for p in body.params)
    source = "\n".join([
        prelude(),
        X.SUPPORT,
        f"// scheduler: {plan.scheduler}, {schedule.describe()}",
        f'extern "C" __global__ void __launch_bounds__({schedule.block}) {name}(\n    {signature}) {{',
        *body.shared,
        *body.lines,
        "}",
        f"FUSER_HOST_LAUNCHER({name})",
        "",
    ])
    return EmittedKernel(name, source, body.params, schedule, body.needs_sync, body.shared_bytes)
