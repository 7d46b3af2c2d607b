"""Segmentation: group the tensor ops of a fusion into as few kernels as possible.

First the whole fusion is tried as one kernel. Otherwise ops are added in program order
to the current segment while some scheduler accepts it, and a new segment starts where
none does; the reason is kept (printed by the `segment` pass, tested with FileCheck).

Whether a group of ops can be one kernel is the scheduler units' question
(lowering/schedulers/: pointwise, reduction, inner_persistent, tried in order); this module
only decides which groups to ask about and what each kernel reads and writes.

A fusion with matmul/linear ops is cut into stages at them (lowering/segmentation/host_segments.py): each
runs as a host segment of its own, and each stage's other ops are segmented as above.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from fuser_dialect import ops_compute as C
from fuser_dialect.ops_set import SegmentSetOp
from fuser_dialect.types import TensorType
from fuser_dialect.union_find import UnionFind
from fuser.lowering.segmentation.host_segments import host_plan, is_host_op, staged_segments
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.segmentation.segment_sets import segment_set_segments
from fuser.lowering.schedulers import Candidate, Verdict, classify, scheduler_named
from fuser.lowering.schedulers.symbolic import SymbolicExtents

_MAX_RECOMPUTE = 8
"""At most this many pointwise ops are recomputed in a consumer instead of stored and reloaded."""


def is_tensor_op(op: Operation) -> bool:
    return bool(op.results) and isinstance(op.results[0].type, TensorType)


class Segmenter:
    def __init__(self, fusion: func.FuncOp):
        self.fusion = fusion
        self.sym = SymbolicExtents(fusion)
        self.ops = [op for op in fusion.body.block.ops if is_tensor_op(op)]
        ret = fusion.body.block.last_op
        assert isinstance(ret, func.ReturnOp)
        self.returned = set(ret.arguments)
        self._verdicts: dict[tuple, Verdict] = {}

    # -- outputs ------------------------------------------------------------------
    def outputs(self, seg: Sequence[Operation], pessimistic: bool) -> list[SSAValue]:
        """Values of `seg` that must be written: returned ones and (pessimistic) any used outside."""
        members = set(seg)
        outs = []
        for op in seg:
            v = op.results[0]
            used_outside = any(u.operation not in members for u in v.uses if is_tensor_op(u.operation))
            if v in self.returned or (pessimistic and used_outside):
                outs.append(v)
        return outs

    def classify(self, seg: Sequence[Operation], outputs: Sequence[SSAValue], remember: bool = False) -> Verdict:
        """remember: keep the verdict for a later question about the same ops and outputs (_finish
        asks again about each kernel found; on a big fusion a whole-fusion verdict costs a pass
        over it). The greedy search's trials are not kept: they would hold O(n^2) ops."""
        key = (tuple(seg), tuple(outputs))
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = classify(Candidate(seg, outputs, self.sym))
            if remember:
                self._verdicts[key] = verdict
        return verdict

    # -- the algorithm --------------------------------------------------------------
    def plan(self) -> list[KernelPlan]:
        if not self.ops:
            return []
        if any(is_host_op(op) for op in self.ops):
            return self._finish(staged_segments(self))
        return self._finish(segment_set_segments(self))  # one stage unless a segment_set ends a kernel

    def kernel_segments(self, ops: list[Operation]) -> list[tuple[list[Operation], Verdict, str]]:
        """Kernels for `ops` (all of the fusion's, or one stage's between host segments)."""
        whole = self.classify(ops, self.outputs(ops, pessimistic=True), remember=True)
        if whole.ok:
            return [(ops, whole, "")]
        segments: list[tuple[list[Operation], Verdict, str]] = []
        for k, component in enumerate(self._components(ops)):
            # Why this group is not in the previous kernel: the whole fusion was refused.
            reason = f"split before {component[0].name}: {whole.reason}" if k else ""
            verdict = self.classify(component, self.outputs(component, pessimistic=True), remember=True)
            if verdict.ok:
                if not self._join_earlier(segments, component):
                    segments.append((component, verdict, reason))
            else:
                segments += self._greedy(component, reason)
        return segments

    def _join_earlier(self, segments: list[tuple[list[Operation], Verdict, str]], component: list[Operation]) -> bool:
        """Puts a component one kernel runs (it reads fusion inputs only: any kernel may take it)
        into the latest earlier kernel that accepts it with its own ops: a launch fewer (a
        per-token value of the inputs written by the row kernel beside it, once a row)."""
        return self._append_to_earlier(segments, component, 0)

    def _components(self, ops: list[Operation]) -> list[list[Operation]]:
        """Groups of ops tied by dataflow or by reading the same fusion input, in program order.
        Unrelated ops (an output computed from other inputs) then never split a group that one
        kernel could run, e.g. two row reductions of x around a `y + 1`."""
        tied: UnionFind[object] = UnionFind()
        for op in ops:
            for v in op.operands:
                if isinstance(v.type, TensorType):
                    tied.union(v.owner if isinstance(v.owner, Operation) else v, op)
        groups: dict[object, list[Operation]] = {}
        for op in ops:
            groups.setdefault(tied.find(op), []).append(op)
        return list(groups.values())

    def _greedy(self, ops: list[Operation], reason: str) -> list[tuple[list[Operation], Verdict, str]]:
        segments: list[tuple[list[Operation], Verdict, str]] = []
        current: list[Operation] = []
        for op in ops:
            trial = current + [op]
            verdict = self.classify(trial, self.outputs(trial, pessimistic=False))
            if verdict.ok or not current:
                current = trial
                continue
            if self._place_earlier(segments, current, op):
                continue
            segments += self._close(current, reason)
            reason = f"split before {op.name}: {verdict.reason}"
            current = [op]
        segments += self._close(current, reason)
        return segments

    def _place_earlier(self, segments: list[tuple[list[Operation], Verdict, str]], current: list[Operation],
                       op: Operation) -> bool:
        """Puts `op`, which the current segment refuses, into an earlier kernel that accepts it:
        one at or after the last that computes an operand of it, when none of its operands comes
        from the current segment (data then still flows from earlier kernels to later ones). A
        per-row value computed after a whole-tensor reduction (a layer norm's rstd / 768 after
        the loss) is then written by the row kernel once a row, not by a kernel of its own."""
        producers = {o.owner for o in op.operands if isinstance(o.type, TensorType) and isinstance(o.owner, Operation)}
        if producers & set(current):
            return False
        first = max((k for k, (seg, _, _) in enumerate(segments) if producers & set(seg)), default=None)
        return first is not None and self._append_to_earlier(segments, [op], first)

    def _append_to_earlier(self, segments: list[tuple[list[Operation], Verdict, str]], ops: list[Operation],
                           first: int) -> bool:
        """Appends `ops` to the latest kernel from `segments[first]` on that accepts them with
        its final outputs (not a host segment); False when none does."""
        for k in range(len(segments) - 1, first - 1, -1):
            seg, _, reason = segments[k]
            if is_host_op(seg[0]):
                continue
            trial = seg + ops
            verdict = self.classify(trial, self.outputs(trial, pessimistic=True))
            if verdict.ok:
                segments[k] = (trial, verdict, reason)
                return True
        return False

    def _close(self, seg: list[Operation], reason: str) -> list[tuple[list[Operation], Verdict, str]]:
        """Final outputs of `seg` are known once later ops are placed; re-split if they do not fit."""
        verdict = self.classify(seg, self.outputs(seg, pessimistic=True))
        if verdict.ok:
            return [(seg, verdict, reason)]
        result = []
        current: list[Operation] = []
        for op in seg:
            trial = current + [op]
            v = self.classify(trial, self.outputs(trial, pessimistic=True))
            if v.ok or not current:
                current = trial
                continue
            result.append((current, self.classify(current, self.outputs(current, True)), reason))
            reason = f"split before {op.name}: {v.reason}"
            current = [op]
        result.append((current, self.classify(current, self.outputs(current, True)), reason))
        return result

    def _input_only_cone(self, op: Operation) -> list[Operation] | None:
        """The tensor ops `op` needs, if they are a few pointwise ops on fusion inputs alone."""
        cone: dict[Operation, None] = {}  # ordered set
        stack = [op]
        while stack:
            o = stack.pop()
            if o in cone:
                continue
            if isinstance(o, (C.ReductionOp, SegmentSetOp)) or is_host_op(o) or len(cone) >= _MAX_RECOMPUTE:
                return None
            cone[o] = None
            stack += [v.owner for v in o.operands if isinstance(v.owner, Operation) and is_tensor_op(v.owner)]
        return list(cone)

    def _recompute_cheap_inputs(self, segs: list[list[Operation]]) -> None:
        """A kernel recomputes the cheap input-only values it consumes (a label mask) instead of
        reading them from memory another kernel wrote."""
        position = {op: k for k, op in enumerate(self.ops)}
        for i, seg in enumerate(segs):
            if is_host_op(seg[0]):
                continue  # a host segment is one library call: nothing fuses into it
            members = set(seg)
            extra: list[Operation] = []
            for op in seg:
                for v in op.operands:
                    p = v.owner
                    if isinstance(p, Operation) and is_tensor_op(p) and p not in members and p not in extra:
                        extra += [o for o in self._input_only_cone(p) or [] if o not in members and o not in extra]
            if not extra:
                continue
            trial = sorted(seg + extra, key=position.__getitem__)
            if self.classify(trial, self.outputs(trial, pessimistic=True)).ok:
                segs[i] = trial

    def _final_outputs(self, segs: list[list[Operation]], i: int, placed: dict[Operation, set[int]]) -> list[SSAValue]:
        """Values a kernel writes: the returned values of the ops it owns (first placed there),
        and those read by a kernel that does not compute them itself. `placed`: the kernels
        each op is in (an op recomputed by a consumer is in several)."""
        outputs = []
        for op in segs[i]:
            if self.owner[op] != i:
                continue
            v = op.results[0]
            consumers = {j for u in v.uses for j in placed.get(u.operation, ()) if j != i}
            if v in self.returned or any(j not in placed[op] for j in consumers):
                outputs.append(v)
        return outputs

    def _finish(self, segments) -> list[KernelPlan]:
        segs = [list(seg) for seg, _, _ in segments]
        self.owner = {op: i for i, seg in enumerate(segs) for op in seg}
        self._recompute_cheap_inputs(segs)
        placed: dict[Operation, set[int]] = {}
        for k, seg in enumerate(segs):
            for op in seg:
                placed.setdefault(op, set()).add(k)
        plans: list[KernelPlan] = []
        for k, ((_, _, reason), seg) in enumerate(zip(segments, segs)):
            members = set(seg)
            outputs = self._final_outputs(segs, k, placed)
            if not outputs:
                # Nothing of it is needed from memory: its consumers recompute the cheap ops it
                # holds (_recompute_cheap_inputs), or it is dead. A kernel writing nothing is
                # never planned (it would launch with an empty grid).
                continue
            if is_host_op(seg[0]):
                plans.append(host_plan(len(plans), seg, outputs, reason))
                continue
            verdict = self.classify(seg, outputs)
            assert verdict.ok, verdict.reason
            inputs: list[SSAValue] = []
            for op in seg:
                for v in op.operands:
                    if isinstance(v.type, TensorType) and (v.owner not in members) and v not in inputs:
                        inputs.append(v)
            groups: dict[tuple, list[SSAValue]] = {}
            for v in outputs:
                groups.setdefault(self.sym.shape(v), []).append(v)
            plans.append(KernelPlan(
                index=len(plans), ops=seg, inputs=inputs, outputs=outputs, groups=list(groups.values()),
                unit=scheduler_named(verdict.scheduler), split_reason=reason, domain=verdict.domain,
                reduced_dims=verdict.reduced_dims, forms=verdict.forms,
            ))
        return plans


def plan_kernels(fusion: func.FuncOp) -> list[KernelPlan]:
    return Segmenter(fusion).plan()
