"""`concretize` and `evaluate_extents`: numerics (the reference interpreter on the concretized
module equals the original and an independent numpy oracle), the type invariants of the
rewrite, the two modes, the stale-kernel scenario, and run-time extent errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuser import DataType, FusionDefinition
from fuser_dialect.extents import ExtentError, ExtentPlan, evaluate_extents, runtime_arguments
from fuser_dialect.fusion import make_context, the_fusion
from fuser_dialect.inputs import check_inputs
from fuser_dialect.interpreter import interpret
from fuser_dialect.types import BROADCAST, TensorType
from fuser.lowering.execution.cache_key import make_key
from fuser.passes.concretize import ConcretizePass, concretize, parse_cli_inputs, resize_extents_enabled
from resize_fusions import CASES, pad_scalar_widths, pad_to_broadcast, printed, rope, rope_inputs, rope_oracle

MODES = [True, False]


def concretized(fd: FusionDefinition, inputs, resize_extents: bool):
    module = fd.module.clone()
    shapes, scalars = runtime_arguments(fd.fusion, check_inputs(fd.fusion, inputs))
    info = concretize(module, shapes, scalars, resize_extents)
    return module, info


def close(a, b) -> bool:
    return all(x.shape == y.shape and np.allclose(x, y, rtol=1e-5, atol=1e-5) for x, y in zip(a, b))


def check_types_match_extents(module, inputs) -> None:
    """Every static extent of the concretized IR is the run-time extent; `b` exactly where the
    run says broadcast."""
    f = the_fusion(module)
    rt = evaluate_extents(f, *runtime_arguments(f, check_inputs(f, inputs)))
    for value, shape in rt.shapes.items():
        t = value.type
        assert isinstance(t, TensorType)
        for d, (e, n, b) in enumerate(zip(t.shape, shape, rt.broadcast[value])):
            assert (e == BROADCAST) == b, f"{t} dim {d}: type {e}, run-time broadcast {b}"
            if e >= 0:
                assert e == n, f"{t} dim {d} is static {e} but {n} at run time"


# --- the pad-to-broadcast example ----------------------------------------------------------------


def _types(module) -> list[str]:
    f = the_fusion(module)
    return [a.type.describe() for a in f.body.block.args] + [
        op.results[0].type.describe() for op in f.body.block.ops if op.results and isinstance(op.results[0].type, TensorType)
    ]


def test_pad_to_broadcast_static_mode_makes_resized_extents_static():
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((8, 3, 2, 5, 6), np.float32), rng.standard_normal((8, 7, 4, 9, 5), np.float32)]
    module, info = concretized(pad_to_broadcast(), inputs, True)
    # args, then pad, then mul: dims 1 and 3 broadcast; 4 and 5 static; the batch stays `?`.
    assert _types(module) == ["f32[?, 3, 2, 5, 6]", "f32[?, ?, 4, ?, 5]", "f32[?, b, 4, b, 5]", "f32[?, ?, 4, ?, 5]"]
    (pad,) = info.resizes
    assert pad.resized_dims == (1, 2, 3, 4)
    assert pad.broadcast == (True, False, True, False)
    assert pad.extents == ((3, -1, -1), (2, 1, 1), (5, -4, 0), (6, 0, -1))
    expected = np.pad(inputs[0][:, 1:-1, :, 4:, :-1], [(0, 0), (0, 0), (1, 1), (0, 0), (0, 0)]) * inputs[1]
    assert close(interpret(the_fusion(module), inputs), [expected])


def test_pad_to_broadcast_symbolic_mode_only_decides_broadcast():
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((8, 3, 2, 5, 6), np.float32), rng.standard_normal((8, 7, 4, 9, 5), np.float32)]
    module, info = concretized(pad_to_broadcast(), inputs, False)
    assert _types(module) == ["f32[?, ?, ?, ?, ?]", "f32[?, ?, ?, ?, ?]", "f32[?, b, ?, b, ?]", "f32[?, ?, ?, ?, ?]"]
    assert info.resizes[0].extents is None
    expected = np.pad(inputs[0][:, 1:-1, :, 4:, :-1], [(0, 0), (0, 0), (1, 1), (0, 0), (0, 0)]) * inputs[1]
    assert close(interpret(the_fusion(module), inputs), [expected])


@pytest.mark.parametrize("resize_extents", MODES)
def test_batch_dim_stays_dynamic_even_when_one(resize_extents):
    inputs = [np.ones((1, 3, 2, 5, 6), np.float32), np.ones((1, 1, 4, 1, 5), np.float32)]
    module, _ = concretized(pad_to_broadcast(), inputs, resize_extents)
    assert all(t.startswith("f32[?,") for t in _types(module))


# --- numerics on every case -------------------------------------------------------------------------


@pytest.mark.parametrize("resize_extents", MODES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_concretized_module_computes_what_the_original_computes(case, resize_extents):
    rng = np.random.default_rng(42)
    compared_with_original = 0
    for _ in range(25):
        inputs = case.sample(rng)
        fd = case.build()
        module, _ = concretized(fd, inputs, resize_extents)
        module.verify()
        got = interpret(the_fusion(module), inputs)
        assert close(got, case.oracle(inputs)), [getattr(x, "shape", x) for x in inputs]
        check_types_match_extents(module, inputs)
        # The original runs too: a resized extent-1 dim broadcasts at run time in both.
        assert close(got, interpret(fd.fusion, inputs))
        compared_with_original += 1
    assert compared_with_original >= 5


@pytest.mark.parametrize("resize_extents", MODES)
def test_concretize_is_idempotent(resize_extents):
    rng = np.random.default_rng(3)
    inputs = rope_inputs(rng, 2, 3, 5, 8, 16)
    module, _ = concretized(rope(), inputs, resize_extents)
    once = printed(module)
    shapes, scalars = runtime_arguments(the_fusion(module), check_inputs(the_fusion(module), inputs))
    concretize(module, shapes, scalars, resize_extents)
    assert printed(module) == once


@pytest.mark.parametrize("resize_extents", MODES)
def test_fusion_without_resize_ops_is_unchanged(resize_extents):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        y = fd.define_tensor(shape=[-1, 1])
        s = fd.ops.sum(fd.ops.exp(x) * y, dims=[1], keepdim=True)
        fd.add_output(fd.ops.reshape(s, [x.size(0)]))
    module, info = concretized(fd, [np.ones((1, 1), np.float32), np.ones((1, 1), np.float32)], resize_extents)
    assert printed(module) == printed(fd.module)
    assert info.resizes == ()


def test_same_concretization_info_gives_identical_ir():
    """The rewrite reads only what ConcretizationInfo holds: inputs with equal infos (here:
    different batch and heads) give the same concretized text."""
    rng = np.random.default_rng(5)
    fd = rope()
    texts = {}
    for b, h in [(1, 1), (2, 3), (4, 2)]:
        module, info = concretized(fd, rope_inputs(rng, b, h, 6, 8, 12), True)
        texts.setdefault(info, set()).add(printed(module))
    assert len(texts) == 1 and len(next(iter(texts.values()))) == 1


@pytest.mark.parametrize("resize_extents", MODES)
def test_cat_of_extent_one_broadcasts(resize_extents):
    """cat of a 1-row and a 0-row slice has one row: broadcast, so the add takes y's rows."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        y = fd.define_tensor(shape=[-1, -1])
        n = fd.define_scalar(dtype=DataType.Int)
        top = fd.ops.slice(x, [0, 0], [n, x.size(1)])
        none = fd.ops.slice(x, [0, 0], [0, x.size(1)])
        fd.add_output(fd.ops.add(fd.ops.cat([top, none], 0), y))
    x, y = np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((4, 2), np.float32)
    module, info = concretized(fd, [x, y, 1], resize_extents)
    assert info.resizes[-1].broadcast == (True,)
    assert close(interpret(the_fusion(module), [x, y, 1]), [x[:1] + y])
    _, info2 = concretized(fd, [x, np.ones((2, 2), np.float32), 2], resize_extents)
    assert info2.resizes[-1].broadcast == (False,)


