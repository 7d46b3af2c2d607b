"""The pre-segmentation passes preserve results: the reference interpreter before vs after.

- Named cases: the patterns of each pass on random inputs, the RoPE-backward-like chain,
  output layouts (a required channels-last output stays channels-last, in the IR and in
  the strides `execute` returns; a hint is used when there is no requirement).
- Generated cases: `fusion_strategies.chain_fusions` draws random broadcast / squeeze /
  unary / cast chains; each pass (and the pipeline) runs on a copy, the copy must verify,
  keep every required output layout, and compute the same outputs on random inputs.
  `FUSER_HYPOTHESIS_EXAMPLES` (default 300) sets the number of cases per pass.

Equality is exact (NaN = NaN, same dtype and shape), with one documented exception: the
cast pass folds f64 → f32 → f16 into f64 → f16 (one rounding instead of two, as nvFuser
does), which can move a value by one f16 ulp; a generated fusion that contains both an
f64 → f32 cast and a cast to f16 and differs is compared again with a tolerance, and counted.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fuser import DataType, FusionDefinition
from fuser_dialect.fusion import make_context, output_order, the_fusion, verify_fusion
from fuser_dialect.types import BROADCAST
from fuser_dialect.inputs import apply_layout
from fuser_dialect.interpreter import interpret
from fuser_dialect.ops_compute import CastOp
from fusion_strategies import GeneratedFusion, chain_fusions, random_inputs
from suite_settings import example_count
from fuser.passes.allocation_order import AllocationOrderInferencePass
from fuser.passes.consecutive_cast import ConsecutiveCastPass, fold_chain
from fuser.passes.preseg import PresegPass
from fuser.passes.registry import get_pass
from fuser.passes.remove_bcast_squeeze import RemoveBcastSqueezePass

PASSES: dict[str, ModulePass] = {
    "remove-bcast-squeeze": RemoveBcastSqueezePass(),
    "remove-bcast-squeeze{swap-unary=false}": RemoveBcastSqueezePass(swap_unary=False),
    "consecutive-cast": ConsecutiveCastPass(),
    "allocation-order-inference": AllocationOrderInferencePass(),
    "fuser-preseg": PresegPass(),
}
EXAMPLES = example_count("FUSER_HYPOTHESIS_EXAMPLES", 300)

log = logging.getLogger(__name__)  # summaries: shown with --log-cli-level=INFO or on failure


# --- helpers ----------------------------------------------------------------------------


def apply(module: ModuleOp, p: ModulePass) -> ModuleOp:
    """A copy of `module` after `p`, verified (ops and fusion-level rules)."""
    out = module.clone()
    p.apply(make_context(), out)
    out.verify()
    verify_fusion(the_fusion(out))
    return out


def apply_in_place(fd: FusionDefinition, p: ModulePass) -> None:
    """Runs `p` on fd.module itself (what the executor will do with fuser-preseg)."""
    p.apply(make_context(), fd.module)
    fd.module.verify()


def run(module: ModuleOp, inputs) -> list[np.ndarray]:
    return [np.asarray(o) for o in interpret(the_fusion(module), inputs)]


def _comparable(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype in (np.dtype(ml_dtypes.bfloat16), np.float16) else a


def assert_same(before: list[np.ndarray], after: list[np.ndarray], approx: bool = False) -> None:
    assert len(before) == len(after)
    for k, (a, b) in enumerate(zip(before, after)):
        assert a.dtype == b.dtype, f"output {k}: dtype {a.dtype} became {b.dtype}"
        assert a.shape == b.shape, f"output {k}: shape {a.shape} became {b.shape}"
        a, b = _comparable(a), _comparable(b)
        if a.dtype.kind == "f":
            if approx:
                np.testing.assert_allclose(b, a, rtol=1e-2, atol=1e-2, equal_nan=True, err_msg=f"output {k}")
            else:
                np.testing.assert_array_equal(b, a, err_msg=f"output {k}")  # NaN == NaN here
        else:
            np.testing.assert_array_equal(b, a, err_msg=f"output {k}")


def may_double_round(module: ModuleOp) -> bool:
    """Whether consecutive-cast may fold two narrowing casts into one (f64 → f32 → f16)."""
    casts = [op for op in the_fusion(module).walk() if isinstance(op, CastOp)]
    pairs = {(op.input.type.dtype, op.result.type.dtype) for op in casts}
    return ("f64", "f32") in pairs and any(dst == "f16" for _, dst in pairs)


def n_ops(module: ModuleOp) -> int:
    return sum(1 for _ in the_fusion(module).body.block.ops)


def layouts(module: ModuleOp) -> list[tuple[tuple[int, ...] | None, bool]]:
    f = the_fusion(module)
    return [output_order(f, i) for i in range(len(f.function_type.outputs.data))]


def stride_order_of(a: np.ndarray) -> tuple[int, ...]:
    """stride_order[i] = rank of dim i's stride (0 = fastest), from the array's strides."""
    fastest_first = sorted(range(a.ndim), key=lambda d: (a.strides[d], -d))
    order = [0] * a.ndim
    for r, d in enumerate(fastest_first):
        order[d] = r
    return tuple(order)


def check_output_layout_rules(before: ModuleOp, after: ModuleOp) -> None:
    """Requirements are kept exactly; hints appear only where no requirement is."""
    for k, ((o1, r1), (o2, r2)) in enumerate(zip(layouts(before), layouts(after))):
        if r1:
            assert (o2, r2) == (o1, r1), f"output {k}: required order {o1} became {(o2, r2)}"
        else:
            assert not r2, f"output {k}: a pass added a requirement {o2}"


# --- named cases: remove-bcast-squeeze ------------------------------------------------------

RNG = np.random.default_rng(1234)


def _f32(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _bf16(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(ml_dtypes.bfloat16)


def _check(fd: FusionDefinition, p: ModulePass, inputs, *, fewer_ops: bool = True, approx: bool = False) -> ModuleOp:
    after = apply(fd.module, p)
    assert_same(run(fd.module, inputs), run(after, inputs), approx=approx)
    check_output_layout_rules(fd.module, after)
    if fewer_ops:
        assert n_ops(after) < n_ops(fd.module), f"nothing changed:\n{after}"
    return after


def test_bcast_relu_squeeze_becomes_relu():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        b = fd.ops.broadcast(x, [False, True, False])
        s = fd.ops.squeeze(fd.ops.relu(b), [1])
        fd.add_output(s)
    after = _check(fd, RemoveBcastSqueezePass(), [_f32(3, 5)])
    assert [op.name for op in the_fusion(after).body.block.ops] == ["fuser.unary", "func.return"]
    # Without the swap nothing changes.
    same = apply(fd.module, RemoveBcastSqueezePass(swap_unary=False))
    assert str(same) == str(fd.module)


def test_compositions_and_mixed_pairs():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 1, -1], dtype=DataType.Float)
        a = fd.ops.broadcast(x, [True, False, False, False])  # [b, ?, b, ?]
        fd.add_output(fd.ops.squeeze(a, [0, 2]))  # -> squeeze [1] of x
        fd.add_output(fd.ops.broadcast(fd.ops.broadcast(x, [True, False, False, False]), [False, False, True, False, False]))
        fd.add_output(fd.ops.squeeze(fd.ops.squeeze(x, [1]), []))
        fd.add_output(fd.ops.squeeze(fd.ops.broadcast(x, [True, False, False, False]), [2]))  # mixed
    after = _check(fd, RemoveBcastSqueezePass(), [_f32(2, 1, 4)])
    assert "fuser.squeeze %x" not in str(after)
    text = str(after)
    assert text.count("fuser.broadcast") == 2  # the merged broadcast and the mixed pair's
    assert text.count("fuser.squeeze") == 3


@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min"])
def test_broadcast_dims_leave_reductions(kind):
    """remove-broadcast-reduction: the same results, no reduction of a broadcast dim left; and
    the segmentation bug it fixes (min of a max over a 1-element dim, then a prod over a
    broadcast dim: "fuser.reduction read before its phase") is gone on the cpu backend."""
    from fuser.passes.broadcast_reduction import RemoveBroadcastReductionPass

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 1, -1], dtype=DataType.Float)
        reduce = getattr(fd.ops, kind)
        fd.add_output(reduce(x, [1]))
        fd.add_output(reduce(x, [1, 2], keepdim=True))
        fd.add_output(reduce(fd.ops.exp(x), [0, 1]))
        n = fd.ops.min(fd.ops.max(x, [0], keepdim=True), [0, 1], keepdim=False)
        fd.add_output(fd.ops.prod(fd.ops.broadcast(n, [True, False]), [0], keepdim=True))
    inputs = [_f32(1, 1, 5)]
    after = _check(fd, RemoveBroadcastReductionPass(), inputs, fewer_ops=False)
    for op in the_fusion(after).body.block.ops:
        if op.name == "fuser.reduction":
            assert all(op.input.type.shape[d] != BROADCAST for d in op.reduced_dims), str(op)
    got = fd.execute(inputs, backend="cpu")
    for g, e in zip(got, fd.execute(inputs, backend="reference")):
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_rope_like_chain_through_casts():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        b = fd.ops.broadcast(x, [True, False, False])
        c = fd.ops.cast(b, DataType.Float)
        s = fd.ops.squeeze(c, [0])
        d = fd.ops.cast(s, DataType.BFloat16)
        fd.add_output(fd.ops.mul(fd.ops.broadcast(d, [True, False, False]), 2.0))
    inputs = [_bf16(4, 6)]
    after = _check(fd, RemoveBcastSqueezePass(), inputs)
    assert "fuser.squeeze" not in str(after)
    pipeline = _check(fd, PresegPass(), inputs)
    text = str(pipeline)
    assert "fuser.squeeze" not in text and text.count("fuser.broadcast") == 1
    # bf16 → f32 → bf16 folds away: one broadcast of the input, then the multiplication.
    assert "fuser.cast" not in text


def test_swap_never_duplicates_or_touches_outputs():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        b = fd.ops.broadcast(x, [False, True, False])
        r = fd.ops.relu(b)
        fd.add_output(fd.ops.squeeze(r, [1]))
        fd.add_output(r)  # the intermediate is an output
    after = _check(fd, RemoveBcastSqueezePass(), [_f32(2, 3)], fewer_ops=False)
    assert str(after) == str(fd.module)


def test_output_never_becomes_an_input():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.squeeze(fd.ops.broadcast(x, [True, False, False]), [0]))
    inputs = [_f32(2, 3)]
    after = _check(fd, PresegPass(), inputs, fewer_ops=False)
    f = the_fusion(after)
    ret = f.body.block.last_op
    assert all(v not in f.body.block.args for v in ret.operands)
    out = run(after, inputs)[0]
    assert not np.shares_memory(out, inputs[0]) or out is not inputs[0]


def test_channels_last_output_stays_channels_last():
    """A 4-D output required channels-last, replaced by the rewrite: the requirement stays
    on the output (IR) and `execute` returns channels-last strides, same values."""
    nhwc = [3, 0, 2, 1]

    def build() -> FusionDefinition:
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1, -1, -1], dtype=DataType.Float)
            b = fd.ops.broadcast(x, [False, False, False, False, True])
            y = fd.ops.squeeze(fd.ops.exp(b), [4])
            fd.add_output(y, stride_order=nhwc)
        return fd

    x = _f32(2, 3, 4, 5)
    ref_fd = build()
    (expected,) = ref_fd.execute([x], backend="reference")
    assert stride_order_of(expected) == tuple(nhwc)

    fd = build()
    ops_before = n_ops(fd.module)
    apply_in_place(fd, RemoveBcastSqueezePass())
    assert n_ops(fd.module) < ops_before
    assert "fuser.squeeze" not in str(fd) and "fuser.broadcast" not in str(fd)
    assert output_order(fd.fusion, 0) == (tuple(nhwc), True)
    assert "fuser.stride_order = array<i64: 3, 0, 2, 1>" in str(fd)
    (out,) = fd.execute([x], backend="reference")
    assert stride_order_of(out) == tuple(nhwc)
    np.testing.assert_array_equal(out, expected)

    # The whole pipeline keeps it too (and adds no hint beside it).
    fd = build()
    apply_in_place(fd, PresegPass())
    assert output_order(fd.fusion, 0) == (tuple(nhwc), True)
    assert "stride_order_hint" not in str(fd)
    (out,) = fd.execute([x], backend="reference")
    assert stride_order_of(out) == tuple(nhwc)
    np.testing.assert_array_equal(out, expected)


def test_output_not_forwarded_to_output_with_other_layout():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        y = fd.ops.neg(x)
        fd.add_output(y, stride_order=[0, 1])
        fd.add_output(fd.ops.squeeze(fd.ops.broadcast(y, [False, False, True]), [2]))
    after = _check(fd, RemoveBcastSqueezePass(), [_f32(3, 4)], fewer_ops=False)
    assert str(after) == str(fd.module)


def test_long_chain_terminates_quickly():
    """200 broadcast → unary → squeeze rounds: every swap is progress, the walker ends."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        for k in range(200):
            if k % 2:
                b = fd.ops.broadcast(t, [True, True, False, False])
                t = fd.ops.squeeze(fd.ops.relu(fd.ops.neg(b)), [0, 1])
            else:
                b = fd.ops.broadcast(t, [False, True, False])
                u = fd.ops.cast(fd.ops.cast(b, DataType.Double), DataType.Float)
                t = fd.ops.squeeze(u, [1])
        fd.add_output(t)
    start = time.perf_counter()
    after = _check(fd, PresegPass(), [_f32(3, 4)])
    assert time.perf_counter() - start < 20
    text = str(after)
    assert "fuser.broadcast" not in text and "fuser.squeeze" not in text and "fuser.cast" not in text


