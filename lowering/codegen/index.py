"""Typed index expressions: one component of the multi-index at which a kernel reads a value.

Emission and analysis both carry an index as a tuple of `Ix`, never as bare C text, so that
every decision about an access (hoist it out of a loop, keep it in registers across phases,
read it as part of a 16-byte vector) is made from what the index *depends on*, not by
parsing the C it prints as.

- `dims`: the iteration-domain dims whose loop variables the component reads;
- `exact`: the domain dim when the component is that loop variable itself (a plain
  pass-through, so consecutive threads read consecutive elements);
- `local`: it reads a value computed inside the kernel body (a gathered index, a reshape's
  re-linearised position, a pad's shifted position), so it cannot move above that value;
- `key`: a structural description, equal for two components exactly when they denote the
  same index expression (None when it cannot be known, e.g. a data-dependent position);
- `text`: the C expression (None in the analysis, which never prints).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Ix:
    dims: frozenset[int]
    exact: int | None
    local: bool
    key: Hashable | None
    text: str | None = None
    lane: int | None = None
    """Vectorised loops: which element of the VEC-wide innermost access this is."""
    offset: int | None = None
    """The component is its (one) dim's loop variable plus this launch-time constant known at
    compile time (0: the variable itself; a static slice start, a cat piece's start); None:
    anything else. A vector access may cross a shift that keeps VEC lanes together."""


ZERO = Ix(frozenset(), None, False, ("const", 0), "0")


def loop_var(dim: int, name: str | None = None) -> Ix:
    return Ix(frozenset((dim,)), dim, False, ("dim", dim), name, offset=0)


def vector_lane(dim: int, lane: int, name: str | None = None) -> Ix:
    return Ix(frozenset((dim,)), dim if lane == 0 else None, False, ("lane", dim, lane), name, lane, offset=0)


def shifted(ix: Ix, how: Hashable, text: str | None = None, by: int | None = None) -> Ix:
    """`ix` moved by a launch-time constant (a slice start, a cat offset, a stride step); `by`:
    that constant when it is known at compile time (the shift then keeps a vector lane: lane j
    of the access stays lane j)."""
    key = None if ix.key is None else ("shift", how, ix.key)
    offset = ix.offset + by if ix.offset is not None and by is not None else None
    lane = ix.lane if offset is not None else None
    return Ix(ix.dims, None, ix.local, key, text, lane, offset)


def computed(parts: Iterable[Ix], text: str | None = None) -> Ix:
    """A position computed in the kernel body from `parts` (reads a local temporary)."""
    dims: frozenset[int] = frozenset().union(*(p.dims for p in parts))
    return Ix(dims, None, True, None, text)


def gathered(parts: Iterable[Ix], key: Hashable, text: str | None = None) -> Ix:
    """A position read from an index loaded before the loop (a gather by a per-row index):
    computed once, outside the loop, so a loop constant to the loop's loads (not `local`)."""
    dims: frozenset[int] = frozenset().union(*(p.dims for p in parts))
    return Ix(dims, None, False, key, text)


def derived(parts: Sequence[Ix], how: Hashable, text: str | None = None) -> Ix:
    """A position computed from `parts` by an expression written inline (no temporary: a reshape's
    split or merge of dims with static extents), so it is local only where a part is."""
    dims: frozenset[int] = frozenset().union(*(p.dims for p in parts))
    keys = tuple(p.key for p in parts)
    key = None if None in keys else ("derived", how, keys)
    return Ix(dims, None, any(p.local for p in parts), key, text)


def depends_only_on(idx: Sequence[Ix], allowed: frozenset[int] | set[int]) -> bool:
    """Every component reads only the loop variables of `allowed` dims (and no temporaries)."""
    return all(not ix.local and ix.dims <= allowed for ix in idx)


def within_dims(idx: Sequence[Ix], allowed: frozenset[int] | set[int]) -> bool:
    """Every component varies only with the loop variables of `allowed` dims, temporaries
    included (a per-row index re-linearised through a reshape is constant along the row, though
    it cannot be hoisted above the temporary it reads: `depends_only_on` is that stricter test)."""
    return all(ix.dims <= allowed for ix in idx)


def lane_of(idx: Sequence[Ix]) -> int:
    """Which element of a vector access `idx` is at (0 when no component is a vector lane)."""
    return next((ix.lane for ix in idx if ix.lane is not None), 0)


def without_lanes(idx: Sequence[Ix]) -> tuple[Ix, ...]:
    """`idx` with every vector lane replaced by its dim's loop variable: the index the kernel
    analysis, which walks one element at a time, knows the access by (row buffers are kept
    only at unshifted indices)."""
    return tuple(loop_var(next(iter(ix.dims))) if ix.lane is not None and ix.offset == 0 else ix for ix in idx)


def structural_key(idx: Sequence[Ix]) -> tuple | None:
    keys = tuple(ix.key for ix in idx)
    return None if None in keys else keys


def texts(idx: Sequence[Ix]) -> tuple[str, ...]:
    assert all(ix.text is not None for ix in idx), "an analysis index has no C text"
    return tuple(ix.text for ix in idx)  # type: ignore[misc]
