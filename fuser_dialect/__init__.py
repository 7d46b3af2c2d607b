"""The fuser dialect: tensor type, ops, verifiers, the Python builder and the reference interpreter."""

from fuser_dialect.builder import FusionDefinition, Scalar, Tensor
from fuser_dialect.dialect import Fuser
from fuser_dialect.fusion import make_context
from fuser_dialect.types import DataType, TensorType

import fuser_dialect.builder_ops  # noqa: F401  (binds fd.ops)

__all__ = ["FusionDefinition", "DataType", "Tensor", "Scalar", "Fuser", "TensorType", "make_context"]
