"""The `fuser` dialect: every op and attribute, registered once."""

from xdsl.ir import Dialect

from fuser_dialect.ops_compute import (
    BinaryKindAttr, BinaryOp, CastOp, ReductionKindAttr, ReductionOp, UnaryKindAttr, UnaryOp, WhereOp,
)
from fuser_dialect.ops_factory import DimOp, FullOp, IotaOp
from fuser_dialect.ops_gather import GatherOp, IndexSelectOp, TakeAlongAxisOp
from fuser_dialect.ops_layout import (
    BroadcastInDimOp, BroadcastOp, ExpandOp, PermuteOp, ReshapeOp, SqueezeOp,
)
from fuser_dialect.ops_resize import CatOp, PadOp, SliceOp
from fuser_dialect.types import IntTupleAttr, TensorType

Fuser = Dialect(
    "fuser",
    [
        BroadcastOp, BroadcastInDimOp, SqueezeOp, ExpandOp, ReshapeOp, PermuteOp,
        PadOp, SliceOp, CatOp,
        GatherOp, TakeAlongAxisOp, IndexSelectOp,
        UnaryOp, BinaryOp, WhereOp, CastOp, ReductionOp,
        IotaOp, FullOp, DimOp,
    ],
    [TensorType, IntTupleAttr, UnaryKindAttr, BinaryKindAttr, ReductionKindAttr],
)