# --- named cases: consecutive-cast ----------------------------------------------------------


@pytest.mark.parametrize(
    "chain, folded",
    [
        (["f64", "f32", "f16", "f32", "f64"], ["f16", "f64"]),
        (["f64", "f32", "f64", "f16"], ["f16"]),
        (["f32", "f64", "f32"], []),
        (["bf16", "f32", "bf16"], []),
        (["bf16", "f32", "f16"], ["f32", "f16"]),
        (["f32", "i32", "f32"], ["i32", "f32"]),
        (["i32", "i64", "i32"], []),
        (["i64", "i32", "i64"], ["i32", "i64"]),
        (["f16", "f32", "bf16", "f32", "f16"], ["f32", "bf16", "f32", "f16"]),
        (["f64", "f32", "f16", "bf16", "f32"], ["f16", "bf16", "f32"]),
        (["bf16", "f32", "f64"], ["f64"]),
        (["f32", "i1", "f32"], ["i1", "f32"]),
    ],
)
def test_fold_chain(chain, folded):
    assert fold_chain(chain) == folded


@pytest.mark.parametrize(
    "chain",
    [
        ["f64", "f32", "f16", "f32", "f64"],
        ["f32", "f64", "f32"],
        ["bf16", "f32", "bf16", "f32"],
        ["f16", "f32", "bf16", "f32", "f16"],
        ["i32", "i64", "i32"],
        ["f32", "i32", "f64", "f32"],
    ],
)
def test_cast_chain_numerics(chain):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], dtype=DataType(chain[0]))
        for dtype in chain[1:]:
            t = fd.ops.cast(t, DataType(dtype))
        fd.add_output(fd.ops.abs(t))
    if chain[0].startswith("i"):
        x = RNG.integers(-1000, 1000, 4096).astype(np.dtype(chain[0].replace("i", "int")))
    else:
        x = (RNG.standard_normal(4096) * 100).astype(DataType(chain[0]).numpy)
    _check(fd, ConsecutiveCastPass(), [x], fewer_ops=fold_chain(chain) != chain[1:],
           approx=chain[:3] == ["f64", "f32", "f16"])


