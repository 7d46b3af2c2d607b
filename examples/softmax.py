"""Softmax over the last dim: one inner-persistent kernel that reads each row once."""

import numpy as np

from _common import run_and_report
from fuser import DataType, FusionDefinition


def softmax_fusion() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        m = fd.ops.max(x, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(x, m))
        s = fd.ops.sum(e, dims=[1], keepdim=True)
        fd.add_output(fd.ops.div(e, s))
    return fd


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 4096), dtype=np.float32)
    fd = softmax_fusion()
    print(fd)
    e = np.exp(x - x.max(1, keepdims=True))
    run_and_report("softmax [256, 4096] f32", fd, [x], [e / e.sum(1, keepdims=True)])