def test_static_mode_rope_has_static_resize_extents():
    rng = np.random.default_rng(6)
    inputs = rope_inputs(rng, 2, 3, 7, 8, 16)
    module, info = concretized(rope(), inputs, True)
    f = the_fusion(module)
    resize_ops = [op for op in f.body.block.ops if op.name in ("fuser.slice", "fuser.cat")]
    for op, facts in zip(resize_ops, info.resizes):
        for v in [*op.operands, op.results[0]]:
            if isinstance(v.type, TensorType):
                assert all(v.type.shape[d] >= 0 for d in facts.resized_dims), (op.name, v.type)
        if op.name == "fuser.slice":  # the bounds of resized dims are constants
            bounds = op.mixed_bounds
            assert all(isinstance(bounds[2 * d + k], int) for d in facts.resized_dims for k in (0, 1)), op
    slices = [op for op in f.body.block.ops if op.name == "fuser.slice"]
    # cos/sin slices: static rows 0:7 of 16; x halves: static 0:4 and 4:8 of the head dim 8.
    assert [op.results[0].type.describe() for op in slices] == [
        "f32[7, 8]", "f32[7, 8]", "f32[?, ?, 7, 4]", "f32[?, ?, 7, 4]"]
    assert [r.extents for r in info.resizes] == [((16, 0, 7),), ((16, 0, 7),), ((8, 0, 4),), ((8, 4, 8),), ((4, 4),)]
    assert close(interpret(f, inputs), rope_oracle(inputs))


