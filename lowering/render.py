"""`render(plan, schedule)`: the CUDA C of one kernel, as a pure function of its inputs.

Kernel shapes (see lowering/schedule.py for how they are chosen):

  pointwise        for (lin = global thread; lin < numel; lin += grid size)
                     idx = unravel(lin); store every output at idx

  inner reduction  for (row = blockIdx.x; row < rows; row += gridDim.x)
                     per reduction: acc = identity; for each r of the row owned by this
                       thread: acc = op(acc, input(row, r)); acc = block_reduce(acc)
                     full outputs: for each r: store output(row, r)
                     row outputs: thread 0 stores output(row)

  outer reduction  the same with one thread per row and serial loops over r.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fuser_dialect import ops_compute as C
from fuser_dialect import ops_layout as L
from fuser.lowering import cuda_exprs as X
from fuser.lowering.emit_cuda import EmittedKernel, KernelEmitter, _Loop, prelude
from fuser.lowering.kernel import KernelPlan
from fuser.lowering.schedule import Schedule
from fuser.lowering.segment import DROP, FULL, KEEP

_SMEM_NAME = {"float": "fuser_smem_f", "double": "fuser_smem_d", "long long": "fuser_smem_ll", "int": "fuser_smem_i"}
_FUNCTOR = {C.ReductionKind.SUM: "FuserSumOp", C.ReductionKind.PROD: "FuserProdOp",
            C.ReductionKind.MAX: "FuserMaxOp", C.ReductionKind.MIN: "FuserMinOp"}


def _accumulator_type(dtype: str) -> str:
    return "long long" if dtype in ("i32", "i64", "i1") else X.COMPUTE_TYPE[dtype]


def _pointwise(em: KernelEmitter) -> None:
    groups = em.plan.groups
    vecs = em.schedule.vec or (1,) * len(groups)
    for g, (outputs, k, vec) in enumerate(zip(groups, em.schedule.outer_dims, vecs)):
        if len(groups) > 1:
            em.open(f"if (blockIdx.z == {g})")
        _pointwise_group(em, outputs, k, vec)
        if len(groups) > 1:
            em.close()


_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class GroupFacts:
    """What the schedule of a pointwise group needs to know about its loads (found once per
    plan by emitting the group with a flat loop and reading the index of every load)."""

    invariant_prefix: int
    """The most leading dims some global load does not depend on (a bias broadcast over rows,
    a cos/sin table broadcast over batch and heads): those dims loop inside a thread."""
    vector_values: tuple | None
    """Tensors loaded with the innermost loop index as their last index and nowhere else, when
    every load of the group is of that form or independent of it: then consecutive threads'
    elements are consecutive in memory and VEC of them can move as one access. None: no."""


def pointwise_facts(plan: KernelPlan) -> tuple[GroupFacts, ...]:
    cached = getattr(plan, "_pointwise_facts", None)
    if cached is not None:
        return cached
    result = []
    for outputs in plan.groups:
        em = KernelEmitter(plan, Schedule("pointwise", 128, outer_dims=(0,) * len(plan.groups)))
        em.loads_seen = []
        _pointwise_group(em, outputs, 0, 1)
        rank = outputs[0].type.rank
        last = f"i{rank - 1}"
        best, vector, vectorizable = 0, [], rank > 0
        for value, idx in em.loads_seen:
            names = {n for component in idx for n in _IDENT.findall(component)}
            used = {int(n[1:]) for n in names if re.fullmatch(r"i\d+", n)}
            if names - {f"i{d}" for d in used} - {"LL"}:
                vectorizable = False  # a computed index may hide the innermost variable
                continue
            prefix = next((d for d in range(rank) if d in used), rank)
            best = max(best, min(prefix, rank - 1))
            if last in names:
                if idx[-1] != last or any(last in _IDENT.findall(c) for c in idx[:-1]):
                    vectorizable = False
                elif value not in vector:
                    vector.append(value)
        result.append(GroupFacts(best, tuple(vector) if vectorizable else None))
    plan._pointwise_facts = tuple(result)  # type: ignore[attr-defined]
    return plan._pointwise_facts  # type: ignore[attr-defined]


def _pointwise_group(em: KernelEmitter, outputs, k: int, vec: int) -> None:
    dom = outputs[0]
    rank = dom.type.rank
    em.open("")  # a C scope per group: each declares its own `inner`, `outer` and index variables
    em.line(f"const long long inner = {em.numel(dom, range(k, rank))}" + (f" / {vec};" if vec > 1 else ";"))
    em.open("for (long long lin = (long long)blockIdx.x * blockDim.x + threadIdx.x; lin < inner; "
            "lin += (long long)gridDim.x * blockDim.x)")
    if vec > 1:
        # The innermost dim is walked VEC elements at a time: iv0 .. iv<VEC-1> are consecutive.
        row = f"{em.extent(dom, rank - 1)} / {vec}"
        em.line(f"const long long iv0 = (lin % ({row})) * {vec};")
        for j in range(1, vec):
            em.line(f"const long long iv{j} = iv0 + {j};")
        idx = em.unravel(dom, list(range(k, rank - 1)), f"(lin / ({row}))", "i") if rank - 1 > k else {}
        idx[rank - 1] = "iv0"
        lanes = [f"iv{j}" for j in range(vec)]
    else:
        idx = em.unravel(dom, list(range(k, rank)), "lin", "i")
        lanes = [idx[rank - 1]] if rank else []
    if k:
        em.line(f"const long long outer = {em.numel(dom, range(k))};")
        em.hoist_here(allowed=set(idx.values()) | set(lanes))
        em.open("for (long long olin = blockIdx.y; olin < outer; olin += gridDim.y)")
        idx.update(em.unravel(dom, list(range(k)), "olin", "i"))
    if vec > 1:
        em.vec = vec
        em.vector_loads = {}
        staged = {out: em.stage(out, vec) for out in outputs}
        for j, lane in enumerate(lanes):
            for out in outputs:
                em.stage_value(out, staged[out], j, [*(idx[d] for d in range(rank - 1)), lane])
        for out in outputs:
            em.store_vector(out, staged[out], [idx[d] for d in range(rank)], vec)
        em.vec = 1
    else:
        for out in outputs:
            em.store(out, [idx[d] for d in range(rank)])
    if k:
        em.close()
    em.hoist = None
    em.close()
    em.close()


class _RowKernel:
    """Emits a reduction kernel: rows of the domain, phases, then the stores."""

    def __init__(self, em: KernelEmitter):
        self.em = em
        plan = em.plan
        self.domain = plan.domain
        self.rank = self.domain.type.rank
        self.reduced = list(plan.reduced_dims)
        self.kept = [d for d in range(self.rank) if d not in self.reduced]
        self.inner = em.schedule.mode == "inner"
        self.smem_types: set[str] = set()

    def full_idx(self, o: dict[int, str]) -> list[str]:
        return [o[d] if d in o else f"r{d}" for d in range(self.rank)]

    def open_loop(self, phase: int) -> None:
        em = self.em
        iters = em.schedule.iters
        if self.inner and iters:
            em.line("#pragma unroll")
            em.open(f"for (int k = 0; k < {iters}; ++k)")
            em.line("const long long rl = threadIdx.x + (long long)k * blockDim.x;")
            em.open("if (rl < rlen)")
            em.s.loop = _Loop(phase, "k")
        elif self.inner:
            em.open("for (long long rl = threadIdx.x; rl < rlen; rl += blockDim.x)")
        else:
            em.open("for (long long rl = 0; rl < rlen; ++rl)")
        em.unravel(self.domain, self.reduced, "rl", "r")

    def close_loop(self) -> None:
        em = self.em
        em.s.loop = None
        em.close()
        if self.inner and em.schedule.iters:
            em.close()

    def emit(self) -> None:
        em, plan = self.em, self.em.plan
        em.line(f"const long long rows = {em.numel(self.domain, self.kept)};")
        em.line(f"const long long rlen = {em.numel(self.domain, self.reduced)};")
        row_mark = len(em.s.lines)
        if self.inner:
            em.open("for (long long row = blockIdx.x; row < rows; row += gridDim.x)")
        else:
            em.open("for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < rows; "
                    "row += (long long)gridDim.x * blockDim.x)")
        o = em.unravel(self.domain, self.kept, "row", "o")
        # Loads that depend on the row alone (a label, a per-row scale) are read once per row.
        em.hoist_here(allowed=set(o.values()), warp_broadcast=self.inner)
        buffer_mark = len(em.s.lines)
        online = online_softmax_pairs(plan.reductions) if not em.schedule.iters else {}
        merged = set(online.values())
        for phase, red in enumerate(plan.reductions):
            if red in online:
                self.online_phase(phase, red, online[red], o)
            elif red not in merged:
                self.phase(phase, red, o)
        full = [v for v in plan.outputs if plan.forms.get(v) == FULL]
        if full:
            self.open_loop(len(plan.reductions))
            for v in full:
                em.store(v, self.full_idx(o))
            self.close_loop()
        rows = [v for v in plan.outputs if plan.forms.get(v) in (KEEP, DROP)]
        if self.inner:
            em.hoist = None  # thread 0 alone stores the row outputs: nothing to share
        if rows:
            if self.inner:
                em.open("if (threadIdx.x == 0)")
            for v in rows:
                if plan.forms[v] == KEEP:
                    em.store(v, [o.get(d, "0") for d in range(self.rank)])
                else:
                    em.store(v, [o[d] for d in self.kept])
            if self.inner:
                em.close()
        indent = "  " * 2
        decls = [f"{indent}{ctype} {name}[{em.schedule.iters}];" for name, ctype in em.buffers.values()]
        em.s.lines[buffer_mark:buffer_mark] = decls
        em.hoist = None
        if em.invariant:
            em.line("fuser_first_row = false;")
        em.close()
        if em.invariant:
            outer = "  " * 1
            hoisted = [f"{outer}{ctype} {name}[{em.schedule.iters}];" for name, ctype in em.invariant.values()]
            em.s.lines[row_mark:row_mark] = hoisted + [f"{outer}bool fuser_first_row = true;"]

    def phase(self, phase: int, red: C.ReductionOp, o: dict[int, str]) -> None:
        em = self.em
        src = red.input.type.dtype
        acc_t = _accumulator_type(src)
        identity = X.reduction_identity(red.op_kind, src if acc_t != "long long" else "i64")
        acc = f"acc{phase}"
        em.line(f"{acc_t} {acc} = {identity};")
        self.open_loop(phase)
        value = em.emit(red.input, self.full_idx(o))
        em.line(f"{acc} = {X.reduction_combine(red.op_kind)}({acc}, ({acc_t}){value});")
        self.close_loop()
        if self.inner:
            self.smem_types.add(acc_t)
            em.line(f"{acc} = fuser_block_reduce({acc}, {_FUNCTOR[red.op_kind]}(), {identity}, {_SMEM_NAME[acc_t]});")
            em.needs_sync = True
        self.result_register(red, acc)

    def result_register(self, red: C.ReductionOp, acc: str) -> None:
        """The reduction's value for the rest of the row, rounded to its dtype."""
        dst = red.result.type.dtype
        result_t = X.COMPUTE_TYPE[dst]
        self.em.red_regs[red.result] = self.em.tmp(result_t, X.round_expr(f"({result_t}){acc}", dst), "red")

    def online_phase(self, phase: int, red_max: C.ReductionOp, red_sum: C.ReductionOp, o: dict[int, str]) -> None:
        """max(x) and sum(exp(x - max)) in ONE pass over the row (online normaliser): the running
        sum is rescaled whenever the running max grows. Used when the row does not fit in
        registers, so that log-sum-exp (cross-entropy) still reads its input once."""
        em = self.em
        t = _accumulator_type(red_max.input.type.dtype)
        m, s = f"acc{phase}m", f"acc{phase}s"
        em.line(f"{t} {m} = ({t})-INFINITY;")
        em.line(f"{t} {s} = ({t})0;")
        self.open_loop(phase)
        x = em.emit(red_max.input, self.full_idx(o))
        em.line(f"fuser_online_update({m}, {s}, ({t}){x});")
        self.close_loop()
        if self.inner:
            self.smem_types.add(t)
            em.line(f"fuser_block_reduce_online({m}, {s}, {_SMEM_NAME[t]});")
            em.needs_sync = True
        self.result_register(red_max, m)
        self.result_register(red_sum, s)


