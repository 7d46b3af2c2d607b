"""A bf16 pointwise chain with a broadcast bias: cast up, scale, bias, gelu-like tanh, cast down."""

import ml_dtypes
import numpy as np

from _common import run_and_report
from fuser import DataType, FusionDefinition


def chain_fusion() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        bias = fd.define_tensor(shape=[1, -1], dtype=DataType.BFloat16)
        xf = fd.ops.cast(x, DataType.Float)
        bf = fd.ops.cast(bias, DataType.Float)
        y = fd.ops.add(fd.ops.mul(xf, 0.5), bf)
        y = fd.ops.mul(y, fd.ops.add(fd.ops.tanh(y), 1.0))
        fd.add_output(fd.ops.cast(y, DataType.BFloat16))
    return fd


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 1000)).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal((1, 1000)).astype(ml_dtypes.bfloat16)
    y = x.astype(np.float32) * np.float32(0.5) + bias.astype(np.float32)
    ref = (y * (np.tanh(y) + np.float32(1))).astype(ml_dtypes.bfloat16).astype(np.float64)
    run_and_report("pointwise chain [512, 1000] bf16", chain_fusion(), [x, bias], [ref], rtol=1e-2, atol=1e-2)