# --- the stale-kernel scenario ----------------------------------------------------------------------


def test_scalar_pad_width_changes_key_in_static_mode_only_when_it_matters():
    """A fusion re-executed in a loop where a scalar changes a pad width: in resize-extents mode
    every width is a different key (a kernel compiled for one width is never reused for
    another); symbolically, only widths that flip a broadcast decision are."""
    fd = pad_scalar_widths()
    plan = ExtentPlan(fd.fusion)
    x, y3, y1 = np.ones((2, 4), np.float32), np.ones((2, 3), np.float32), np.ones((2, 1), np.float32)
    static, symbolic, texts = [], [], {}
    for w in (-1, 0, 1, 2):
        r = 3 - 4 - w  # output extent 3 whatever w
        inputs = [x, y3, w, r]
        checked = check_inputs(fd.fusion, inputs)
        static.append(make_key(plan, checked, "cpu", True))
        symbolic.append(make_key(plan, checked, "cpu", False))
        module, info = concretized(fd, inputs, True)
        texts[info] = printed(module)
    assert len(set(static)) == 4
    assert len(set(symbolic)) == 1
    assert len(set(texts.values())) == 4
    # Output extent 1 (w = 0, r = -3): a broadcast — a new key in both modes.
    checked = check_inputs(fd.fusion, [x, y1, 0, -3])
    assert make_key(plan, checked, "cpu", False) not in symbolic
    assert make_key(plan, checked, "cpu", True) not in static


# --- random fusion graphs ----------------------------------------------------------------------------

_UNARY = ["neg", "exp", "abs"]


@st.composite
def chains(draw):
    """A random chain of ops over one 2-D tensor, with pads and slices whose widths/bounds are
    static, scalar inputs or `fuser.dim` arithmetic, and run-time extents for it."""
    steps = draw(st.lists(st.sampled_from(
        ["pad", "pad_scalar", "slice", "slice_dim", "cat", "cat_slices", "unary", "self_binary", "permute",
         "sum_keepdim", "scalar_binary"]), min_size=1, max_size=6))
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    params = [draw(st.tuples(st.integers(0, 1), st.integers(-2, 2), st.integers(-2, 2))) for _ in steps]
    return steps, params, (rows, cols)


