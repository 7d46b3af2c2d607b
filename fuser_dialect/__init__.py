"""The fuser dialect: tensor type, ops, verifiers, the Python builder (`FusionBuilder`:
IR only; `fuser.FusionDefinition` is the one that executes) and the reference interpreter."""

from fuser_dialect.builder import FusionBuilder
from fuser_dialect.dialect import Fuser
from fuser_dialect.fusion import make_context
from fuser_dialect.types import DataType, TensorType
from fuser_dialect.values import Scalar, Tensor, Vector

__all__ = ["FusionBuilder", "DataType", "Tensor", "Scalar", "Vector", "Fuser", "TensorType", "make_context"]
