"""The `segment` pass: records the kernel grouping in the IR so it can be read and tested.

Each tensor op gets `fuser.kernel = <index>`; the fusion gets `fuser.kernels`, one entry
per kernel with its name, scheduler and, where a kernel boundary was forced, why."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass

from fuser_dialect.fusion import fusion_funcs
from fuser.lowering.segmentation.segment import plan_kernels


@dataclass(frozen=True)
class SegmentPass(ModulePass):
    name = "segment"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in fusion_funcs(op):
            plans = plan_kernels(f)
            entries = []
            for plan in plans:
                for kernel_op in plan.ops:
                    kernel_op.attributes["fuser.kernel"] = IntegerAttr(plan.index, i64)
                entry = {"name": StringAttr(plan.name), "scheduler": StringAttr(plan.scheduler)}
                if plan.split_reason:
                    entry["reason"] = StringAttr(plan.split_reason)
                entries.append(DictionaryAttr(entry))
            f.attributes["fuser.kernels"] = ArrayAttr(entries)
