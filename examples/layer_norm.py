"""Layer-norm forward over the last dim with affine weight and bias (f32): one kernel,
x read once (mean and variance phases reuse the row kept in registers)."""

import numpy as np

from _common import run_and_report
from fuser import DataType, FusionDefinition


def layer_norm_fusion(eps: float = 1e-5) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        n = x.size(1)
        mean = fd.ops.div(fd.ops.sum(x, dims=[1], keepdim=True), n)
        d = fd.ops.sub(x, mean)
        var = fd.ops.div(fd.ops.sum(fd.ops.mul(d, d), dims=[1], keepdim=True), n)
        inv = fd.ops.rsqrt(fd.ops.add(var, eps))
        wb = fd.ops.broadcast(w, [True, False])
        bb = fd.ops.broadcast(b, [True, False])
        fd.add_output(fd.ops.add(fd.ops.mul(fd.ops.mul(d, inv), wb), bb))
    return fd


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    rows, cols = 256, 4096
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.standard_normal(cols, dtype=np.float32)
    b = rng.standard_normal(cols, dtype=np.float32)
    mean = x.mean(1, keepdims=True, dtype=np.float64)
    var = ((x - mean) ** 2).mean(1, keepdims=True)
    ref = (x - mean) / np.sqrt(var + 1e-5) * w + b
    run_and_report("layer_norm [256, 4096] f32", layer_norm_fusion(), [x, w, b], [ref], rtol=1e-4, atol=1e-4)
