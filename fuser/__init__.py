"""fuser: a fusion compiler for NVIDIA GPUs on xDSL (the public, nvFuser-compatible API).

    from fuser import FusionDefinition, DataType

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))
    (y,) = fd.execute([x_array])

`fuser.passes`, `fuser.lowering` and `fuser.tools` are the compiler; `fuser_dialect` holds
the IR (types, ops, verifiers, the reference interpreter)."""

from fuser.execution import FusionDefinition
from fuser.tensor_descriptor import compute_contiguity, compute_tensor_descriptor
from fuser_dialect.values import Scalar, Tensor, Vector
from fuser_dialect.types import DataType

__version__ = "0.1.0"

__all__ = ["FusionDefinition", "DataType", "Tensor", "Scalar", "Vector", "explain", "version", "compute_contiguity",
           "compute_tensor_descriptor", "__version__"]


class Version(str):
    """A version string that compares as numbers, part by part ('0.10.0' > '0.9.1'), with
    other Versions and with plain strings: nvFuser's `version()` result."""

    @staticmethod
    def _parts(text: str) -> tuple[int, ...]:
        release = str(text).split("+")[0]
        return tuple(int(p) if p.isdigit() else 0 for p in release.split("."))

    def _cmp(self, other) -> int:
        a, b = self._parts(self), self._parts(other)
        width = max(len(a), len(b))
        a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
        return (a > b) - (a < b)

    def __eq__(self, other): return isinstance(other, str) and self._cmp(other) == 0
    def __ne__(self, other): return not self == other
    def __lt__(self, other): return self._cmp(other) < 0
    def __le__(self, other): return self._cmp(other) <= 0
    def __gt__(self, other): return self._cmp(other) > 0
    def __ge__(self, other): return self._cmp(other) >= 0
    __hash__ = str.__hash__


def version() -> Version:
    """fuser's version, as nvFuser's `nvfuser.version()`: a string that compares as a version."""
    return Version(__version__)


def __getattr__(name: str):
    # `fuser.explain` lives with the torch backend; it is imported on first use so that
    # importing fuser never imports torch.
    if name == "explain":
        from fuser.torch_backend.explain import explain

        return explain
    raise AttributeError(f"module 'fuser' has no attribute {name!r}")
