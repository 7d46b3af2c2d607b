"""`fuser-opt -t cuda`: prints the CUDA C of every kernel of a module.

The module is segmented with the schedules chosen for a nominal extent of 1024 per
dynamic dim (option `extent`): emission needs a schedule, and the source otherwise
only takes extents as parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from fuser_dialect.fusion import fusion_funcs
from fuser_dialect.types import BROADCAST, DYNAMIC
from fuser.lowering.host_segments import is_host_plan
from fuser.lowering.render import render
from fuser.lowering.segment import plan_kernels


@dataclass(frozen=True)
class CudaTarget(Target):
    name = "cuda"
    extent: int = 1024
    prelude: bool = False

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        for f in fusion_funcs(module):
            for plan in plan_kernels(f):
                if is_host_plan(plan):  # a library call between kernels: no CUDA C of its own
                    output.write(f"// host segment {plan.index} of @{f.sym_name.data}: {plan.op.name} "
                                 f"({plan.split_reason})\n")
                    continue
                shapes = [tuple(self.extent if e == DYNAMIC else 1 if e == BROADCAST else e for e in v.type.shape)
                          for v in plan.domain_values()]
                kernel = render(plan, plan.unit.choose(plan, shapes, None, {}))
                source = kernel.source
                if not self.prelude:
                    source = source[source.index("// scheduler:"):]
                output.write(f"// kernel {plan.index} of @{f.sym_name.data}: {plan.scheduler}")
                output.write(f"{' (' + plan.split_reason + ')' if plan.split_reason else ''}\n")
                output.write(source)
