"""`fd.ops.batch_norm`: nvFuser's batch norm, built from welford and elementwise ops.

Statistics are per channel (dim 1, or the last dim with channels_last) over every other dim. In
training they are the batch's: mean and invstd = 1/sqrt(biased variance + eps), one Welford pass;
running_mean / running_var, when given, receive (1 - momentum) * running + momentum * batch
statistic (the unbiased variance) in place, as outputs aliased to those inputs (nvFuser aliases
them the same way; `execute` does not return them). In inference the running statistics
normalize: mean is running_mean and invstd 1/sqrt(running_var + eps), as nvFuser returns them.
f16/bf16 inputs compute in f32 (mean and invstd stay f32) and the output rounds once."""

from __future__ import annotations

from xdsl.dialects import arith

from fuser_dialect.values import Scalar, Tensor
from fuser_dialect.types import DataType

_HALF_DTYPES = ("f16", "bf16")


class NormOps:
    """Mixed into `Ops` (fuser_dialect/builder_ops.py), whose primitive ops these call."""

    def batch_norm(self, input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                   running_var: Tensor | None, momentum: object, eps: object, training: bool,
                   channels_last: bool = False) -> tuple[Tensor, Tensor, Tensor]:
        """(output, mean, invstd) of torch.nn.functional.batch_norm (see the module doc)."""
        x = self._tensor(input, "batch_norm: input")
        self._floats("batch_norm", input=x, weight=weight, bias=bias, running_mean=running_mean,
                     running_var=running_var)
        if x.ndim < 2:
            raise ValueError(f"batch_norm: input needs a channel dim (rank >= 2), got the {x.ndim}-d "
                             f"{x.type.describe()}")
        if not isinstance(training, bool):
            raise TypeError(f"batch_norm: training must be a Python bool (it decides the fusion), got {training!r}")
        channel = x.ndim - 1 if channels_last else 1
        axes = [d for d in range(x.ndim) if d != channel]
        if (running_mean is None) != (running_var is None):
            raise ValueError("batch_norm: give both running_mean and running_var, or neither")

        def per_channel(stat: object) -> object:
            if not isinstance(stat, Tensor):
                return stat
            if stat.ndim != 1:
                raise ValueError(f"batch_norm: per-channel tensors are 1-d [C], got {stat.type.describe()}")
            return self.broadcast(stat, [d != channel for d in range(x.ndim)])

        xf = self.cast(x, DataType.Float) if x.type.dtype in _HALF_DTYPES else x
        if training:
            mean, var_sum, _ = self.welford(x, axes)
            count = self._reduced_count(x, axes)
            invstd = self.rsqrt(self.add(self.div(var_sum, count), eps))
            if running_mean is not None:
                self._update_running_stats(mean, var_sum, count, running_mean, running_var, momentum)
        else:
            if running_mean is None:
                raise ValueError("batch_norm: inference (training=False) normalizes with running_mean and "
                                 "running_var: give both")
            mean = self._tensor(running_mean, "batch_norm: running_mean")
            invstd = self.rsqrt(self.add(self._tensor(running_var, "batch_norm: running_var"), eps))
        y = self.mul(self.sub(xf, per_channel(mean)), per_channel(invstd))
        if weight is not None:
            y = self.mul(y, per_channel(self._tensor(weight, "batch_norm: weight")))
        if bias is not None:
            y = self.add(y, per_channel(self._tensor(bias, "batch_norm: bias")))
        return self.cast(y, DataType(x.type.dtype)), mean, invstd

    def _update_running_stats(self, mean: Tensor, var_sum: Tensor, count: int | Scalar, running_mean: Tensor,
                              running_var: Tensor, momentum: object) -> None:
        """running = (1 - momentum) * running + momentum * batch statistic, written in place."""
        decrement = count - 1 if isinstance(count, int) else self._i64(arith.SubiOp, count, 1)
        unbiased = self.div(var_sum, decrement)
        keep = 1 - momentum if isinstance(momentum, (int, float)) else self.sub(1.0, momentum)
        for stat, running, name in ((mean, running_mean, "running_mean"), (unbiased, running_var, "running_var")):
            running = self._tensor(running, f"batch_norm: {name}")
            updated = self.add(self.mul(running, keep), self.mul(stat, momentum))
            self.fd.add_output(self.cast(updated, DataType(running.type.dtype)), alias_input=running)
