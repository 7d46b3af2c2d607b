"""One shape rule per op, shared by the verifiers and the Python builder.

Each rule takes operand types and op parameters and returns the result type, or raises
`ShapeError` quoting the offending dims and extents. Verifiers compare the rule's
answer with the declared result type; the builder uses it to type what it creates.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.utils.exceptions import VerifyException

from fuser_dialect.types import BROADCAST, DYNAMIC, DYNAMIC_ENTRY, TensorType, format_dims


class ShapeError(VerifyException, ValueError):
    """A verifier error (VerifyException) and, from the builder, a ValueError like every
    other bad argument of `fd.ops`."""


def _extent(d: int) -> str:
    return "?" if d == DYNAMIC else "1 (broadcast)" if d == BROADCAST else str(d)


def _check_dims(op: str, dims: Sequence[int], t: TensorType, what: str = "dim") -> None:
    for d in dims:
        if not 0 <= d < t.rank:
            raise ShapeError(f"{op}: {what} {d} is out of range for the input {format_dims(t.shape)} (rank {t.rank})")
    if len(set(dims)) != len(dims):
        raise ShapeError(f"{op}: {what}s {list(dims)} contain duplicates")


def join_dim(op: str, dim: int, a: int, b: int) -> int:
    """Broadcast-join two extents of one dim (elementwise ops)."""
    if a == BROADCAST:
        return b
    if b == BROADCAST or a == b:
        return a
    if a == DYNAMIC:
        return b
    if b == DYNAMIC:
        return a
    raise ShapeError(f"{op}: dim {dim} has extents {a} and {b}, which neither match nor broadcast")


def elementwise(op: str, types: Sequence[TensorType]) -> tuple[int, ...]:
    """Result dims of an elementwise op over tensors of one rank."""
    ranks = {t.rank for t in types}
    if len(ranks) != 1:
        shown = ", ".join(format_dims(t.shape) for t in types)
        raise ShapeError(f"{op}: operands have different ranks ({shown}); broadcast explicitly first")
    dims = list(types[0].shape)
    for t in types[1:]:
        dims = [join_dim(op, i, a, b) for i, (a, b) in enumerate(zip(dims, t.shape))]
    return tuple(dims)


def broadcast(op: str, t: TensorType, is_broadcast_dim: Sequence[bool]) -> tuple[int, ...]:
    kept = [d for d in is_broadcast_dim if not d]
    if len(kept) != t.rank:
        raise ShapeError(
            f"{op}: is_broadcast_dim {list(is_broadcast_dim)} keeps {len(kept)} dims "
            f"but the input {format_dims(t.shape)} has rank {t.rank}"
        )
    it = iter(t.shape)
    return tuple(BROADCAST if b else next(it) for b in is_broadcast_dim)


def broadcast_in_dim(op: str, t: TensorType, out_rank: int, broadcast_dims: Sequence[int]) -> tuple[int, ...]:
    if len(broadcast_dims) != t.rank:
        raise ShapeError(
            f"{op}: broadcast_dims {list(broadcast_dims)} maps {len(broadcast_dims)} input dim(s) "
            f"but the input {format_dims(t.shape)} has rank {t.rank} (one entry per input dim)"
        )
    for d in broadcast_dims:
        if not 0 <= d < out_rank:
            raise ShapeError(f"{op}: broadcast dim {d} is out of range for the rank-{out_rank} result")
    if any(a >= b for a, b in zip(broadcast_dims, broadcast_dims[1:])):
        raise ShapeError(f"{op}: broadcast_dims {list(broadcast_dims)} must be strictly increasing")
    dims = [BROADCAST] * out_rank
    for i, o in enumerate(broadcast_dims):
        dims[o] = t.shape[i]
    return tuple(dims)


def squeeze(op: str, t: TensorType, dims: Sequence[int]) -> tuple[int, ...]:
    _check_dims(op, dims, t)
    for d in dims:
        if t.shape[d] not in (BROADCAST, 1):
            raise ShapeError(
                f"{op}: cannot squeeze dim {d} of {format_dims(t.shape)}: its extent is "
                f"{_extent(t.shape[d])}, not 1"
            )
    return tuple(e for i, e in enumerate(t.shape) if i not in dims)


def expand(op: str, t: TensorType, out: Sequence[int]) -> tuple[int, ...]:
    if len(out) != t.rank:
        raise ShapeError(f"{op}: result rank {len(out)} differs from input rank {t.rank}")
    for i, (a, b) in enumerate(zip(t.shape, out)):
        if a != BROADCAST and a != b and not (a == DYNAMIC or b == DYNAMIC):
            raise ShapeError(
                f"{op}: dim {i} has extent {_extent(a)} and is not a broadcast dim, "
                f"so it cannot expand to {_extent(b)}"
            )
    return tuple(out)


def reshape(op: str, t: TensorType, out: Sequence[int]) -> tuple[int, ...]:
    def numel(dims: Sequence[int]) -> int | None:
        n = 1
        for d in dims:
            if d == DYNAMIC:
                return None
            n *= 1 if d == BROADCAST else d
        return n

    a, b = numel(t.shape), numel(out)
    if a is not None and b is not None and a != b:
        raise ShapeError(
            f"{op}: cannot reshape {format_dims(t.shape)} ({a} elements) to "
            f"{format_dims(out)} ({b} elements)"
        )
    return tuple(out)


def permute(op: str, t: TensorType, perm: Sequence[int]) -> tuple[int, ...]:
    if sorted(perm) != list(range(t.rank)):
        raise ShapeError(f"{op}: dims {list(perm)} is not a permutation of the {t.rank} dims of the input")
    return tuple(t.shape[p] for p in perm)


def resize_extent(extent: int, left: int, right: int) -> int:
    """Output extent of a pad along one dim (DYNAMIC when the extent or a width is dynamic;
    an SSA width is DYNAMIC_ENTRY)."""
    if extent == DYNAMIC or DYNAMIC_ENTRY in (left, right):
        return DYNAMIC
    return (1 if extent == BROADCAST else extent) + left + right


def pad(op: str, t: TensorType, widths: Sequence[int]) -> tuple[int, ...]:
    """`widths` is [left0, right0, left1, right1, ...] in dim order (DYNAMIC_ENTRY for SSA widths)."""
    if len(widths) != 2 * t.rank:
        raise ShapeError(
            f"{op}: {len(widths)} pad widths given for a tensor of rank {t.rank} "
            f"(expected {2 * t.rank}: a left and a right width per dim)"
        )
    dims = []
    for i in range(t.rank):
        left, right = widths[2 * i], widths[2 * i + 1]
        if t.shape[i] == BROADCAST and (left, right) == (0, 0):
            dims.append(BROADCAST)
            continue
        e = resize_extent(t.shape[i], left, right)
        # Test the static case itself: a computed extent of -1 would read as DYNAMIC.
        if t.shape[i] != DYNAMIC and DYNAMIC_ENTRY not in (left, right) and e < 0:
            raise ShapeError(
                f"{op}: dim {i} of extent {_extent(t.shape[i])} padded by ({left}, {right}) "
                f"has negative extent {e}"
            )
        dims.append(e)
    return tuple(dims)


def normalize_slice_bound(bound: int, extent: int) -> int:
    """torch semantics: negative counts from the end, then clamp to [0, extent]."""
    if bound < 0:
        bound += extent
    return min(max(bound, 0), extent)


def slice_extent(start: int, stop: int, step: int, extent: int) -> int:
    start = normalize_slice_bound(start, extent)
    stop = max(normalize_slice_bound(stop, extent), start)
    return (stop - start + step - 1) // step


def slice_(op: str, t: TensorType, bounds: Sequence[int], steps: Sequence[int]) -> tuple[int, ...]:
    """`bounds` is [start0, stop0, start1, stop1, ...] (DYNAMIC_ENTRY for SSA bounds)."""
    if len(bounds) != 2 * t.rank or len(steps) != t.rank:
        raise ShapeError(
            f"{op}: {len(bounds) // 2} start/stop pairs and {len(steps)} steps given "
            f"for a tensor of rank {t.rank}"
        )
    dims = []
    for i, e in enumerate(t.shape):
        start, stop, step = bounds[2 * i], bounds[2 * i + 1], steps[i]
        if step < 1:
            raise ShapeError(f"{op}: dim {i} has step {step}; steps must be positive")
        if e == DYNAMIC or DYNAMIC_ENTRY in (start, stop):
            dims.append(DYNAMIC)
        else:
            n = slice_extent(start, stop, step, 1 if e == BROADCAST else e)
            dims.append(BROADCAST if e == BROADCAST and n == 1 else n)
    return tuple(dims)


def cat(op: str, types: Sequence[TensorType], dim: int) -> tuple[int, ...]:
    if not types:
        raise ShapeError(f"{op}: needs at least one input")
    rank = types[0].rank
    if not 0 <= dim < rank:
        raise ShapeError(f"{op}: cat dim {dim} is out of range for inputs of rank {rank}")
    for k, t in enumerate(types):
        if t.rank != rank:
            raise ShapeError(f"{op}: input {k} has rank {t.rank}, input 0 has rank {rank}")
        if t.dtype != types[0].dtype:
            raise ShapeError(f"{op}: input {k} has dtype {t.dtype}, input 0 has {types[0].dtype}")
    dims = list(types[0].shape)
    total = 0
    for k, t in enumerate(types):
        for i in range(rank):
            if i == dim:
                continue
            a, b = dims[i], t.shape[i]
            if {a, b} == {1, BROADCAST}:  # both extent 1: no disagreement
                dims[i] = 1
                continue
            if a != b and DYNAMIC not in (a, b):
                raise ShapeError(
                    f"{op}: input {k} has extent {_extent(b)} in dim {i} but input 0 has "
                    f"{_extent(a)}; all inputs must agree off the cat dim {dim}"
                )
            dims[i] = a if a != DYNAMIC else b
        e = t.shape[dim]
        total = DYNAMIC if DYNAMIC in (total, e) else total + (1 if e == BROADCAST else e)
    dims[dim] = total
    return tuple(dims)


def _check_axis(op: str, t: TensorType, dim: int) -> None:
    if not 0 <= dim < t.rank:
        raise ShapeError(f"{op}: dim {dim} is out of range for the input {format_dims(t.shape)} (rank {t.rank})")


def _check_index(op: str, index: TensorType) -> None:
    if index.dtype not in ("i64", "i32"):
        raise ShapeError(f"{op}: index must have an integer dtype, got {index.dtype}")


def gather(op: str, t: TensorType, index: TensorType, dim: int) -> tuple[int, ...]:
    """torch.gather: output shaped like the index; index.size(d) <= input.size(d) for d != dim."""
    _check_index(op, index)
    if index.rank != t.rank:
        raise ShapeError(
            f"{op}: index {format_dims(index.shape)} has rank {index.rank} but the input "
            f"{format_dims(t.shape)} has rank {t.rank}; they must have the same rank"
        )
    _check_axis(op, t, dim)
    for d in range(t.rank):
        a, b = t.static_extent(d), index.static_extent(d)
        if d != dim and a is not None and b is not None and b > a:
            raise ShapeError(
                f"{op}: index extent {b} exceeds input extent {a} in dim {d} (only dim {dim} is gathered)"
            )
    return index.shape


def take_along_axis(op: str, t: TensorType, index: TensorType, dim: int) -> tuple[int, ...]:
    _check_index(op, index)
    if index.rank != t.rank:
        raise ShapeError(
            f"{op}: index {format_dims(index.shape)} has rank {index.rank} but the input "
            f"{format_dims(t.shape)} has rank {t.rank}; they must have the same rank"
        )
    _check_axis(op, t, dim)
    dims = []
    for d in range(t.rank):
        if d == dim:
            dims.append(index.shape[d])
            continue
        try:
            dims.append(join_dim(op, d, t.shape[d], index.shape[d]))
        except ShapeError:
            raise ShapeError(
                f"{op}: index extent {_extent(index.shape[d])} differs from input extent "
                f"{_extent(t.shape[d])} in dim {d}; take_along_axis needs equal (or broadcast) "
                f"extents off dim {dim}"
            ) from None
    return tuple(dims)


def scatter(op: str, t: TensorType, index: TensorType, src: TensorType, dim: int) -> tuple[int, ...]:
    """torch.scatter: the result is the input with src[p] written at p with dim replaced by
    index[p], for every position p of the index; index.size(d) <= src.size(d) for every d and
    <= input.size(d) for d != dim. The result is shaped like the input."""
    _check_index(op, index)
    for what, other in (("index", index), ("src", src)):
        if other.rank != t.rank:
            raise ShapeError(
                f"{op}: {what} {format_dims(other.shape)} has rank {other.rank} but the input "
                f"{format_dims(t.shape)} has rank {t.rank}; they must have the same rank"
            )
    _check_axis(op, t, dim)
    if src.dtype != t.dtype:
        raise ShapeError(f"{op}: src dtype {src.dtype} differs from the input's {t.dtype}")
    for d in range(t.rank):
        i = index.static_extent(d)
        if i is None:
            continue
        s, a = src.static_extent(d), t.static_extent(d)
        if s is not None and i > s:
            raise ShapeError(f"{op}: index extent {i} exceeds src extent {s} in dim {d}")
        if d != dim and a is not None and i > a:
            raise ShapeError(f"{op}: index extent {i} exceeds input extent {a} in dim {d} (only dim {dim} is scattered)")
    return t.shape


def index_select(op: str, t: TensorType, index: TensorType, dim: int) -> tuple[int, ...]:
    _check_index(op, index)
    if index.rank > 1:
        raise ShapeError(
            f"{op}: index must be 1-D or a rank-0 tensor, got {format_dims(index.shape)} (rank {index.rank})"
        )
    _check_axis(op, t, dim)
    n = index.shape[0] if index.rank == 1 else 1
    return tuple(n if d == dim else e for d, e in enumerate(t.shape))


def reduction(op: str, t: TensorType, dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    _check_dims(op, dims, t, "reduction dim")
    if keepdim:
        return tuple(BROADCAST if i in dims else e for i, e in enumerate(t.shape))
    return tuple(e for i, e in enumerate(t.shape) if i not in dims)
