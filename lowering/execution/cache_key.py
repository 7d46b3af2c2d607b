"""The executor cache key: exactly what concretization and code generation consume.

`make_key(fusion, checked_inputs, backend, resize_extents)` runs on every `execute`, so it
never runs an xDSL pass: the concretization decisions come from `fuser_dialect.extents`
(a plain walk), and only a miss runs the rewriting `concretize`.

The key's parts (a hashable `CacheKey`, a NamedTuple of named parts):
- `backend`: "cpu" / "cuda" (different code).
- `dtypes`, `ranks`, `broadcast`: per input, from the fusion's types (`check_inputs` has
  already rejected inputs that disagree, so these only tell fusions apart).
  A `?` dim that is 1 at run time does NOT change the key and is not a broadcast (as in
  nvFuser: only declared `b` dims and resize outputs of extent 1 broadcast); so the batch size
  going from 8 to 1 is a hit.
- `layouts`: per tensor input, the actual stride order (nvFuser's convention: entry i ranks dim
  i's stride, 0 = fastest) and whether it is dense in that order; dims of extent <= 1 do not
  count (their stride is meaningless). Scalars: None.
- `alignment`: per tensor input, the data pointer's alignment in bytes capped at 16 — only
  when asked for (`alignment=True`: a code generator that vectorizes by alignment); else None.
- `concretization`: the `ConcretizationInfo` — per resize op the broadcast/iteration decision
  of each resized dim, and with static resize extents also each resized dim's facts (pad
  (extent, left, right), slice (extent, start, stop), cat (input extents)). Everything the
  concretized IR depends on is in here, so equal keys give identical concretized fusions (a
  scalar that changes a pad width changes the key in resize-extents mode; without it, only a
  width that changes a broadcast decision does).

One `FusionCache` per fusion (as nvFuser's FusionExecutorCache): the key does not identify the
fusion itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from xdsl.dialects import func

from fuser_dialect.extents import ConcretizationInfo, ExtentPlan, RuntimeExtents, runtime_arguments
from fuser_dialect.types import BROADCAST, TensorType, dtype_name


class InputLayout(NamedTuple):
    """stride_order[i] ranks dim i's stride (0 = fastest); dense: no gaps in that order."""

    stride_order: tuple[int, ...]
    dense: bool

    def __str__(self) -> str:
        return f"stride order {list(self.stride_order)} ({'dense' if self.dense else 'strided'})"


class CacheKey(NamedTuple):
    """(A NamedTuple: built and hashed on every execute.)"""

    backend: str
    dtypes: tuple[str, ...]
    ranks: tuple[int, ...]
    broadcast: tuple[tuple[bool, ...], ...]
    layouts: tuple[InputLayout | None, ...]
    alignment: tuple[int, ...] | None
    concretization: ConcretizationInfo

    def differences(self, other: CacheKey) -> list[str]:
        """What changed from `other` to this key, one phrase per changed item."""
        out: list[str] = []
        if self.backend != other.backend:
            out.append(f"backend changed: {other.backend} -> {self.backend}")
        for name, what in (("dtypes", "dtype"), ("ranks", "rank"), ("broadcast", "broadcast dims"),
                           ("layouts", "layout"), ("alignment", "alignment")):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine == theirs:
                continue
            if mine is None or theirs is None or len(mine) != len(theirs):
                out.append(f"{what} of the inputs changed: {_show(theirs)} -> {_show(mine)}")
                continue
            out += [f"{what} of input {i} changed: {_show(b)} -> {_show(a)}"
                    for i, (a, b) in enumerate(zip(mine, theirs)) if a != b]
        out += _concretization_differences(self.concretization, other.concretization)
        return out

    def distance(self, other: CacheKey) -> int:
        return len(self.differences(other))

    def describe(self) -> str:
        """A one-line summary (for logs and listings)."""
        parts = [f"{name}={_show(getattr(self, name))}" for name in self._fields if name != "concretization"]
        c = self.concretization
        parts.append(f"resize extents {'static' if c.resize_extents else 'symbolic'}")
        for r in c.resizes:
            for k, d in enumerate(r.resized_dims):
                facts = f" {_show(r.extents[k])}" if r.extents is not None else ""
                parts.append(f"{r.label} dim {d}: {'broadcast' if r.broadcast[k] else 'iteration'}{facts}")
        return ", ".join(parts)


