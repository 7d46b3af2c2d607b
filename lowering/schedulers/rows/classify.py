"""Segmentation's question to the row units: is a group of ops a row kernel?

Every reduction of a row kernel reduces the same dims R of tensors of one domain D, and every
other value is *row-consistent* — FULL (shaped like D), KEEP (D with R broadcast) or DROP (D
without R) — so that whoever owns one row of D can compute all of them. Reductions of a
per-row value over all rows are GRID reductions (lowering/schedulers/grid.py)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fuser_dialect import ops_compute as C
from fuser_dialect import ops_gather as G
from fuser_dialect import ops_layout as L
from fuser_dialect.types import TensorType
from fuser.lowering.codegen.kernel import DROP, FULL, GRID, KEEP
from fuser.lowering.schedulers.base import Candidate, Verdict
from fuser.lowering.schedulers.symbolic import B, SymbolicExtents

ELEMENTWISE = (C.UnaryOp, C.CastOp, C.BinaryOp, C.WhereOp)


def _dims(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def shape_form(sym: SymbolicExtents, v: SSAValue, domain: tuple, reduced: set[int]) -> str | None:
    s = sym.shape(v)
    if len(s) == len(domain) and all(a == b or a == B for a, b in zip(s, domain)):
        return KEEP if all(s[d] == B for d in reduced) else FULL
    kept = [e for d, e in enumerate(domain) if d not in reduced]
    if len(s) == len(kept) and all(a == b or a == B for a, b in zip(s, kept)):
        return DROP
    return None


@dataclass
class RowVerdict:
    verdict: Verdict
    normalization: bool = False
    """A reduction result flows back onto FULL rows (softmax, layer-norm)."""


def row_verdict(candidate: Candidate) -> RowVerdict:
    """The row analysis of a candidate (computed once, shared by the row units)."""
    found = candidate.facts.get("rows")
    if found is None:
        found = candidate.facts["rows"] = _classify_rows(candidate)
    return found  # type: ignore[return-value]


def _classify_rows(candidate: Candidate) -> RowVerdict:
    sym, reductions = candidate.sym, candidate.reductions
    if not reductions:
        return RowVerdict(Verdict(False, "no reduction"))
    # Reductions of the widest inputs are the row reductions; a reduction of a narrower value
    # must be a grid reduction (all of a per-row value), checked once the domain is known.
    widest = max(len(sym.shape(r.input)) for r in reductions)
    rows_of = [r for r in reductions if len(sym.shape(r.input)) == widest]
    across = [r for r in reductions if len(sym.shape(r.input)) < widest]
    reduced = rows_of[0].reduced_dims
    ref = min((r.input for r in rows_of), key=lambda v: sym.shape(v).count(B))
    domain = sym.shape(ref)
    rset = set(reduced)
    for r in rows_of:
        if r.reduced_dims != reduced:
            return RowVerdict(Verdict(False, f"reductions over different dims {_dims(reduced)} and {_dims(r.reduced_dims)}"))
        if shape_form(sym, r.input, domain, rset) is None:
            return RowVerdict(Verdict(False, f"reduction inputs have different domains {_dims(domain)} and {_dims(sym.shape(r.input))}"))
        shape = sym.shape(r.input)
        if any(shape[d] == B and domain[d] != B for d in reduced):
            # Its rows are shorter than the kernel's: one loop cannot reduce both.
            return RowVerdict(Verdict(False, f"reduction input {_dims(shape)} is broadcast in a reduced dim of {_dims(domain)}"))
    forms: dict[SSAValue, str] = {}

    def form_of(v: SSAValue) -> str | None:
        return forms.get(v) or (shape_form(sym, v, domain, rset) if isinstance(v.type, TensorType) else None)

    for op in candidate.ops:
        if isinstance(op, C.ReductionOp) and op in across:
            why = _grid_refusal(sym, op, form_of(op.input), domain)
            if why:
                return RowVerdict(Verdict(False, why))
            forms[op.result] = GRID
            continue
        if isinstance(op, C.ReductionOp):
            if form_of(op.input) not in (FULL, KEEP):
                return RowVerdict(Verdict(False, f"{op.name} input is not shaped like the reduction domain"))
            forms[op.result] = KEEP if op.keepdim is not None else DROP
            continue
        if not any(v in forms for v in op.operands):
            continue
        if any(forms.get(v) == GRID for v in op.operands):
            form = _grid_form(op, forms)
        else:
            form = _tainted_form(sym, op, form_of, rset, forms, domain)
        if form is None or form.startswith("!"):
            return RowVerdict(Verdict(False, form[1:] if form else f"{op.name} remaps the indices of a reduction result"))
        forms[op.results[0]] = form
    # Only values that depend on a reduction are in `forms` here.
    normalization = any(f == FULL for f in forms.values())
    for v in candidate.outputs:
        if v not in forms:
            form = shape_form(sym, v, domain, rset)
            if form is None:
                return RowVerdict(Verdict(False, f"output {_dims(sym.shape(v))} is not shaped like the reduction domain {_dims(domain)}"))
            forms[v] = form
        if forms[v] == FULL and _broadcast_in_reduced(sym.shape(v), domain, rset):
            return RowVerdict(Verdict(False, f"output {_dims(sym.shape(v))} is broadcast in a reduced dim of "
                                             f"{_dims(domain)}: every lane along it would store it again"))
    return RowVerdict(Verdict(True, domain=ref, reduced_dims=tuple(reduced), forms=forms), normalization)


def _broadcast_in_reduced(shape: tuple, domain: tuple, reduced: set[int]) -> bool:
    """A FULL value broadcast in some reduced dim the domain is not (but not in all of them,
    which is KEEP): the row loop visits each of its elements once per position along that dim
    (a per-token mean in a whole-tensor reduction: 768 stores of each of its elements)."""
    return any(shape[d] == B and domain[d] != B for d in reduced)


def _grid_refusal(sym, op: C.ReductionOp, input_form: str | None, domain: tuple) -> str:
    """Why `op` cannot be a grid reduction of this kernel ("" when it can): it must reduce
    every dim of a per-row value (DROP, or KEEP read at the row)."""
    shape = sym.shape(op.input)
    if input_form not in (DROP, KEEP):
        return (f"reductions of different domains {_dims(domain)} and {_dims(shape)} (not a reduction of "
                f"per-row values either)")
    if len(op.reduced_dims) != len(shape):
        return f"{op.name} of the per-row value {_dims(shape)} reduces dims {_dims(op.reduced_dims)}, not all of them"
    return ""


def _grid_form(op: Operation, forms: dict) -> str | None:
    """A value computed from grid reduction results: elementwise on them (and scalars) only."""
    if not isinstance(op, ELEMENTWISE):
        return f"!{op.name} of a grid reduction result is not elementwise"
    if all(forms.get(v) == GRID for v in op.operands if isinstance(v.type, TensorType)):
        return GRID
    return f"!{op.name} combines a grid reduction result with a per-row value"


def _tainted_form(sym, op: Operation, form_of, rset: set[int], forms: dict, domain: tuple) -> str | None:
    """The form of a value computed from a reduction result, None when no row can compute it,
    or "!why" with a more precise reason."""
    if isinstance(op, ELEMENTWISE):
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
    if isinstance(op, L.BroadcastInDimOp):
        # A row value put back onto the rows (the spelling frameworks emit: static output shape).
        dims = list(op.dims.get_values())
        kept = [d for d in range(len(domain)) if d not in rset]
        source = form_of(op.input)
        ok = (source == DROP and dims == kept) or (source == KEEP and dims == list(range(len(domain))))
        return shape_form(sym, op.result, domain, rset) if ok else None
    if isinstance(op, L.ExpandOp):
        # Only an expand back onto the rows of the domain keeps the kernel's indexing.
        expanded = shape_form(sym, op.result, domain, rset)
        return expanded if form_of(op.input) in (FULL, KEEP) and expanded in (FULL, KEEP) else None
    if isinstance(op, (G.TakeAlongAxisOp, G.GatherOp)):
        ok = (form_of(op.input) == FULL and op.index not in forms
              and form_of(op.index) == KEEP and rset == {op.axis})
        return KEEP if ok else None
    return None
