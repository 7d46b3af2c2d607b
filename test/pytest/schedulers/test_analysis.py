"""The kernel analysis (lowering/codegen/analysis.py) and the scheduler units (lowering/schedulers/):
what each kernel reads with which indices is known before any C is printed, and every
decision is taken from it. Expected facts are written out by hand from the fusions below."""

from __future__ import annotations

import ast
import pathlib

import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering.codegen.index import depends_only_on, loop_var, shifted, structural_key
from fuser.lowering.codegen.render import render
from fuser.lowering.schedulers import SCHEDULERS, SchedulerUnit, scheduler_named
from fuser.lowering.schedulers.pointwise import PointwiseSchedule
from fuser.lowering.schedulers.rows import RowSchedule
from fuser.lowering.segmentation.segment import plan_kernels

LOWERING = pathlib.Path(__file__).resolve().parents[3] / "lowering"


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
    from test_row_storage import softmax  # the one spelling of softmax the lowering tests share

    return softmax()


def test_softmax_rows_reuse_the_input_and_exp_across_phases():
    fd = _softmax()
    plan = _single_plan(fd)
    assert plan.scheduler == "inner_persistent"
    (x_arg,) = _args(fd)
    exp = next(op.result for op in plan.ops if op.name == "fuser.unary" and op.op_kind.value == "exp")
    row = (("dim", 0), ("dim", 1))
    # x: loaded by the max phase, read by the sum phase; exp(x - max): computed by the sum
    # phase, read by the store loop (which then neither loads x nor recomputes exp).
    assert plan.analysis.rows.reused == {(x_arg, row), (exp, row)}


def _chained_max(links: int):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        t = x
        for _ in range(links):
            t = fd.ops.sub(t, fd.ops.max(t, dims=[1], keepdim=True))
        fd.add_output(t)
    return fd


def test_chained_reductions_keep_each_link_once():
    plan = _single_plan(_chained_max(6))
    links = {value for value, _ in plan.analysis.rows.reused}
    # Every link t_k is computed once (phase k) and read back by phase k+1: the walk of a
    # phase stops at what an earlier phase computed, so no phase re-walks the chain.
    subs = [op.result for op in plan.ops if op.name == "fuser.binary"]
    assert links == {plan.domain, *subs[:-1]}


def test_chained_reductions_emit_linear_source():
    """Source size per link is constant: each phase reads the previous link from registers."""
    def size(links: int) -> int:
        plan = _single_plan(_chained_max(links))
        return len("\n".join(render(plan, RowSchedule(128, True, 8)).source.splitlines()))

    small, large = size(20), size(80)
    per_link_small, per_link_large = small / 20, large / 80
    assert per_link_large < 1.2 * per_link_small, (small, large)


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
    x_arg, w_arg = _args(fd)
    centred = next(op.result for op in plan.ops if op.name == "fuser.binary" and op.op_kind.value == "sub")
    # x until the variance phase computes x - mean, which the store loop then reads; the
    # weight is read once per block (an invariant load), never a row buffer.
    assert {value for value, _ in plan.analysis.rows.reused} == {x_arg, centred}
    assert w_arg not in {value for value, _ in plan.analysis.rows.reused}


def test_schedules_come_from_the_units():
    fd = _softmax()
    plan = _single_plan(fd)
    unit = plan.unit
    assert unit is scheduler_named("inner_persistent")
    # {}: no array to check, every input dense and aligned; None: alignment unknown.
    schedule = unit.choose(plan, [(64, 4096)], {}, {})
    assert schedule.persistent and not schedule.shared and schedule.vec == 4, schedule.describe()
    assert unit.choose(plan, [(64, 4096)], None, {}).vec == 1
    rows = -(-64 // schedule.rows_per_block)
    assert unit.grid(plan, schedule, _Extents({plan.domain: (64, 4096)})) == (rows, 1, 1)
    assert unit.grid(plan, schedule, _Extents({plan.domain: (0, 4096)})) is None  # never an empty launch
    long_rows = unit.choose(plan, [(4, 1 << 20)], {}, {})
    assert long_rows.iters == 0 and long_rows.merged  # beyond what a block holds: the online pass


def _tiny_pointwise(shape):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=shape)
        fd.add_output(fd.ops.relu(fd.ops.add(fd.ops.mul(x, 2.0), 1.0)))
    return _single_plan(fd)


@pytest.mark.parametrize("n, block", [(8, 32), (100, 32), (200, 64), (512, 128), (513, 128), (1 << 20, 128)])
def test_a_launch_of_fewer_elements_than_a_block_takes_them_rounded_up_to_a_warp(n, block):
    """Static extents: a launch of fewer work items (4-float vectors here) than 128 threads takes
    a block of them rounded up to a warp, one block either way; larger launches keep 128 threads."""
    plan = _tiny_pointwise([n])
    unit = plan.unit
    schedule = unit.choose(plan, [(n,)], {}, {})  # {}: every input dense and aligned (vectors of 4)
    assert schedule.block == block, schedule.describe()
    assert unit.choose(plan, [(n,)], None, {}).block == min(128, -(-n // 32) * 32)  # printing: scalar items
    grid = unit.grid(plan, schedule, _Extents({plan.domain_values()[0]: (n,)}))
    assert grid[0] == 1 or block == 128


def test_a_dynamic_extent_keeps_the_block_of_128():
    """One kernel serves every extent of a dynamic dim: its block does not follow the first call's."""
    plan = _tiny_pointwise([-1])
    assert plan.unit.choose(plan, [(8,)], {}, {}).block == 128


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
    assert names == ["scan", "pointwise", "reduction", "inner_persistent"]
    for unit in SCHEDULERS:
        assert isinstance(unit, SchedulerUnit)
        assert not getattr(type(unit), "__abstractmethods__", None), unit.name


@pytest.mark.parametrize("path", sorted(p for p in LOWERING.rglob("*.py")), ids=lambda p: p.name)
def test_no_lowering_decision_parses_generated_c(path):
    """Regular expressions in lowering/ only read toolchain output (compiler versions, arch
    names), never generated kernel source."""
    tree = ast.parse(path.read_text())
    imports_re = any(isinstance(n, ast.Import) and any(a.name == "re" for a in n.names) for n in ast.walk(tree))
    allowed = {
        "compile.py",  # nvcc --version and sm_XX parsing
        "prebuilt.py",  # the runtime's soname in a built module, the ABI version in its header
        "racecheck.py",  # racecheck builds: `__shared__` declarations instrumented, nothing decided
        "resources.py",  # ptxas's -v report and the PTX's access widths: reported, nothing decided
        "sass.py",  # nvdisasm's SASS: loads in flight, read for the model and reported, nothing emitted
        "static_shared.py",  # the emulation's count of `__shared__` arrays for its launch limits, nothing decided
    }
    assert not imports_re or path.name in allowed, f"{path} imports re"
