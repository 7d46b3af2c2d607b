"""The `fuser` dialect: every op and attribute, registered once.

Each family module lists its ops in `OPS` (and registers their pieces in the op table), so
adding an op to a family touches that module only."""

from xdsl.ir import Dialect

import fuser_dialect.ops_arith  # noqa: F401  (registers the semantics of the arith ops fusions use)
from fuser_dialect import ops_compute, ops_factory, ops_gather, ops_layout, ops_resize
from fuser_dialect.ops_compute import BinaryKindAttr, ReductionKindAttr, UnaryKindAttr
from fuser_dialect.types import IntTupleAttr, TensorType
from fuser_dialect import ops_welford
from fuser_dialect import ops_scan, ops_select
from fuser_dialect import ops_matmul
from fuser_dialect import ops_random
from fuser_dialect import ops_set

Fuser = Dialect(
    "fuser",
    [*ops_layout.OPS, *ops_resize.OPS, *ops_gather.OPS, *ops_compute.OPS, *ops_factory.OPS, *ops_welford.OPS,
     *ops_scan.OPS, *ops_select.OPS, *ops_matmul.OPS, *ops_random.OPS, *ops_set.OPS],
    [TensorType, IntTupleAttr, UnaryKindAttr, BinaryKindAttr, ReductionKindAttr, *ops_welford.ATTRIBUTES],
)
