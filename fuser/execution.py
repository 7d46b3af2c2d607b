"""Running a fusion: `FusionDefinition` (the dialect's builder plus `execute`), backend
choice and numpy/torch interop.

This is the only place where the public API meets the lowering: `fuser_dialect` builds and
verifies IR and imports nothing above it; backends live in `fuser.lowering.backends`."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

import numpy as np

from fuser_dialect.builder import FusionDefinition as _FusionBuilder
from fuser_dialect.inputs import is_torch_tensor
from fuser_dialect.types import numpy_dtype


class FusionDefinition(_FusionBuilder):
    """Defines one fusion (as `fuser_dialect.FusionDefinition`) and executes it.

        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
            fd.add_output(fd.ops.exp(x))
        out, = fd.execute([np.ones((2, 3), np.float32)])
    """

    def __init__(self, name: str = "fusion"):
        super().__init__(name)
        self._executor = None
        self._executor_lock = threading.Lock()

    def execute(self, inputs: Sequence[object], backend: str | None = None, _disable_options: Sequence[str] = ()):
        """Runs the fusion and returns its outputs as a list.

        backend: "reference" runs the numpy interpreter; "cpu" runs the generated CUDA C
        on the host; "cuda" runs it on the GPU through pycuda; None picks "cuda" when a
        GPU and pycuda are usable, else "cpu" (and "reference" when the lowering cannot
        run here at all: no C++ compiler). Inputs are numpy arrays (bf16 via ml_dtypes),
        Python/numpy scalars and torch tensors; outputs are torch tensors when an input was.
        _disable_options: e.g. ["concretize_resize_extents"] (also env FUSER_DISABLE).
        """
        chosen = _get_backend()(backend)
        disable = _disable_options if type(_disable_options) is tuple else tuple(_disable_options)
        outputs = self._get_executor().execute(inputs, chosen, disable)
        return like_inputs(outputs, inputs) if chosen.returns_numpy else outputs

    def cache_info(self):
        """hits, misses (compilations) and the key of each compiled entry."""
        return self._get_executor().cache_info()

    def last_kernels(self):
        """One record per kernel launched by this thread's last `execute` (each thread sees
        its own last call; the cache and its counters are shared)."""
        return self._get_executor().last_kernels()

    def last_compile_info(self) -> dict[str, float]:
        """Where compile time went for this thread's last execution: passes_s, segment_s,
        emission_s, compile_s (seconds; empty for the reference backend)."""
        return self._get_executor().last_compile_info()

    def last_cuda_code(self) -> str:
        """The CUDA source of the last execution (empty for the reference backend)."""
        return "\n".join(k.source for k in self.last_kernels())

    def _get_executor(self):
        executor = self._executor
        if executor is None:
            with self._executor_lock:  # one executor (one cache) however many threads call at once
                if self._executor is None:
                    from fuser.lowering.executor import FusionExecutor

                    self._executor = FusionExecutor(self.module)
                executor = self._executor
        return executor


_get_backend_function = None


def _get_backend():
    """fuser.lowering.backends.get_backend, imported on first use (not per call)."""
    global _get_backend_function
    if _get_backend_function is None:
        from fuser.lowering.backends import get_backend

        _get_backend_function = get_backend
    return _get_backend_function


def like_inputs(outputs, inputs):
    """Host outputs as torch tensors when an input was a torch tensor (numpy otherwise). The
    outputs are fresh arrays no one else holds (an input returned as is was already copied), so
    the tensors share their memory: no copy."""
    for x in inputs:
        if type(x) is not np.ndarray and is_torch_tensor(x):
            break
    else:
        return outputs
    torch = sys.modules["torch"]  # an input is a torch tensor: torch is imported
    result = []
    for o in outputs:
        if type(o) is not np.ndarray:
            result.append(torch.from_numpy(np.array(o)) if isinstance(o, np.ndarray) else o)
        elif o.dtype == _BF16:
            result.append(torch.from_numpy(o.view(np.int16)).view(torch.bfloat16))
        else:
            result.append(torch.from_numpy(o))
    return result


_BF16 = numpy_dtype("bf16")