def test_narrowing_cast_moves_above_squeeze_and_folds():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 1, -1], dtype=DataType.BFloat16)
        s = fd.ops.squeeze(fd.ops.cast(x, DataType.Float), [1])
        fd.add_output(fd.ops.neg(fd.ops.cast(s, DataType.BFloat16)))
    after = _check(fd, ConsecutiveCastPass(), [_bf16(3, 1, 5)])
    assert "fuser.cast" not in str(after)


# --- named cases: allocation-order-inference ------------------------------------------------


def test_hint_and_requirement_strides():
    """execute lays an output out by its requirement, else by the inferred hint."""
    nhwc = [3, 0, 2, 1]

    def build(required):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1, -1, -1], dtype=DataType.Float, stride_order=nhwc)
            fd.add_output(fd.ops.relu(x), stride_order=required)
            fd.add_output(fd.ops.sum(x, [1]))  # N, H, W of a channels-last input
        return fd

    x = _f32(2, 3, 4, 5)
    fd = build(None)
    before = fd.execute([x], backend="reference")
    assert [stride_order_of(o) for o in before] == [(3, 2, 1, 0), (2, 1, 0)]  # no hint yet
    apply_in_place(fd, AllocationOrderInferencePass())
    assert output_order(fd.fusion, 0) == (tuple(nhwc), False)
    assert "fuser.stride_order_hint = array<i64: 3, 0, 2, 1>" in str(fd)
    assert "fuser.stride_order =" not in str(fd)
    after = fd.execute([x], backend="reference")
    assert stride_order_of(after[0]) == tuple(nhwc)
    assert stride_order_of(after[1]) == (2, 1, 0)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)

    # A requirement wins and is never overwritten.
    fd = build([3, 2, 0, 1])
    apply_in_place(fd, AllocationOrderInferencePass())
    assert output_order(fd.fusion, 0) == ((3, 2, 0, 1), True)
    (out, _) = fd.execute([x], backend="reference")
    assert stride_order_of(out) == (3, 2, 0, 1)