def _show(v: object) -> str:
    if isinstance(v, InputLayout):
        return str(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_show(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, bool):
        return "b" if v else "-"
    return str(v)


def _concretization_differences(new: ConcretizationInfo, old: ConcretizationInfo) -> list[str]:
    if new.resize_extents != old.resize_extents:
        state = {True: "enabled", False: "disabled"}
        return [f"concretize_resize_extents changed: {state[old.resize_extents]} -> {state[new.resize_extents]}"]
    if [(r.name, r.resized_dims) for r in new.resizes] != [(r.name, r.resized_dims) for r in old.resizes]:
        return ["resize ops changed (a different fusion)"]
    out = []
    if new.exact_gathers != old.exact_gathers:
        out.append(f"exact gathers (index extents equal to the input's) changed: "
                   f"{list(old.exact_gathers)} -> {list(new.exact_gathers)}")
    for a, b in zip(new.resizes, old.resizes):
        for k, d in enumerate(a.resized_dims):
            if a.broadcast[k] != b.broadcast[k]:
                kinds = {True: "broadcast", False: "iteration"}
                out.append(f"broadcast decision of {a.label} (dim {d}) changed: {kinds[b.broadcast[k]]} -> {kinds[a.broadcast[k]]}")
            if a.extents is not None and b.extents is not None and a.extents[k] != b.extents[k]:
                out.append(f"resize extents of {a.label} (dim {d}) changed: {_show(b.extents[k])} -> {_show(a.extents[k])}")
    return out


# --- the key ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Static:
    """The parts of a key that only depend on the fusion's types (computed once per plan)."""

    dtypes: tuple[str, ...]
    ranks: tuple[int, ...]
    broadcast: tuple[tuple[bool, ...], ...]
    tensor_args: tuple[bool, ...]


def _static_parts(plan: ExtentPlan) -> _Static:
    # Kept on the plan: computed once per fusion, not per execute.
    static = getattr(plan, "_cache_key_static", None)
    if static is not None:
        return static
    dtypes, ranks, bcast, tensors = [], [], [], []
    for arg in plan.fusion.body.block.args:
        t = arg.type
        if isinstance(t, TensorType):
            dtypes.append(t.dtype)
            ranks.append(t.rank)
            bcast.append(tuple(d == BROADCAST for d in t.shape))
            tensors.append(True)
        else:
            dtypes.append(dtype_name(t))
            ranks.append(0)
            bcast.append(())
            tensors.append(False)
    static = _Static(tuple(dtypes), tuple(ranks), tuple(bcast), tuple(tensors))
    plan._cache_key_static = static  # type: ignore[attr-defined]
    return static


def make_key(
    fusion: func.FuncOp | ExtentPlan,
    checked_inputs: Sequence[object],
    backend: str,
    resize_extents: bool,
    *,
    extents: RuntimeExtents | None = None,
    alignment: bool = False,
) -> CacheKey:
    """The cache key of one execution (see the module docstring).

    `fusion`: the (unconcretized) fusion, or better an `ExtentPlan` of it built once (a FuncOp
    costs a plan per call). `checked_inputs`: what `check_inputs` returned (numpy arrays and
    scalars; torch tensors work too). `extents`: the `RuntimeExtents` of these inputs when the
    caller already has them (saves the walk). Raises ExtentError (a ValueError) when the
    inputs' extents cannot run."""
    plan = fusion if isinstance(fusion, ExtentPlan) else ExtentPlan(fusion)
    static = _static_parts(plan)
    if extents is None:
        shapes, scalars = runtime_arguments(plan, checked_inputs)
        extents = plan.evaluate(shapes, scalars)
    layouts = tuple([layout_of(x) if is_tensor else None for x, is_tensor in zip(checked_inputs, static.tensor_args)])
    aligned = (tuple(alignment_of(x) for x, t in zip(checked_inputs, static.tensor_args) if t)
               if alignment else None)
    return CacheKey(backend, static.dtypes, static.ranks, static.broadcast, layouts, aligned,
                    extents.concretization(resize_extents))


# --- layouts ----------------------------------------------------------------------------------------

_ROW_MAJOR: dict[int, InputLayout] = {}


def _row_major(rank: int) -> InputLayout:
    layout = _ROW_MAJOR.get(rank)
    if layout is None:
        layout = _ROW_MAJOR[rank] = InputLayout(tuple(range(rank - 1, -1, -1)), True)
    return layout


def layout_of(x: object) -> InputLayout:
    """The stride order and density of an array or tensor (numpy strides are in bytes, torch
    strides in elements: only their order and the density test depend on the unit)."""
    flags = getattr(x, "flags", None)
    if flags is not None and flags.c_contiguous:  # numpy's common case, without sorting
        return _row_major(x.ndim)  # type: ignore[attr-defined]
    shape = tuple(x.shape)  # type: ignore[attr-defined]
    if flags is not None:
        strides, unit = tuple(x.strides), x.itemsize  # type: ignore[attr-defined]
    else:
        strides, unit = tuple(x.stride()), 1  # type: ignore[attr-defined]
    return stride_layout(shape, strides, unit)


def stride_layout(shape: Sequence[int], strides: Sequence[int], unit: int) -> InputLayout:
    rank = len(shape)
    if 0 in shape:  # nothing is read: every layout is the same
        return _row_major(rank)
    # Slowest first: dims of extent > 1 by decreasing stride (ties: outer dim slower); a dim of
    # extent <= 1 sits where row-major order would put it, just before its right neighbour.
    slowest_first = sorted((d for d in range(rank) if shape[d] > 1), key=lambda d: (-strides[d], d))
    for d in range(rank - 1, -1, -1):
        if shape[d] <= 1:
            right = slowest_first.index(d + 1) if d + 1 < rank else len(slowest_first)
            slowest_first.insert(right, d)
    expected, dense = unit, True
    for d in reversed(slowest_first):
        if shape[d] <= 1:
            continue
        if strides[d] != expected:
            dense = False
            break
        expected *= shape[d]
    order = [0] * rank
    for position, d in enumerate(slowest_first):
        order[d] = rank - 1 - position
    return InputLayout(tuple(order), dense)


def alignment_of(x: object) -> int:
    """The largest power of two (at most 16) dividing the data pointer, in bytes."""
    if hasattr(x, "data_ptr"):
        ptr = x.data_ptr()  # type: ignore[attr-defined]
    else:
        ptr = x.__array_interface__["data"][0]  # type: ignore[attr-defined]
    return min(16, ptr & -ptr) if ptr else 16


__all__ = ["CacheKey", "InputLayout", "make_key", "layout_of", "stride_layout", "alignment_of"]
