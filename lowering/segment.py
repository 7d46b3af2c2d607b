"""Segmentation: group the tensor ops of a fusion into as few kernels as possible.

First the whole fusion is tried as one kernel. Otherwise ops are added in program order
to the current segment while some scheduler accepts it, and a new segment starts where
none does; the reason is kept (printed by the `segment` pass, tested with FileCheck).

Schedulers:
- pointwise: no reduction. Outputs of different iteration domains form *groups* of one
  kernel (horizontal fusion: blockIdx.z picks the group), so q and k of a rotary embedding,
  whose extents are unrelated symbols, still share one launch.
- reduction / inner_persistent: every reduction reduces the same dims R of tensors of one
  domain D. Values that depend on a reduction result must stay *row-consistent*: each is
  `full` (shaped like D), `keep` (D with R broadcast) or `drop` (D without R), so that a
  block owning one row of D can compute all of them. `inner_persistent` is the case where
  a reduction result flows back onto full rows (softmax, layer-norm).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from fuser_dialect import ops_compute as C
from fuser_dialect import ops_gather as G
from fuser_dialect import ops_layout as L
from fuser_dialect.types import TensorType
from fuser.lowering.kernel import KernelPlan, Scheduler
from fuser.lowering.symbolic import B, SymbolicExtents

FULL, KEEP, DROP = "full", "keep", "drop"
_MAX_RECOMPUTE = 8
"""At most this many pointwise ops are recomputed in a consumer instead of stored and reloaded."""
_ELEMENTWISE = (C.UnaryOp, C.CastOp, C.BinaryOp, C.WhereOp)


@dataclass
class Verdict:
    ok: bool
    reason: str = ""
    scheduler: Scheduler = Scheduler.POINTWISE
    domain: SSAValue | None = None
    reduced_dims: tuple[int, ...] = ()
    forms: dict[SSAValue, str] = field(default_factory=dict)


def is_tensor_op(op: Operation) -> bool:
    return bool(op.results) and isinstance(op.results[0].type, TensorType)


def _dims(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _describe(sym: SymbolicExtents, v: SSAValue) -> str:
    return _dims(sym.shape(v))


class Segmenter:
    def __init__(self, fusion: func.FuncOp):
        self.fusion = fusion
        self.sym = SymbolicExtents(fusion)
        self.ops = [op for op in fusion.body.block.ops if is_tensor_op(op)]
        ret = fusion.body.block.last_op
        assert isinstance(ret, func.ReturnOp)
        self.returned = set(ret.arguments)

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

    # -- classification -----------------------------------------------------------
    def classify(self, seg: Sequence[Operation], outputs: Sequence[SSAValue]) -> Verdict:
        reductions = [op for op in seg if isinstance(op, C.ReductionOp)]
        if reductions:
            return self._classify_reduction(seg, outputs, reductions)
        return Verdict(True, scheduler=Scheduler.POINTWISE, domain=outputs[0] if outputs else None)

    def _shape_form(self, v: SSAValue, domain: tuple, reduced: set[int]) -> str | None:
        s = self.sym.shape(v)
        n = len(domain)
        if len(s) == n and all(a == b or a == B for a, b in zip(s, domain)):
            return KEEP if all(s[d] == B for d in reduced) else FULL
        kept = [e for d, e in enumerate(domain) if d not in reduced]
        if len(s) == len(kept) and all(a == b or a == B for a, b in zip(s, kept)):
            return DROP
        return None

    def _classify_reduction(self, seg, outputs, reductions) -> Verdict:
        reduced = reductions[0].reduced_dims
        ref = min((r.input for r in reductions), key=lambda v: self.sym.shape(v).count(B))
        domain = self.sym.shape(ref)
        for r in reductions:
            if r.reduced_dims != reduced:
                return Verdict(False, f"reductions over different dims {_dims(reduced)} and {_dims(r.reduced_dims)}")
            if self._shape_form(r.input, domain, set(reduced)) is None:
                return Verdict(False, f"reduction inputs have different domains {_dims(domain)} and {_describe(self.sym, r.input)}")
            shape = self.sym.shape(r.input)
            if any(shape[d] == B and domain[d] != B for d in reduced):
                # Its rows are shorter than the kernel's: one loop cannot reduce both.
                return Verdict(False, f"reduction input {_describe(self.sym, r.input)} is broadcast in a reduced dim of {_dims(domain)}")
        forms: dict[SSAValue, str] = {}
        rset = set(reduced)

        def form_of(v: SSAValue) -> str | None:
            return forms.get(v) or (self._shape_form(v, domain, rset) if isinstance(v.type, TensorType) else None)

        for op in seg:
            tainted = [v for v in op.operands if v in forms]
            if isinstance(op, C.ReductionOp):
                if form_of(op.input) not in (FULL, KEEP):
                    return Verdict(False, f"{op.name} input is not shaped like the reduction domain")
                forms[op.result] = KEEP if op.keepdim is not None else DROP
                continue
            if not tainted:
                continue
            form = self._tainted_form(op, form_of, rset, forms, domain)
            if form is None or form.startswith("!"):
                why = form[1:] if form else f"{op.name} remaps the indices of a reduction result"
                return Verdict(False, why)
            forms[op.results[0]] = form
        # Only values that depend on a reduction are in `forms` here.
        normalization = any(f == FULL for f in forms.values())
        for v in outputs:
            if v not in forms:
                form = self._shape_form(v, domain, rset)
                if form is None:
                    return Verdict(False, f"output {_describe(self.sym, v)} is not shaped like the reduction domain {_dims(domain)}")
                forms[v] = form
        kind = Scheduler.INNER_PERSISTENT if normalization else Scheduler.REDUCTION
        return Verdict(True, scheduler=kind, domain=ref, reduced_dims=tuple(reduced), forms=forms)

    def _tainted_form(self, op: Operation, form_of, rset: set[int], forms: dict, domain: tuple) -> str | None:
        if isinstance(op, _ELEMENTWISE):
            operand_forms = [form_of(v) for v in op.operands if isinstance(v.type, TensorType)]
            if None in operand_forms:
                return f"!{op.name} combines a reduction result with a value of another domain"
            if DROP in operand_forms:
                return DROP if set(operand_forms) == {DROP} else f"!{op.name} mixes reduced and unreduced ranks"
            return FULL if FULL in operand_forms else KEEP
        if isinstance(op, L.BroadcastOp):
            ok = form_of(op.input) == DROP and set(op.dims.get_values()) == rset
            return KEEP if ok else None
        if isinstance(op, L.SqueezeOp):
            ok = form_of(op.input) == KEEP and set(op.dims.get_values()) == rset
            return DROP if ok else None
        if isinstance(op, L.ExpandOp):
            # Only an expand back onto the rows of the domain keeps the kernel's indexing.
            expanded = self._shape_form(op.result, domain, rset)
            return expanded if form_of(op.input) in (FULL, KEEP) and expanded in (FULL, KEEP) else None
        if isinstance(op, (G.TakeAlongAxisOp, G.GatherOp)):
            ok = (form_of(op.input) == FULL and op.index not in forms
                  and form_of(op.index) == KEEP and rset == {op.axis})
            return KEEP if ok else None
        return None

    # -- the algorithm --------------------------------------------------------------
    def plan(self) -> list[KernelPlan]:
        if not self.ops:
            return []
        whole = self.classify(self.ops, self.outputs(self.ops, pessimistic=True))
        if whole.ok:
            return self._finish([(self.ops, whole, "")])
        segments: list[tuple[list[Operation], Verdict, str]] = []
        for k, component in enumerate(self._components()):
            # Why this group is not in the previous kernel: the whole fusion was refused.
            reason = f"split before {component[0].name}: {whole.reason}" if k else ""
            verdict = self.classify(component, self.outputs(component, pessimistic=True))
            if verdict.ok:
                segments.append((component, verdict, reason))
            else:
                segments += self._greedy(component, reason)
        return self._finish(segments)

    def _components(self) -> list[list[Operation]]:
        """Groups of ops tied by dataflow or by reading the same fusion input, in program order.
        Unrelated ops (an output computed from other inputs) then never split a group that one
        kernel could run, e.g. two row reductions of x around a `y + 1`."""
        parent: dict[object, object] = {}

        def find(x):
            while parent.setdefault(x, x) is not x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for op in self.ops:
            for v in op.operands:
                if isinstance(v.type, TensorType):
                    parent[find(op)] = find(v.owner if isinstance(v.owner, Operation) else v)
        groups: dict[object, list[Operation]] = {}
        for op in self.ops:
            groups.setdefault(find(op), []).append(op)
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
            segments += self._close(current, reason)
            reason = f"split before {op.name}: {verdict.reason}"
            current = [op]
        segments += self._close(current, reason)
        return segments

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
        cone: list[Operation] = []
        stack = [op]
        while stack:
            o = stack.pop()
            if o in cone:
                continue
            if isinstance(o, C.ReductionOp) or len(cone) >= _MAX_RECOMPUTE:
                return None
            cone.append(o)
            stack += [v.owner for v in o.operands if isinstance(v.owner, Operation) and is_tensor_op(v.owner)]
        return cone

    def _recompute_cheap_inputs(self, segs: list[list[Operation]]) -> None:
        """A kernel recomputes the cheap input-only values it consumes (a label mask) instead of
        reading them from memory another kernel wrote."""
        position = {op: k for k, op in enumerate(self.ops)}
        for i, seg in enumerate(segs):
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

    def _final_outputs(self, segs: list[list[Operation]], i: int) -> list[SSAValue]:
        """Values a kernel writes: the returned values of the ops it owns (first placed there),
        and those read by a kernel that does not compute them itself."""
        owned = [op for op in segs[i] if self.owner[op] == i]
        outputs = []
        for op in owned:
            v = op.results[0]
            consumers = {j for u in v.uses for j, seg in enumerate(segs) if u.operation in seg and j != i}
            if v in self.returned or any(op not in segs[j] for j in consumers):
                outputs.append(v)
        return outputs

    def _finish(self, segments) -> list[KernelPlan]:
        segs = [list(seg) for seg, _, _ in segments]
        self.owner = {op: i for i, seg in enumerate(segs) for op in seg}
        self._recompute_cheap_inputs(segs)
        plans = []
        for k, ((_, _, reason), seg) in enumerate(zip(segments, segs)):
            members = set(seg)
            outputs = self._final_outputs(segs, k)
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
                index=k, ops=seg, inputs=inputs, outputs=outputs, groups=list(groups.values()),
                scheduler=verdict.scheduler, split_reason=reason, domain=verdict.domain,
                reduced_dims=verdict.reduced_dims, forms=verdict.forms,
            ))
        return plans


def plan_kernels(fusion: func.FuncOp) -> list[KernelPlan]:
    return Segmenter(fusion).plan()