def _is_max_result(value, red_max: C.ReductionOp) -> bool:
    """`value` is red_max's result, either kept (keepdim) or broadcast back over the reduced dims."""
    if value is red_max.result:
        return red_max.keepdim is not None
    op = value.owner
    return (isinstance(op, L.BroadcastOp) and op.input is red_max.result and red_max.keepdim is None
            and tuple(op.dims.get_values()) == red_max.reduced_dims)


def online_softmax_pairs(reductions: list[C.ReductionOp]) -> dict[C.ReductionOp, C.ReductionOp]:
    """max reductions M paired with a later sum S of exp(M.input - M) over the same dims."""
    pairs = {}
    for m in reductions:
        if m.op_kind != C.ReductionKind.MAX or m.input.type.dtype not in ("f32", "f64", "f16", "bf16"):
            continue
        for s in reductions:
            if s.op_kind != C.ReductionKind.SUM or s in pairs.values() or s.reduced_dims != m.reduced_dims:
                continue
            exp = s.input.owner
            if not (isinstance(exp, C.UnaryOp) and exp.op_kind == C.UnaryKind.EXP):
                continue
            sub = exp.input.owner
            if (isinstance(sub, C.BinaryOp) and sub.op_kind == C.BinaryKind.SUB and sub.lhs is m.input
                    and _is_max_result(sub.rhs, m) and exp.result.type.dtype == m.input.type.dtype):
                pairs[m] = s
                break
    return pairs