def test_passes_registered():
    assert get_pass("remove-bcast-squeeze") is RemoveBcastSqueezePass
    assert get_pass("consecutive-cast") is ConsecutiveCastPass
    assert get_pass("allocation-order-inference") is AllocationOrderInferencePass
    assert get_pass("fuser-preseg") is PresegPass
    assert get_pass("remove-broadcast-reduction").name == "remove-broadcast-reduction"
    assert PresegPass.name == "fuser-preseg" and RemoveBcastSqueezePass().swap_unary is True


# --- generated cases ----------------------------------------------------------------------

STATS: dict[str, Counter] = {name: Counter() for name in PASSES}
# test_generated_case_counts reads the STATS of the generated tests before it in its process: under
# pytest-xdist they all run on one worker, in this order.
ONE_WORKER = pytest.mark.xdist_group("preseg-generated-cases")


@ONE_WORKER
@pytest.mark.parametrize("name", list(PASSES))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(case=chain_fusions(), seed=st.integers(0, 2**32 - 1))
def test_generated_fusions_preserve_results(name: str, case: GeneratedFusion, seed: int):
    before = case.fd.module
    after = apply(before, PASSES[name])
    check_output_layout_rules(before, after)
    inputs = random_inputs(case, seed)
    expected, got = run(before, inputs), run(after, inputs)
    try:
        assert_same(expected, got)
        approx = False
    except AssertionError:
        if name not in ("consecutive-cast", "fuser-preseg") or not may_double_round(before):
            raise
        assert_same(expected, got, approx=True)
        approx = True
    stats = STATS[name]
    stats["cases"] += 1
    stats["changed"] += str(after) != str(before)
    stats["fewer ops"] += n_ops(after) < n_ops(before)
    stats["needed the tolerance"] += approx
    if name in ("allocation-order-inference", "fuser-preseg"):
        # execute's layout rule (requirement, else hint) on the rewritten fusion.
        f = the_fusion(after)
        for k, out in enumerate(run(after, inputs)):
            order = output_order(f, k)[0]
            if order is not None and out.ndim:
                laid = apply_layout(out, order)
                big = [d for d in range(out.ndim) if laid.shape[d] > 1]
                got = stride_order_of(laid)
                assert sorted(big, key=lambda d: got[d]) == sorted(big, key=lambda d: order[d])


@ONE_WORKER
def test_generated_case_counts(capsys):
    """Reports how many generated cases each pass saw (and how often it changed the IR)."""
    ran = {name: s for name, s in STATS.items() if s["cases"]}
    if not ran:
        pytest.skip("the generated-fusion tests did not run in this session")
    for name, s in ran.items():
        log.info("%s: %d generated cases, IR changed in %d, fewer ops in %d, needed the double-rounding tolerance %d",
                 name, s["cases"], s["changed"], s["fewer ops"], s["needed the tolerance"])
    for name, s in ran.items():
        assert s["cases"] >= min(EXAMPLES, 200) * 0.9, f"{name}: only {s['cases']} cases"
        if name != "allocation-order-inference":
            assert s["fewer ops"] > s["cases"] // 10, f"{name} rarely fires: {dict(s)}"
