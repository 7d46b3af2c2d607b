"""`fuser.segment_set` boundaries: the stages the segmenter groups separately.

An op's stage is the largest stage among the tensor ops it reads, plus one past a
segment_set: whatever reads a segment_set's result runs in a later kernel than the
segment_set itself, and ops unrelated to it stay in the first stage (they never split a
kernel they could share)."""

from __future__ import annotations

from xdsl.ir import Operation

from fuser_dialect.ops_set import SegmentSetOp

SPLIT_REASON = "split after fuser.segment_set (a segmentation hint)"


def segment_set_stages(ops: list[Operation]) -> list[list[Operation]]:
    """`ops` (in program order) split into stages, each in program order; one stage when the
    fusion has no segment_set."""
    if not any(isinstance(op, SegmentSetOp) for op in ops):
        return [ops]
    members = set(ops)
    stage: dict[Operation, int] = {}
    for op in ops:
        producers = [v.owner for v in op.operands if v.owner in members]
        stage[op] = max((stage[p] + isinstance(p, SegmentSetOp) for p in producers), default=0)
    stages: list[list[Operation]] = [[] for _ in range(max(stage.values()) + 1)]
    for op in ops:
        stages[stage[op]].append(op)
    return [s for s in stages if s]


def segment_set_segments(segmenter) -> list:
    """The segments of the fusion of `segmenter` (a lowering.segmentation.segment.Segmenter): each stage's
    ops grouped by its `kernel_segments`; a stage's first kernel says why it split."""
    segments = []
    for k, stage in enumerate(segment_set_stages(segmenter.ops)):
        found = segmenter.kernel_segments(stage)
        if k and found:
            ops, verdict, reason = found[0]
            found[0] = (ops, verdict, reason or SPLIT_REASON)
        segments += found
    return segments