def _build_chain(steps, params):
    scalars: list[int] = []
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        for step, (dim, a, b) in zip(steps, params):
            if step == "pad":
                widths = [0, 0, 0, 0]
                widths[2 * (1 - dim)], widths[2 * (1 - dim) + 1] = a, b
                t = fd.ops.pad(t, widths)
            elif step == "pad_scalar":
                w = fd.define_scalar(dtype=DataType.Int)
                scalars.append(a)
                widths = [0, 0, 0, 0]
                widths[2 * (1 - dim)], widths[2 * (1 - dim) + 1] = w, b
                t = fd.ops.pad(t, widths)
            elif step in ("slice", "slice_dim"):
                starts, stops = [0, 0], [t.size(0), t.size(1)]
                starts[dim] = abs(a)
                stops[dim] = t.size(dim) + b if step == "slice_dim" else b if b > 0 else t.size(dim)
                t = fd.ops.slice(t, starts, stops, python_slicing=True)
            elif step == "cat":
                t = fd.ops.cat([t, fd.ops.neg(t)], dim)
            elif step == "cat_slices":  # extents min(|a|, n) + min(|b|, n): sometimes exactly 1
                ends = [[t.size(0), t.size(1)], [t.size(0), t.size(1)]]
                ends[0][dim], ends[1][dim] = abs(a), abs(b)
                t = fd.ops.cat([fd.ops.slice(t, [0, 0], ends[0]), fd.ops.exp(fd.ops.slice(t, [0, 0], ends[1]))], dim)
            elif step == "unary":
                t = getattr(fd.ops, _UNARY[a % 3])(t)
            elif step == "self_binary":
                t = fd.ops.mul(t, fd.ops.add(t, 1.0))
            elif step == "scalar_binary":
                t = fd.ops.sub(t, float(a))
            elif step == "permute":
                t = fd.ops.permute(t, [1, 0])
            elif step == "sum_keepdim":
                t = fd.ops.sum(t, dims=[dim], keepdim=True)
        fd.add_output(t)
    return fd, scalars


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(chains(), st.integers(0, 2**31))
def test_random_chains_concretize_preserves_results(chain, seed):
    steps, params = chain[0], chain[1]
    fd, scalars = _build_chain(steps, params)
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(chain[2]).astype(np.float32), *scalars]
    try:
        expected = interpret(fd.fusion, inputs)
    except ExtentError:
        # The original cannot run these extents (e.g. a crop beyond the extent): evaluate_extents
        # must say so too, before anything is compiled.
        with pytest.raises(ValueError):
            evaluate_extents(fd.fusion, *runtime_arguments(fd.fusion, check_inputs(fd.fusion, inputs)))
        return
    for resize_extents in MODES:
        try:
            module, _ = concretized(fd, inputs, resize_extents)
        except ExtentError as e:
            # Only a crop that the reference interpreter silently clamps may be refused.
            assert "crops" in str(e)
            return
        module.verify()
        check_types_match_extents(module, inputs)
        got = interpret(the_fusion(module), inputs)
        assert all(g.shape == e.shape for g, e in zip(got, expected)), (steps, params)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-5, equal_nan=True)


# --- evaluate_extents --------------------------------------------------------------------------------


def test_evaluate_extents_shapes_scalars_and_resize_facts():
    fd = pad_scalar_widths()
    rt = evaluate_extents(fd.fusion, [(2, 4), (2, 3), None, None], [None, None, 1, -2])
    assert rt.outputs == ((2, 3),)
    (pad,) = rt.resizes
    assert (pad.label, pad.resized_dims, pad.widths, pad.output_shape) == ("fuser.pad #0", (1,), (0, 0, 1, -2), (2, 3))
    assert pad.dim_facts(1) == (4, 1, -2)
    w_arg = fd.fusion.body.block.args[2]
    assert rt.scalar(w_arg) == 1 and rt.scalars[w_arg] == 1


