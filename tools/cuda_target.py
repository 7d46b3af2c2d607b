"""`fuser-opt -t cuda`: prints the CUDA C of every kernel of a module.

The module is segmented with the schedules chosen for a nominal extent of 1024 per
dynamic dim (option `extent`) on an H100 (lowering/device.py), for inputs that are dense and
16-byte aligned (option `aligned`, default true; false: any alignment, so no vector accesses):
emission needs a schedule, and the source otherwise only takes extents as parameters.

The output is one program that nvcc / NVRTC compile as it is (`nvcc -cubin -arch=sm_90`): the
shared head (header macros, prelude, support functions) once, then every kernel. Option
`prelude=false` prints the kernels alone (what the FileCheck tests read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from fuser_dialect.fusion import fusion_funcs
from fuser_dialect.types import BROADCAST, DYNAMIC
from fuser.lowering.segmentation.host_segments import is_host_plan
from fuser.lowering.codegen.render import header_macros, render, source_head
from fuser.lowering.segmentation.segment import plan_kernels


@dataclass(frozen=True)
class CudaTarget(Target):
    name = "cuda"
    extent: int = 1024
    prelude: bool = True
    aligned: bool = True

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        parts: list[str] = []
        macros: set[str] = set()
        for f in fusion_funcs(module):
            for plan in plan_kernels(f):
                if is_host_plan(plan):  # a library call between kernels: no CUDA C of its own
                    parts.append(f"// host segment {plan.index} of @{f.sym_name.data}: {plan.op.name} "
                                 f"({plan.split_reason})\n")
                    continue
                shapes = [tuple(self.extent if e == DYNAMIC else 1 if e == BROADCAST else e for e in v.type.shape)
                          for v in plan.domain_values()]
                # No arrays to check: {} stands for dense aligned inputs, None for unknown ones.
                arrays: dict | None = {} if self.aligned else None
                source = render(plan, plan.unit.choose(plan, shapes, arrays, {})).source
                macros |= header_macros(plan)
                split = f" ({plan.split_reason})" if plan.split_reason else ""
                parts.append(f"// kernel {plan.index} of @{f.sym_name.data}: {plan.scheduler}{split}\n"
                             + source[source.index("// scheduler:"):])
        if self.prelude and any(p.startswith("// kernel") for p in parts):
            output.write(source_head(macros) + "\n")
        output.write("".join(parts))
