"""The "reference" backend: the numpy interpreter of fuser_dialect; no kernels, no compiler."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import func

from fuser_dialect.fusion import output_order
from fuser_dialect.inputs import apply_layout
from fuser_dialect.interpreter import interpret
from fuser.lowering.backends.base import Backend


class ReferenceBackend(Backend):
    name = "reference"
    compiles = False

    def available(self) -> tuple[bool, str]:
        return True, ""

    def run(self, fusion: func.FuncOp, inputs: Sequence[object]) -> list:
        """The fusion's outputs, each in its required (or hinted) layout."""
        outs = interpret(fusion, inputs)
        # apply_layout copies: an output never aliases an input array (a fusion may return one).
        return [apply_layout(o, output_order(fusion, i)[0]) if np.ndim(o) else o for i, o in enumerate(outs)]
