"""fuser: a fusion compiler for NVIDIA GPUs on xDSL (the public, nvFuser-compatible API).

    from fuser import FusionDefinition, DataType

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))
    (y,) = fd.execute([x_array])

`fuser.passes`, `fuser.lowering` and `fuser.tools` are the compiler; `fuser_dialect` holds
the IR (types, ops, verifiers, the reference interpreter)."""

import fuser_dialect.builder_ops  # noqa: F401  (binds fd.ops)
from fuser.execution import FusionDefinition
from fuser_dialect.builder import Scalar, Tensor
from fuser_dialect.types import DataType

__version__ = "0.1.0"

__all__ = ["FusionDefinition", "DataType", "Tensor", "Scalar", "explain", "__version__"]


def __getattr__(name: str):
    # `fuser.explain` lives with the torch backend; it is imported on first use so that
    # importing fuser never imports torch.
    if name == "explain":
        from fuser.torch_backend.explain import explain

        return explain
    raise AttributeError(f"module 'fuser' has no attribute {name!r}")