def _emit_body(plan: KernelPlan, schedule: Schedule, buffered: frozenset) -> tuple[KernelEmitter, list[str]]:
    em = KernelEmitter(plan, schedule, buffered)
    if schedule.mode == "pointwise":
        _pointwise(em)
        return em, []
    row = _RowKernel(em)
    row.emit()
    smem = [f"  __shared__ {t} {_SMEM_NAME[t]}[64];" for t in sorted(row.smem_types)]
    return em, smem


def render(plan: KernelPlan, schedule: Schedule) -> EmittedKernel:
    """The CUDA C source of `plan` under `schedule`, and its parameters in order."""
    em, smem = _emit_body(plan, schedule, frozenset())
    if schedule.mode == "inner" and schedule.iters:
        # Second pass: keep in registers every load that more than one phase reads.
        reused = frozenset(k for k, phases in em.load_phases.items() if len(phases) > 1)
        if reused:
            em, smem = _emit_body(plan, schedule, reused)
    name = plan.name
    params = tuple(em.params.values())
    signature = ",\n    ".join(f"{p.ctype} {p.name}" for p in params)
    source = "\n".join([
        prelude(),
        X.SUPPORT,
        f"// scheduler: {plan.scheduler}, mode: {schedule.mode}, block: {schedule.block}, iters: {schedule.iters}",
        f'extern "C" __global__ void __launch_bounds__({schedule.block}) {name}(\n    {signature}) {{',
        *smem,
        *em.s.lines,
        "}",
        f"FUSER_HOST_LAUNCHER({name})",
        "",
    ])
    return EmittedKernel(name, source, params, schedule, em.needs_sync)
