"""Out-of-range indices are an error, never a silent out-of-bounds read.

Every gather / take_along_axis / index_select / scatter index is checked in the kernel that
reads it (lowering/execution/index_errors.py: a compare per index read, the first fault recorded and
raised as an IndexError). This module adds the host's check before launch, for the indices it
can check cheaply from an input that lives on the host: it raises before anything is written.
The index values change between calls with the same signature, so a launch plan runs these
checks on every call too.

How each index is checked is decided once per fusion (`IndexChecks(fusion)`), not per call:
a *range* check applies when the index's cone is only value-preserving ops from one integer
input (layout ops — broadcast, broadcast_in_dim, squeeze, expand, reshape, permute — and
widening integer casts), optionally through `where(ne(y, c), y, k)` with constants c and k
(cross-entropy's ignore index), and that input is on the host (numpy, or a CPU tensor; a CUDA
tensor would need a copy and a synchronisation per call): one pass over the input itself,
comparing it as unsigned (a negative value wraps above any extent, so one compare catches both
ends) — the host runtime's C loop where the cpu backend has loaded it and the input is
contiguous, else a numpy reduction. A computed index (any other cone) is left to the kernel,
unless the extent it indexes is empty: then every index is out of range, and the kernel, which
reads index 0 in place of an out-of-range one, would itself read out of bounds; the host raises
first. When a range check finds a violation, the cone is evaluated to report the offending value."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith, func
from xdsl.ir import SSAValue

from fuser.lowering.addresses import numpy_address
from fuser.lowering.codegen.emit_cuda import index_ops
from fuser.lowering.errors import IndexRangeError
from fuser.lowering.execution.index_errors import valid_indices
from fuser_dialect.inputs import arg_label, is_torch_tensor, to_numpy
from fuser_dialect.interpreter import backward_slice, evaluate_values
from fuser_dialect.ops_compute import BinaryKind, BinaryOp, CastOp, WhereOp
from fuser_dialect.ops_layout import BroadcastInDimOp, BroadcastOp, ExpandOp, PermuteOp, ReshapeOp, SqueezeOp
from fuser_dialect.types import TensorType, numpy_dtype

_LAYOUT_OPS = (BroadcastOp, BroadcastInDimOp, SqueezeOp, ExpandOp, ReshapeOp, PermuteOp)
_max = np.maximum.reduce
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _integer_dtype(v: SSAValue) -> np.dtype | None:
    t = v.type
    if not isinstance(t, TensorType) or t.dtype not in ("i64", "i32"):
        return None
    return numpy_dtype(t.dtype)


def _peel(v: SSAValue) -> SSAValue:
    """Through ops that keep the set of values: layout ops and widening integer casts."""
    while True:
        owner = v.owner
        if isinstance(owner, _LAYOUT_OPS):
            v = owner.input
        elif isinstance(owner, CastOp) and (inner := _integer_dtype(owner.input)) is not None \
                and (outer := _integer_dtype(v)) is not None and outer.itemsize >= inner.itemsize:
            v = owner.input
        else:
            return v


def _int_constant(v: SSAValue) -> int | None:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp):
        value = getattr(owner.value, "value", None)
        data = getattr(value, "data", None)
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    return None


@dataclass(frozen=True)
class RangeSource:
    """The index's values are those of fusion input `arg`; with `ignore` set, elements equal
    to `ignore` read as `fill` instead (where(ne(y, ignore), y, fill))."""

    arg: int
    ignore: int | None = None
    fill: int | None = None


def _on_host(value) -> bool:
    """A numpy array or a CPU tensor: read on the host without a copy from a device (a CUDA
    tensor's index is checked in the kernel instead: no synchronisation per call)."""
    return not (is_torch_tensor(value) and value.is_cuda)


def range_source(fusion: func.FuncOp, index: SSAValue) -> RangeSource | None:
    """How the index can be range-checked from an input alone, or None (a cone check)."""
    args = list(fusion.body.block.args)
    v = _peel(index)
    if v in args:
        return RangeSource(args.index(v)) if _integer_dtype(v) is not None else None
    where = v.owner
    if not isinstance(where, WhereOp):
        return None
    y, fill, cond = _peel(where.lhs), _int_constant(where.rhs), where.cond.owner
    if y not in args or _integer_dtype(y) is None or fill is None:
        return None
    if not isinstance(cond, BinaryOp) or cond.op_kind != BinaryKind.NE:
        return None
    # The mask must be taken of the very value `where` selects from, element for element.
    sides = [(cond.lhs, _int_constant(cond.rhs)), (cond.rhs, _int_constant(cond.lhs))]
    ignore = next((c for s, c in sides if s is where.lhs and c is not None), None)
    return None if ignore is None else RangeSource(args.index(y), ignore, fill)


class IndexCheck:
    """The check of one index op (see the module doc); `site`: its position among the fusion's
    index ops, which its error carries (None: not known)."""

    def __init__(self, fusion: func.FuncOp, op, site: int | None = None):
        self.fusion = fusion
        self.op = op
        self.site = site
        self.axis = op.axis
        args = list(fusion.body.block.args)
        self.cone = backward_slice(fusion, [op.index])
        self.needed = frozenset(args.index(v) for v in {op.index, *(w for o in self.cone for w in o.operands)}
                                if v in args)
        self.range = range_source(fusion, op.index)
        self.unsigned = None
        if self.range is not None:
            itemsize = _integer_dtype(args[self.range.arg]).itemsize
            self.unsigned = _UNSIGNED[itemsize]
            self.itemsize = itemsize
            # Capping the extent at the type's positive range keeps every negative value (as
            # unsigned, at least 2**(bits-1)) out of range, however large the extent.
            self.extent_cap = 1 << (8 * itemsize - 1)
            self._native_args = threading.local()  # per thread: the packed arguments (see below)

    def source(self) -> str:
        """Names the input(s) an index comes from, and the ops in between (for the error)."""
        args = list(self.fusion.body.block.args)
        sources = [v for v in [self.op.index, *(w for o in self.cone for w in o.operands)] if v in args]
        names = ", ".join(dict.fromkeys(arg_label(self.fusion, args.index(v)) for v in sources)) or "a computed index"
        path = [o.name for o in self.cone if not o.name.startswith("arith.")]
        return names + (f" (through {', '.join(path)})" if path else "")

    def applies(self, inputs: Sequence[object], extents) -> bool:
        """Whether this call checks the index on the host: it is not empty, and it is a range
        check of an input on the host, or it indexes an empty extent (every index is out of range,
        and the kernel's stand-in index 0 would itself read or write out of bounds). Depends only
        on the inputs' signature."""
        index_numel = int(np.prod(extents.shape(self.op.index)))
        if index_numel == 0:
            return False
        if extents.shape(self.op.input)[self.axis] == 0:
            return True
        if self.range is None:
            return False  # a computed index: checked in the kernel (lowering/execution/index_errors.py)
        return _on_host(inputs[self.range.arg])

    def check(self, inputs: Sequence[object], extent: int) -> None:
        """Raises IndexRangeError (an IndexError) when an index is outside 0..extent-1."""
        if self.range is None or self._range_violated(inputs, extent):
            self._check_cone(inputs, extent)

    def _range_violated(self, inputs: Sequence[object], extent: int) -> bool:
        r = self.range
        values = inputs[r.arg]
        extent = min(extent, self.extent_cap)
        native = _native_range_check()
        if native is not None:
            found = contiguous_host_data(values)
            if found is not None:
                address, n = found
                if n == 0:
                    return False
                args = getattr(self._native_args, "packed", None)
                if args is None:
                    args = self._native_args.packed = (ctypes.c_int64 * 7)(
                        0, 0, self.itemsize, r.ignore is not None, r.ignore or 0, r.fill or 0, 0)
                args[0], args[1], args[6] = address, n, extent
                return native(args) != 0
        if type(values) is not np.ndarray:
            values = to_numpy(values)
        if values.size == 0:
            return False
        unsigned = values.view(self.unsigned)
        if r.ignore is None:
            return int(_max(unsigned, axis=None)) >= extent
        kept = values != r.ignore
        if int(_max(unsigned, axis=None, where=kept, initial=0)) >= extent:
            return True
        return not 0 <= r.fill < extent and not kept.all()

    def _check_cone(self, inputs: Sequence[object], extent: int) -> None:
        host = [to_numpy(x) if i in self.needed else None for i, x in enumerate(inputs)]
        (index,) = evaluate_values(self.fusion, host, [self.op.index])
        if not isinstance(index, np.ndarray) or index.size == 0:
            return
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= extent:
            bad = low if low < 0 else high
            raise IndexRangeError(f"{self.source()}: index {bad} is out of range for {self.op.name} along dim "
                                  f"{self.axis} of extent {extent} ({valid_indices(extent)})",
                                  op=self.op.name, site=self.site, dim=self.axis, index=bad, extent=extent)


def contiguous_host_data(values) -> tuple[int, int] | None:
    """(data address, element count) of a C-contiguous numpy array or torch CPU tensor, else None."""
    if type(values) is np.ndarray:
        return (numpy_address(values), values.size) if values.flags.c_contiguous else None
    if is_torch_tensor(values) and values.is_cpu and values.is_contiguous():
        return values.data_ptr(), values.numel()
    return None


_native_check = None


def _native_range_check():
    """The host runtime's fuser_rt_index_out_of_range once the cpu backend has loaded a runtime
    (None before, and on other backends: the numpy reduction serves them)."""
    global _native_check
    if _native_check is None:
        from fuser.lowering.backends.prebuilt import loaded_runtime

        lib = loaded_runtime()
        if lib is None:
            return None
        address = ctypes.cast(lib.fuser_rt_index_out_of_range, ctypes.c_void_p).value
        _native_check = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int64 * 7))(address)
    return _native_check


class IndexChecks:
    """Every index check of a fusion, analysed once."""

    def __init__(self, fusion: func.FuncOp):
        self.checks = tuple(IndexCheck(fusion, op, site) for site, op in enumerate(index_ops(fusion)))

    def __bool__(self) -> bool:
        return bool(self.checks)

    def bind(self, inputs: Sequence[object], extents) -> tuple[tuple[IndexCheck, int], ...]:
        """The checks a call with these inputs' signature runs, each with the extent it checks
        against (what a launch plan keeps)."""
        return tuple((c, int(extents.shape(c.op.input)[c.axis])) for c in self.checks if c.applies(inputs, extents))

    def run(self, inputs: Sequence[object], extents) -> None:
        """Checks every index of one call (the full path)."""
        for check, extent in self.bind(inputs, extents):
            check.check(inputs, extent)


def check_index_ranges(fusion: func.FuncOp, checked: Sequence[object], extents) -> None:
    """Raises IndexError naming the index and the extent when an index is out of range (analyses
    the fusion on every call: executors keep an `IndexChecks` instead)."""
    IndexChecks(fusion).run(checked, extents)
