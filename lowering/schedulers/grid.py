"""Grid reductions: a reduction over more than one block's rows, in the same kernel, without
float atomics (deterministic: the same inputs and grid give the same bits every run).

Every block folds what it owns into per-thread accumulators, reduces them across the block,
and writes the block's partial to a workspace; the last block to finish (a counter bumped
with one integer atomic after a __threadfence) combines all partials in block order, with
the same block-wide tree on every run, and computes what depends on the totals.

Workspace (kernel parameter kind "workspace", zero-filled by the launcher, `slots` 8-byte
words): word 0 counts finished blocks; partial j of block b lies in words 1 + j * gridDim.x
onwards, as accumulator type elements. The last block resets the counter, so a workspace
may also be reused by the next launch on the same stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fuser_dialect import ops_compute as C
from fuser.lowering.codegen import cuda_exprs as X
from fuser.lowering.codegen.emit_cuda import KernelEmitter

FUNCTOR = {C.ReductionKind.SUM: "FuserSumOp", C.ReductionKind.PROD: "FuserProdOp",
           C.ReductionKind.MAX: "FuserMaxOp", C.ReductionKind.MIN: "FuserMinOp"}
SMEM_NAME = {"float": "fuser_smem_f", "double": "fuser_smem_d", "long long": "fuser_smem_ll", "int": "fuser_smem_i",
             "fuser_complex<float>": "fuser_smem_cf", "fuser_complex<double>": "fuser_smem_cd"}
WIDE_SLOTS = {"fuser_complex<double>": 2}
"""Accumulator types wider than one 8-byte workspace slot, and the slots they take."""
LAST_BLOCK = "fuser_grid_last"


@dataclass(frozen=True)
class Accumulator:
    """A per-thread accumulator `name` of C type `ctype` folding with `kind`."""

    name: str
    ctype: str
    kind: C.ReductionKind
    identity: str

    def combined(self, value: str) -> str:
        """The accumulator with `value` folded in (an expression)."""
        return f"{X.reduction_combine(self.kind)}({self.name}, ({self.ctype}){value})"

    def combine(self, value: str) -> str:
        return f"{self.name} = {self.combined(value)};"

    def block_reduce(self) -> str:
        return (f"{self.name} = fuser_block_reduce({self.name}, {FUNCTOR[self.kind]}(), {self.identity}, "
                f"{SMEM_NAME[self.ctype]});")


def workspace_slots_per_block(accumulators: Sequence[Accumulator]) -> int:
    return sum(WIDE_SLOTS.get(acc.ctype, 1) for acc in accumulators)


def emit_grid_combine(em: KernelEmitter, accumulators: Sequence[Accumulator], smem_types: set[str],
                      last_block: Callable[[], None]) -> None:
    """After every block's loop: the block's partials out, the last block's totals in each
    accumulator, then `last_block()` emits what that block does with them."""
    ws = em.param(("workspace",), "unsigned long long* __restrict__", "workspace", "ws",
                  dim=workspace_slots_per_block(accumulators))
    em.require_sync()
    parts, slot = [], 0
    for j, acc in enumerate(accumulators):
        smem_types.add(acc.ctype)
        em.line(acc.block_reduce())
        part = f"part{j}"
        em.line(f"{acc.ctype}* {part} = reinterpret_cast<{acc.ctype}*>({ws} + 1 + {slot}LL * gridDim.x);")
        parts.append(part)
        slot += WIDE_SLOTS.get(acc.ctype, 1)
    em.open("if (threadIdx.x == 0)")
    for acc, part in zip(accumulators, parts):
        em.line(f"fuser_st({part}, blockIdx.x, {acc.name});")
    # Release this block's partials before counting it; the last block acquires them all.
    em.line("__threadfence();")
    em.line(f"{LAST_BLOCK}[0] = atomicAdd({ws}, 1ULL) == (unsigned long long)gridDim.x - 1ULL;")
    em.line("__threadfence();")
    em.close()
    em.line("__syncthreads();")
    em.open(f"if ({LAST_BLOCK}[0])")
    for acc, part in zip(accumulators, parts):
        em.line(f"{acc.name} = {acc.identity};")
        em.open("for (long long b = threadIdx.x; b < gridDim.x; b += blockDim.x)")
        em.line(acc.combine(f"fuser_ld({part}, b)"))
        em.close()
        em.line(acc.block_reduce())
    last_block()
    em.open("if (threadIdx.x == 0)")
    em.line(f"fuser_st({ws}, 0, 0ULL);")
    em.close()
    em.close()


def shared_declarations() -> list[str]:
    return [f"  __shared__ int {LAST_BLOCK}[1];"]


__all__ = ["Accumulator", "LAST_BLOCK", "emit_grid_combine", "shared_declarations", "workspace_slots_per_block"]
