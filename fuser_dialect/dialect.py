"""The `fuser` dialect: every op and attribute, registered once.

Each family module lists its ops in `OPS` (and registers their pieces in the op table), so
adding an op to a family touches that module only."""

from xdsl.ir import Dialect

import fuser_dialect.ops_arith  # noqa: F401  (registers the semantics of the arith ops fusions use)
from fuser_dialect import (
    ops_compute, ops_factory, ops_gather, ops_layout, ops_matmul, ops_random, ops_resize, ops_scan, ops_scatter,
    ops_select, ops_set, ops_welford,
)
from fuser_dialect.ops_compute import BinaryKindAttr, ReductionKindAttr, UnaryKindAttr
from fuser_dialect.types import IntTupleAttr, TensorType

Fuser = Dialect(
    "fuser",
    [*ops_layout.OPS, *ops_resize.OPS, *ops_gather.OPS, *ops_scatter.OPS, *ops_compute.OPS, *ops_factory.OPS, *ops_welford.OPS,
     *ops_scan.OPS, *ops_select.OPS, *ops_matmul.OPS, *ops_random.OPS, *ops_set.OPS],
    [TensorType, IntTupleAttr, UnaryKindAttr, BinaryKindAttr, ReductionKindAttr, *ops_welford.ATTRIBUTES],
)
