"""Regenerates the kernels a recorded GPU run timed, from the commit that ran them, as data the
performance model can be fitted to (python -m fuser.benchmarks.calibrate reads the result).

Run it with that commit's fuser on the path, e.g. for the H100 run of 2026-11-26 (57230ff):

    git worktree add /tmp/wt 57230ff && pip install --no-deps --target /tmp/old /tmp/wt
    PYTHONPATH=/tmp/old python benchmarks/gpu/extract_kernels.py OUT.json

Per benchmark case at its GPU shape (gpu-quick mode): every kernel's schedule, grid, block,
dynamic shared memory, ptxas's registers and spills for sm_90 (NVRTC; no GPU), and the bytes a
thread has in flight, twice: as that commit's schedule meant them (`in_flight_per_thread`: the
row-varying loads of the first phase times the loads issued before their first use, or a
pointwise thread's loads per element) and as its SASS has them (`sass_in_flight_per_thread`:
lowering/backends/sass.py of THIS checkout, loaded by path, run on the cubin; the model is
fitted to that one). Kept self-contained (only that commit's public and lowering modules, and
sass.py, which imports no other fuser module), since the layout moves."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np

_SASS_PY = Path(__file__).resolve().parents[2] / "lowering" / "backends" / "sass.py"


def _sass_module():
    spec = importlib.util.spec_from_file_location("fuser_sass_reader", _SASS_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


class _CheapRng:
    def standard_normal(self, size, dtype=None):
        return np.zeros(size, dtype or np.float64)

    def integers(self, low, high, size, dtype=None):
        return np.zeros(size, dtype or np.int64)

    def random(self, size):
        return np.ones(size)

    def uniform(self, low, high, size):
        return np.full(size, (low + high) / 2)


def _itemsize(v) -> int:
    from fuser_dialect.types import numpy_dtype

    return numpy_dtype(v.type.dtype).itemsize


def _row_in_flight(plan, schedule) -> int:
    from fuser.lowering.analysis import global_loads
    from fuser.lowering.index import depends_only_on, loop_var

    rank = plan.domain.type.rank
    reduced = frozenset(plan.reduced_dims)
    root = plan.row_reductions[0].input
    loads = global_loads({op.results[0]: op for op in plan.ops}, [(root, [loop_var(d) for d in range(rank)])])
    per_element = sum(_itemsize(load.value) for load in loads if not depends_only_on(load.idx, frozenset(range(rank)) - reduced))
    if not getattr(schedule, "block_per_row", True):
        return per_element
    iters = getattr(schedule, "iters", 0)
    if iters and getattr(schedule, "shared", False):
        return per_element * min(iters, 4)
    return per_element * (iters or 1)


def _row_waits(plan, schedule, extents, grid) -> tuple[int, int]:
    """(DRAM waits, reductions) of a block (the performance model's Traffic.round_trips and
    .barriers): per row it owns, its first phase's load steps (a register row: one; shared
    memory: one per 4 vectors, its unroll; a dynamic loop: one per 4 block-widths of the row,
    nvcc's unroll, in every pass) and one reduction per phase."""
    shape = extents.shape(plan.domain)
    reduced = set(plan.reduced_dims)
    rows = int(np.prod([e for d, e in enumerate(shape) if d not in reduced]))
    row_len = int(np.prod([shape[d] for d in reduced]))
    reductions = len(plan.row_reductions)
    if not getattr(schedule, "block_per_row", True):
        return -(-row_len // 4), reductions
    rows_per_block = -(-rows // grid[0])
    iters = getattr(schedule, "iters", 0)
    if iters and getattr(schedule, "shared", False):
        loads = -(-iters // 4)
    elif iters:
        loads = 1
    else:
        loads = (reductions + 1) * -(-row_len // (4 * schedule.block))
    return rows_per_block * loads, rows_per_block * reductions


def _pointwise_waits(plan, schedule, extents, grid) -> tuple[int, int]:
    """A thread's loop iterations, 4 a wait (nvcc unrolls such loops by 4)."""
    steps = 1
    for v, k, vec in zip(plan.domain_values(), schedule.outer_dims, schedule.vec or (1,) * len(plan.groups)):
        shape = extents.shape(v)
        inner, outer = int(np.prod(shape[k:])) // vec, int(np.prod(shape[:k]))
        steps = max(steps, -(-inner // (grid[0] * schedule.block)) * -(-outer // grid[1]))
    return -(-steps // 4), 0


def _pointwise_in_flight(plan, schedule) -> int:
    from fuser.lowering.analysis import global_loads
    from fuser.lowering.index import loop_var

    vecs = schedule.vec or (1,) * len(plan.groups)
    best = 0
    for access, outputs, outer, vec in zip(plan.analysis.groups, plan.groups, schedule.outer_dims, vecs):
        rank = outputs[0].type.rank
        loads = global_loads({op.results[0]: op for op in plan.ops}, [(o, [loop_var(d) for d in range(rank)]) for o in outputs])
        total = 0
        for load in loads:
            used = frozenset().union(*(ix.dims for ix in load.idx))
            if outer and not any(d < outer for d in used):
                continue
            total += _itemsize(load.value) * (vec if load.value in (access.vector_values or ()) else 1)
        best = max(best, total)
    return best


def main(out: str) -> None:
    from fuser.benchmarks.cases import all_cases
    from fuser.lowering import compile as cc
    from fuser.lowering.compiled import build_compiled_fusion
    from fuser.lowering.render import header_macros, render
    from fuser_dialect.extents import runtime_arguments
    from fuser_dialect.inputs import check_inputs

    sass = _sass_module()
    cases = []
    for case in all_cases("gpu-quick"):
        fd = case.build()
        inputs = case.spec.make_inputs(_CheapRng(), case.shape, case.dtype)
        ex = fd._get_executor()
        checked = check_inputs(ex.fusion, inputs)
        shapes, scalars = runtime_arguments(ex.fusion, checked)
        compiled = build_compiled_fusion(ex.module, shapes, scalars, None, True)
        extents = compiled.extent_plan.evaluate(shapes, scalars)
        schedules = compiled.schedules(extents, checked)
        macros = frozenset().union(*map(header_macros, compiled.plans))
        kernels = []
        for plan, schedule in zip(compiled.plans, schedules):
            kernel = render(plan, schedule, macros)
            built = cc.compile_cuda(kernel.source, "sm_90", ("--ptxas-options=-v",), backend="nvrtc")
            log = built.log
            counted = sass.sass_reports(built.cubin)[kernel.name]
            registers = int(re.search(r"Used (\d+) registers", log).group(1))
            spills = sum(int(n) for n in re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log).groups())
            static = re.search(r"(\d+) bytes smem", log)
            in_flight = (_pointwise_in_flight(plan, schedule) if plan.scheduler == "pointwise"
                         else _row_in_flight(plan, schedule))
            moved = sum(int(np.prod(extents.shape(v))) * _itemsize(v) for v in (*plan.inputs, *plan.outputs))
            grid = list(plan.unit.grid(plan, schedule, extents))
            trips, barriers = (_pointwise_waits if plan.scheduler == "pointwise" else _row_waits)(
                plan, schedule, extents, grid)
            kernels.append({"name": kernel.name, "scheduler": plan.scheduler, "schedule": schedule.describe(),
                            "min_bytes": moved,
                            "grid": grid, "block": schedule.block, "round_trips": trips, "barriers": barriers,
                            "registers": registers, "spill_bytes": spills,
                            "shared_bytes": kernel.shared_bytes + (int(static.group(1)) if static else 0),
                            "in_flight_per_thread": in_flight,
                            "sass_in_flight_per_thread": counted.in_flight_per_thread})
        cases.append({"case": case.key, "min_bytes": case.min_bytes(), "kernels": kernels})
        print(case.key, [(k["schedule"], k["grid"], k["registers"], k["in_flight_per_thread"],
                          k["sass_in_flight_per_thread"]) for k in kernels], flush=True)
    with open(out, "w") as f:
        json.dump(cases, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
