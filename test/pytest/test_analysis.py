"""The kernel analysis (lowering/analysis.py) and the scheduler units (lowering/schedulers/):
what each kernel reads with which indices is known before any C is printed, and every
decision is taken from it. Expected facts are written out by hand from the fusions below."""

from __future__ import annotations

import ast
import pathlib

import pytest

from fuser_dialect import DataType, FusionDefinition
from fuser.lowering.index import depends_only_on, loop_var, shifted, structural_key
from fuser.lowering.render import render
from fuser.lowering.schedulers import SCHEDULERS, SchedulerUnit, scheduler_named
from fuser.lowering.schedulers.pointwise import PointwiseSchedule
from fuser.lowering.schedulers.rows import RowSchedule
from fuser.lowering.segment import plan_kernels

LOWERING = pathlib.Path(__file__).resolve().parents[2] / "lowering"


def _args(fd):
    return list(fd.fusion.body.block.args)


def _single_plan(fd):
    (plan,) = plan_kernels(fd.fusion)
    return plan


def test_typed_index_dependencies():
    i0, i1 = loop_var(0, "i0"), loop_var(1, "i1")
    moved = shifted(i1, ("slice", "s", 1, 1), "(ss3 + (i1))")
    assert moved.dims == {1} and moved.exact is None and not moved.local
    assert depends_only_on((moved,), {1}) and not depends_only_on((i0, moved), {1})
    assert structural_key((i0, moved)) == (("dim", 0), ("shift", ("slice", "s", 1, 1), ("dim", 1)))


def test_bias_add_hoists_the_bias_and_vectorises_both_loads():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        b = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.add(x, fd.ops.broadcast(b, [True, False])))
    (access,) = _single_plan(fd).analysis.groups
    x_arg, b_arg = _args(fd)
    assert access.invariant_prefix == 1  # b does not depend on dim 0: that dim may loop in a thread
    assert access.vector_values == (x_arg, b_arg)


def test_transposed_read_is_not_vectorised():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.permute(x, [1, 0]))
    (access,) = _single_plan(fd).analysis.groups
    assert access.vector_values is None  # the innermost output dim walks x's outer dim
    assert access.invariant_prefix == 0


def test_gathered_index_is_data_dependent():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        fd.add_output(fd.ops.take_along_axis(x, i, 1))
    (access,) = _single_plan(fd).analysis.groups
    assert access.vector_values is None


def _softmax():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        m = fd.ops.max(x, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(x, m))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    return fd


def test_softmax_rows_reuse_the_input_across_phases():
    fd = _softmax()
    plan = _single_plan(fd)
    assert plan.scheduler == "inner_persistent"
    (x_arg,) = _args(fd)
    assert plan.analysis.rows.reused == {(x_arg, (("dim", 0), ("dim", 1)))}


def test_layer_norm_weight_is_row_invariant_not_a_row_buffer():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        w = fd.define_tensor(shape=[-1])
        mean = fd.ops.div(fd.ops.sum(x, dims=[1], keepdim=True), x.size(1))
        c = fd.ops.sub(x, mean)
        var = fd.ops.div(fd.ops.sum(fd.ops.mul(c, c), dims=[1], keepdim=True), x.size(1))
        y = fd.ops.mul(fd.ops.mul(c, fd.ops.rsqrt(var)), fd.ops.broadcast(w, [True, False]))
        fd.add_output(y)
    plan = _single_plan(fd)
    x_arg, _ = _args(fd)
    assert {value for value, _ in plan.analysis.rows.reused} == {x_arg}


def test_schedules_come_from_the_units():
    fd = _softmax()
    plan = _single_plan(fd)
    unit = plan.unit
    assert unit is scheduler_named("inner_persistent")
    schedule = unit.choose(plan, [(64, 4096)], None, {})
    assert schedule == RowSchedule(512, True, 8)
    assert unit.grid(plan, schedule, _Extents({plan.domain: (64, 4096)})) == (64, 1, 1)
    assert unit.grid(plan, schedule, _Extents({plan.domain: (0, 4096)})) is None  # never an empty launch
    long_rows = unit.choose(plan, [(4, 1 << 20)], None, {})
    assert long_rows.iters == 0  # beyond registers: the online pass


def test_rendering_is_a_pure_function_of_plan_and_schedule():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        b = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.add(x, fd.ops.broadcast(b, [True, False])))
    plan = _single_plan(fd)
    schedule = PointwiseSchedule(128, (1,))
    first, second = render(plan, schedule), render(plan, schedule)
    assert first.source == second.source and first.params == second.params
    assert "// scheduler: pointwise, block: 128, outer dims: [1]" in first.source


class _Extents:
    def __init__(self, shapes):
        self.shapes = shapes

    def shape(self, v):
        return self.shapes[v]


def test_every_unit_implements_the_protocol():
    names = [unit.name for unit in SCHEDULERS]
    assert names == ["pointwise", "reduction", "inner_persistent"]
    for unit in SCHEDULERS:
        assert isinstance(unit, SchedulerUnit)
        assert not getattr(type(unit), "__abstractmethods__", None), unit.name


@pytest.mark.parametrize("path", sorted(p for p in LOWERING.rglob("*.py")), ids=lambda p: p.name)
def test_no_lowering_decision_parses_generated_c(path):
    """Regular expressions in lowering/ only read toolchain output (compiler versions, arch
    names), never generated kernel source."""
    tree = ast.parse(path.read_text())
    imports_re = any(isinstance(n, ast.Import) and any(a.name == "re" for a in n.names) for n in ast.walk(tree))
    allowed = {"compile.py"}  # nvcc --version and sm_XX parsing
    assert not imports_re or path.name in allowed, f"{path} imports re"