def test_evaluate_extents_normalizes_slice_bounds():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.slice(x, [-3, 0], [100, x.size(1)], python_slicing=True))
    rt = evaluate_extents(fd.fusion, [(5, 2)], [None])
    (s,) = rt.resizes
    assert s.resized_dims == (0,)  # dim 1 is statically whole: not resized
    assert s.bounds == (2, 5, 0, 2) and s.output_shape == (3, 2)
    assert s.dim_facts(0) == (5, 2, 5)


@pytest.mark.parametrize("shapes, scalars, message", [
    ([(2, 4), (3, 3), None, None], [None, None, 1, -2],
     "fuser.binary mul: dim 0 has extents 2 and 3 at run time, which neither match nor broadcast"),
    ([(2, 4), (2, 3), None, None], [None, None, None, -2],
     "fuser.pad: the left pad width of dim 1 depends on a scalar input that was given no value"),
    ([(2, 4), (2, 3), None, None], [None, None, -3, -2],
     "fuser.pad: dim 1 of extent 4 padded by (-3, -2) at run time has negative extent -1"),
    ([(2, 4, 1), (2, 3), None, None], [None, None, 1, -2], "input 0 (f32[?, ?]): expected rank 2, got shape [2, 4, 1]"),
    ([(2, 4)], [None], "fusion @fusion has 4 inputs; got 1 input shapes and 1 scalar values"),
])
def test_evaluate_extents_errors_name_op_dim_and_extents(shapes, scalars, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        evaluate_extents(pad_scalar_widths().fusion, shapes, scalars)


def test_an_input_dim_of_one_is_not_a_broadcast():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        y = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.add(x, y))
    with pytest.raises(ExtentError, match="dim 1 has extents 1 and 3"):
        evaluate_extents(fd.fusion, [(2, 1), (2, 3)], [None, None])


# --- the pass and its options -------------------------------------------------------------------------


def test_pass_options_parse_extents_and_scalars():
    f = pad_scalar_widths().fusion
    shapes, scalars = parse_cli_inputs(f, "2x4;2x3", "1,-2")
    assert shapes == [(2, 4), (2, 3), None, None] and scalars == [None, None, 1, -2]
    assert parse_cli_inputs(f, "2x4;2x3", "_;-2")[1] == [None, None, None, -2]
    with pytest.raises(ValueError, match="gives 1 shape"):
        parse_cli_inputs(f, "2x4", None)


def test_pass_applies_on_a_module():
    module = pad_to_broadcast().module.clone()
    ConcretizePass(extents="8x3x2x5x6;8x7x4x9x5", resize_extents=False).apply(make_context(), module)
    assert "!fuser.tensor<?xbx?xbx?xf32>" in printed(module)


def test_fuser_disable_env_turns_static_extents_off(monkeypatch):
    monkeypatch.setenv("FUSER_DISABLE", " concretize_resize_extents ,")
    assert not resize_extents_enabled()
    module = pad_to_broadcast().module.clone()
    ConcretizePass(extents="8x3x2x5x6;8x7x4x9x5").apply(make_context(), module)
    assert "!fuser.tensor<?x3x2x5x6xf32>" not in printed(module)
    monkeypatch.delenv("FUSER_DISABLE")
    assert resize_extents_enabled() and not resize_extents_enabled(["concretize_resize_extents"])


def test_an_unknown_disable_option_is_an_error_not_ignored(monkeypatch):
    monkeypatch.setenv("FUSER_DISABLE", "concretize_resize_extent")  # a typo
    with pytest.raises(ValueError, match=r"FUSER_DISABLE='concretize_resize_extent': unknown disable option "
                                         r"'concretize_resize_extent'; known: concretize_resize_extents"):
        resize_extents_enabled()
