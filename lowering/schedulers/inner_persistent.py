"""The inner_persistent scheduler: normalizations (softmax, layer-norm, cross-entropy
backward), where a reduction result flows back onto the full rows it was computed from.
With the row in registers (lowering/schedulers/rows/) the input is read once however many
phases the normalization has."""

from __future__ import annotations

from fuser.lowering.schedulers.rows import RowScheduler


class InnerPersistentScheduler(RowScheduler):
    name = "inner_persistent"
    normalization = True
    refusal = "no reduction result flows back onto full rows (reduction)"
