"""nvFuser's flags on the resize ops that Thunder emits: `slice(..., manual_normalization=)` and
`cat(..., manual_padding=)`. Both tell nvFuser that the caller already did part of the op's
work; fuser's ops give the same results without that help, so the flags only add checks.

- without either flag, the bounds follow nvFuser's rules (check_nvfuser_bounds): constant starts
  >= 0, constant ends >= their constant starts, strides 1. fuser's `python_slicing=True` takes
  Python's rules instead (negative bounds from the end, clamping, empty slices, any step >= 1).
- manual_normalization=True: the bounds are already normalized (0 <= start <= stop <= extent),
  so nvFuser skips turning negative or out-of-range bounds into torch's meaning. fuser's slice
  always normalizes, which is the identity on such bounds; static bounds that are not
  normalized are refused (nvFuser would read out of bounds).
- manual_padding=True: each input of the cat is a `pad` of one tensor along the cat dim, to the
  full output extent, and the cat picks, at each position, the input whose own tensor is there.
  That is the cat of the padded tensors, which is what fuser builds (the pads are left unused).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from fuser_dialect.values import Tensor
from fuser_dialect.ops_resize import PadOp


def check_normalized(arg: Tensor, starts: Sequence[object], stops: Sequence[object]) -> None:
    """Raises unless every static bound of `slice(arg, ...)` is normalized."""
    for d, (start, stop) in enumerate(zip(starts, stops)):
        extent = arg.type.static_extent(d)
        if isinstance(start, int) and start < 0:
            raise ValueError(f"slice(manual_normalization=True): dim {d} starts at {start}; normalized bounds are >= 0")
        if isinstance(start, int) and isinstance(stop, int) and stop < start:
            raise ValueError(f"slice(manual_normalization=True): dim {d} stops at {stop}, before its start {start}")
        if isinstance(stop, int) and extent is not None and not 0 <= stop <= extent:
            raise ValueError(f"slice(manual_normalization=True): dim {d} stops at {stop}, outside [0, {extent}] "
                             f"(the extent of {arg.type.describe()})")


def check_nvfuser_bounds(arg: Tensor, starts: Sequence[object], stops: Sequence[object], steps: Sequence[int]) -> None:
    """Raises where nvFuser's slice refuses the bounds: a constant start below 0, a constant end
    below a constant start, a step other than 1 (what `slice(python_slicing=True)` takes)."""
    for d, (start, stop, step) in enumerate(zip(starts, stops, steps)):
        if isinstance(start, int) and start < 0:
            raise ValueError(f"slice: dim {d} of {arg.type.describe()} starts at {start}; start_indices must be >= 0 "
                             "(as nvFuser's; python_slicing=True counts a negative start from the end)")
        if isinstance(start, int) and isinstance(stop, int) and stop < start:
            raise ValueError(f"slice: dim {d} of {arg.type.describe()} ends at {stop}, before its start {start}; "
                             "end_indices must be >= start_indices (as nvFuser's; python_slicing=True takes Python's "
                             "rules: negative bounds from the end, an empty dim where the end comes first)")
        if step != 1:
            raise ValueError(f"slice: dim {d} of {arg.type.describe()} has stride {step}; strides must be 1 (as "
                             "nvFuser's; python_slicing=True takes any step >= 1)")


def padded_sources(tensors: Sequence[Tensor], axis: int) -> list[Tensor]:
    """The tensors that `cat(tensors, axis, manual_padding=True)`'s inputs pad along `axis`."""
    sources, offset, total = [], 0, None
    for k, t in enumerate(tensors):
        owner = t.value.owner
        if not isinstance(owner, PadOp):
            raise ValueError(f"cat(manual_padding=True): tensors[{k}] ({t.type.describe()}) is not the result of "
                             "fd.ops.pad; with manual_padding every input must be padded along the cat dim")
        widths = owner.mixed_widths
        for d in range(t.ndim):
            if d != axis and (widths[2 * d], widths[2 * d + 1]) != (0, 0):
                raise ValueError(f"cat(manual_padding=True): tensors[{k}] is padded along dim {d}, not only along "
                                 f"the cat dim {axis}")
        source = Tensor(t.fd, owner.input)
        left, extent = widths[2 * axis], source.type.static_extent(axis)
        if offset is not None and isinstance(left, int) and left != offset:
            raise ValueError(f"cat(manual_padding=True): tensors[{k}] is padded by {left} before its values along "
                             f"dim {axis}, but the inputs before it cover {offset} positions")
        padded = t.type.static_extent(axis)
        if total is not None and padded is not None and padded != total:
            raise ValueError(f"cat(manual_padding=True): tensors[{k}] is padded to extent {padded} along dim {axis}, "
                             f"tensors[0] to {total}")
        total = padded if total is None else total
        offset = None if offset is None or extent is None or isinstance(left, SSAValue) else offset + extent
        sources.append(source)
    return sources
