"""The reduction scheduler: row kernels whose reduction results are only written out or
combined with other row values (sums, means, a cross-entropy's per-row loss) — no result
flows back onto the full rows. Schedule, grid and emission: lowering/schedulers/rows/."""

from __future__ import annotations

from fuser.lowering.schedulers.rows import RowScheduler


class ReductionScheduler(RowScheduler):
    name = "reduction"
    normalization = False
    refusal = "a reduction result flows back onto full rows (inner_persistent)"
