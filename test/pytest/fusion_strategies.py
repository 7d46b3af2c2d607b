"""Hypothesis strategies: random fusions of broadcast / squeeze / unary / cast chains.

`chain_fusions()` draws a `GeneratedFusion`: a FusionDefinition built through the public
`fd.ops` API (so every fusion is well typed by construction) plus concrete input extents.
A fusion is a chain of steps on one tensor, started from an input with random dtype,
rank, per-dim kind (dynamic, static, broadcast) and stride order. Steps are weighted
towards what the pre-segmentation passes rewrite — broadcast, broadcast_in_dim, squeeze,
unary ops, casts and chains of casts (every dtype, so chains cross compatible and
incompatible pairs), `upcast → squeeze/reshape → downcast` sandwiches,
ops with one tensor operand and a scalar — plus the things that must stop them: a value
used twice (`x + x`, a fork into a second output), an intermediate marked as an output
(with or without a required stride order), and static reshapes (for the cast move).

`random_inputs(case, seed)` makes matching numpy inputs, with some NaN/inf/±0 values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from fuser import DataType, FusionDefinition
from fuser_dialect.types import numpy_dtype

FLOATS = ["f64", "f32", "f16", "bf16"]
DTYPES = FLOATS + ["i64", "i32", "i1"]
INPUT_DTYPES = ["f64", "f32", "f16", "bf16", "i32", "i64"]
MAX_RANK = 5

WIDER = {"bf16": ["f32", "f64"], "f16": ["f32", "f64"], "f32": ["f64"], "i32": ["i64"]}
FLOAT_UNARY = ["relu", "neg", "abs", "exp", "tanh", "sigmoid", "sqrt", "ceil", "sin", "reciprocal"]
INT_UNARY = ["neg", "abs", "relu"]

STEP_WEIGHTS = {
    "broadcast": 4,
    "broadcast_in_dim": 1,
    "squeeze": 4,
    "unary": 4,
    "cast": 4,
    "cast_chain": 3,
    "cast_sandwich": 2,
    "scalar_binary": 1,
    "self_binary": 1,
    "reshape": 1,
    "side_output": 1,
    "fork": 1,
}


@dataclass
class InputSpec:
    dtype: str
    extents: tuple[int, ...]
    """Concrete extents at run time."""


@dataclass
class GeneratedFusion:
    fd: FusionDefinition
    inputs: list[InputSpec]
    steps: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"GeneratedFusion(steps={self.steps})\n{self.fd}"


def _dtype(name: str) -> DataType:
    return DataType(name)


@st.composite
def _input(draw) -> tuple[list[int], list[int], str, list[int] | None]:
    """(define_tensor shape, concrete extents, dtype, stride order)."""
    rank = draw(st.integers(1, 3))
    shape, extents = [], []
    for _ in range(rank):
        kind = draw(st.sampled_from(["dynamic", "dynamic", "static", "broadcast"]))
        if kind == "dynamic":
            shape.append(-1)
            extents.append(draw(st.integers(1, 3)))
        elif kind == "static":
            e = draw(st.integers(2, 3))
            shape.append(e)
            extents.append(e)
        else:
            shape.append(1)
            extents.append(1)
    dtype = draw(st.sampled_from(INPUT_DTYPES))
    order = draw(st.one_of(st.none(), st.permutations(range(rank)).map(list)))
    return shape, extents, dtype, order


def _broadcast_dims(t) -> list[int]:
    return [d for d in range(t.ndim) if t.type.is_broadcast(d) or t.type.static_extent(d) == 1]


@st.composite
def chain_fusions(draw, max_steps: int = 10) -> GeneratedFusion:
    shape, extents, dtype, order = draw(_input())
    n_steps = draw(st.integers(1, max_steps))
    steps: list[str] = []
    fd = FusionDefinition()
    with fd:
        cur = fd.define_tensor(shape=shape, dtype=_dtype(dtype), stride_order=order)
        for _ in range(n_steps):
            options = dict(STEP_WEIGHTS)
            if cur.ndim >= MAX_RANK:
                options.pop("broadcast")
                options.pop("broadcast_in_dim")
            if not _broadcast_dims(cur):
                options.pop("squeeze")
            static = [cur.type.static_extent(d) for d in range(cur.ndim)]
            if None in static or cur.ndim == 0 or cur.ndim == MAX_RANK:
                options.pop("reshape")
            names = sorted(options)
            step = draw(st.sampled_from([n for n in names for _ in range(options[n])]))
            kind = cur.type.dtype
            if step == "broadcast":
                k = draw(st.integers(1, min(2, MAX_RANK - cur.ndim)))
                new = set(draw(st.lists(st.integers(0, cur.ndim + k - 1), min_size=k, max_size=k, unique=True)))
                cur = fd.ops.broadcast(cur, [i in new for i in range(cur.ndim + k)])
                steps.append(f"broadcast{sorted(new)}")
            elif step == "broadcast_in_dim":
                out_rank = cur.ndim + draw(st.integers(1, min(2, MAX_RANK - cur.ndim)))
                kept = sorted(draw(st.lists(st.integers(0, out_rank - 1), min_size=cur.ndim,
                                            max_size=cur.ndim, unique=True)))
                out_shape = [-1] * out_rank
                for o in range(out_rank):
                    if o not in kept:
                        out_shape[o] = 1
                cur = fd.ops.broadcast_in_dim(cur, out_shape, kept)
                steps.append(f"broadcast_in_dim{kept}")
            elif step == "squeeze":
                dims = draw(st.lists(st.sampled_from(_broadcast_dims(cur)), min_size=1, unique=True))
                cur = fd.ops.squeeze(cur, dims)
                steps.append(f"squeeze{sorted(dims)}")
            elif step == "unary":
                if kind == "i1":
                    cur = fd.ops.logical_not(cur)
                    steps.append("logical_not")
                else:
                    name = draw(st.sampled_from(FLOAT_UNARY if kind in FLOATS else INT_UNARY))
                    cur = getattr(fd.ops, name)(cur)
                    steps.append(name)
            elif step == "cast":
                target = draw(st.sampled_from([d for d in DTYPES if d != kind]))
                cur = fd.ops.cast(cur, _dtype(target))
                steps.append(f"cast->{target}")
            elif step == "cast_chain":
                n = draw(st.integers(2, 4))
                chain = []
                for _ in range(n):
                    target = draw(st.sampled_from([d for d in DTYPES if d not in (cur.type.dtype, "i1")]))
                    cur = fd.ops.cast(cur, _dtype(target))
                    chain.append(target)
                steps.append(f"casts->{chain}")
            elif step == "cast_sandwich":
                # upcast → squeeze/reshape → downcast: what the cast move is for.
                wide = WIDER.get(kind)
                meta = _broadcast_dims(cur)
                if wide is None or (not meta and None in static):
                    steps.append("(no sandwich)")
                    continue
                cur = fd.ops.cast(cur, _dtype(draw(st.sampled_from(wide))))
                if meta:
                    cur = fd.ops.squeeze(cur, [draw(st.sampled_from(meta))])
                else:
                    cur = fd.ops.reshape(cur, [int(np.prod(static))])
                cur = fd.ops.cast(cur, _dtype(kind))
                steps.append(f"sandwich({kind})")
            elif step == "scalar_binary":
                if kind == "i1":
                    cur = fd.ops.logical_and(cur, True)
                    steps.append("and True")
                else:
                    op, value = draw(st.sampled_from([("mul", 2), ("add", 1), ("sub", 3), ("maximum", 0)]))
                    if kind in FLOATS:
                        value = float(value) + 0.5
                    cur = getattr(fd.ops, op)(cur, value)
                    steps.append(f"{op} {value}")
            elif step == "self_binary":
                cur = fd.ops.logical_or(cur, cur) if kind == "i1" else fd.ops.add(cur, cur)
                steps.append("x+x")
            elif step == "reshape":
                dims = [e for e in static if e != 1]
                if draw(st.booleans()) or len(dims) < 2:
                    new_shape = list(static)
                    new_shape.insert(draw(st.integers(0, len(new_shape))), 1)
                else:
                    new_shape = [int(np.prod(dims))]
                if len(new_shape) > MAX_RANK:
                    new_shape = [int(np.prod(dims)) or 1]
                cur = fd.ops.reshape(cur, new_shape)
                steps.append(f"reshape{new_shape}")
            elif step == "side_output":
                out_order = draw(st.one_of(st.none(), st.permutations(range(cur.ndim)).map(list)))
                fd.add_output(cur, stride_order=out_order if cur.ndim else None)
                steps.append(f"output(order={out_order})")
            else:  # fork: the value gets a second, non-output use
                fd.add_output(fd.ops.neg(cur) if kind != "i1" else fd.ops.logical_not(cur))
                steps.append("fork")
        out_order = draw(st.one_of(st.none(), st.permutations(range(cur.ndim)).map(list)))
        fd.add_output(cur, stride_order=out_order if cur.ndim else None)
        steps.append(f"output(order={out_order})")
    return GeneratedFusion(fd, [InputSpec(dtype, tuple(extents))], steps)


def random_array(rng: np.random.Generator, dtype: str, extents: tuple[int, ...]) -> np.ndarray:
    if dtype == "i1":
        return rng.integers(0, 2, extents).astype(bool)
    if dtype in ("i32", "i64"):
        return rng.integers(-5, 6, extents).astype(numpy_dtype(dtype))
    x = rng.uniform(-3.0, 3.0, extents)
    if x.size and rng.random() < 0.3:
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0])
        mask = rng.random(extents) < 0.2
        x = np.where(mask, rng.choice(specials, extents), x)
    return x.astype(numpy_dtype(dtype))


def random_inputs(case: GeneratedFusion, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [random_array(rng, spec.dtype, spec.extents) for spec in case.inputs]
