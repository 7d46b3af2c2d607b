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
    """Vectorised pointwise loops: which element of the VEC-wide innermost access this is."""


ZERO = Ix(frozenset(), None, False, ("const", 0), "0")


def loop_var(dim: int, name: str | None = None) -> Ix:
    return Ix(frozenset((dim,)), dim, False, ("dim", dim), name)


def vector_lane(dim: int, lane: int, name: str | None = None) -> Ix:
    return Ix(frozenset((dim,)), dim if lane == 0 else None, False, ("lane", dim, lane), name, lane)


def shifted(ix: Ix, how: Hashable, text: str | None = None) -> Ix:
    """`ix` moved by a launch-time constant (a slice start, a cat offset, a stride step)."""
    key = None if ix.key is None else ("shift", how, ix.key)
    return Ix(ix.dims, None, ix.local, key, text)


def computed(parts: Iterable[Ix], text: str | None = None) -> Ix:
    """A position computed in the kernel body from `parts` (reads a local temporary)."""
    dims: frozenset[int] = frozenset().union(*(p.dims for p in parts))
    return Ix(dims, None, True, None, text)


def depends_only_on(idx: Sequence[Ix], allowed: frozenset[int] | set[int]) -> bool:
    """Every component reads only the loop variables of `allowed` dims (and no temporaries)."""
    return all(not ix.local and ix.dims <= allowed for ix in idx)


def structural_key(idx: Sequence[Ix]) -> tuple | None:
    keys = tuple(ix.key for ix in idx)
    return None if None in keys else keys


def texts(idx: Sequence[Ix]) -> tuple[str, ...]:
    assert all(ix.text is not None for ix in idx), "an analysis index has no C text"
    return tuple(ix.text for ix in idx)  # type: ignore[misc]
