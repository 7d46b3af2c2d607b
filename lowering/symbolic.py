"""Symbolic extents: which dynamic extents of a fusion are the same at run time.

Every `?` dim gets a symbol; elementwise ops unify the symbols of the dims they join
(their extents must be equal at run time), layout ops carry symbols along, resize ops
make new ones. Segmentation compares iteration domains with these symbols, so the
grouping never depends on the extents of one particular call."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from fuser_dialect import ops_compute as C
from fuser_dialect import ops_factory as F
from fuser_dialect import ops_gather as G
from fuser_dialect import ops_layout as L
from fuser_dialect import ops_resize as R
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType

B = "b"
Sym = int | str  # a static extent, "b", or "s<k>" for a dynamic extent class


class SymbolicExtents:
    def __init__(self, fusion: func.FuncOp):
        self._parent: dict[str, str] = {}
        self._shapes: dict[SSAValue, list[Sym]] = {}
        self._dim_of: dict[SSAValue, Sym] = {}
        for arg in fusion.body.block.args:
            if isinstance(arg.type, TensorType):
                self._shapes[arg] = [self._from_type(e) for e in arg.type.shape]
        for op in fusion.body.block.ops:
            self._visit(op)

    # -- union-find ------------------------------------------------------------
    def _fresh(self) -> str:
        s = f"s{len(self._parent)}"
        self._parent[s] = s
        return s

    def find(self, s: Sym) -> Sym:
        if not isinstance(s, str) or s == B:
            return s
        while self._parent[s] != s:
            self._parent[s] = self._parent[self._parent[s]]
            s = self._parent[s]
        return s

    def _join(self, a: Sym, b: Sym) -> Sym:
        a, b = self.find(a), self.find(b)
        if a == B:
            return b
        if b == B or a == b:
            return a
        if isinstance(a, int):
            return a
        if isinstance(b, int):
            return b
        self._parent[b] = a
        return a

    def _from_type(self, e: int) -> Sym:
        return B if e == BROADCAST else self._fresh() if e == DYNAMIC else e

    # -- queries ----------------------------------------------------------------
    def shape(self, value: SSAValue) -> tuple[Sym, ...]:
        return tuple(self.find(s) for s in self._shapes[value])

    def same_domain(self, a: SSAValue, b: SSAValue) -> bool:
        return self.shape(a) == self.shape(b)

    # -- propagation ------------------------------------------------------------
    def _extent_sym(self, value: SSAValue) -> Sym:
        """The symbol of an i64 extent operand: a `fuser.dim` shares its tensor dim's symbol."""
        if value in self._dim_of:
            return self._dim_of[value]
        return self._fresh()

    def _set(self, op: Operation, shape: list[Sym]) -> None:
        result = op.results[0]
        assert isinstance(result.type, TensorType)
        # A static type beats a symbol (concretize may have refined the result).
        self._shapes[result] = [
            B if t == BROADCAST else t if t >= 0 else s for t, s in zip(result.type.shape, shape)
        ]

    def _visit(self, op: Operation) -> None:
        if isinstance(op, F.DimOp):
            self._dim_of[op.result] = self._shapes[op.input][op.axis]
            return
        if not op.results or not isinstance(op.results[0].type, TensorType):
            return
        out_type = op.results[0].type
        shapes = [self._shapes[v] for v in op.operands if v in self._shapes]
        if isinstance(op, (C.UnaryOp, C.CastOp, C.BinaryOp, C.WhereOp)):
            shape = list(shapes[0])
            for other in shapes[1:]:
                shape = [self._join(a, b) for a, b in zip(shape, other)]
            self._set(op, shape)
        elif isinstance(op, L.BroadcastOp):
            it = iter(shapes[0])
            self._set(op, [B if b else next(it) for b in op.is_broadcast_dim])
        elif isinstance(op, L.BroadcastInDimOp):
            shape: list[Sym] = [B] * out_type.rank
            for i, o in enumerate(op.dims.get_values()):
                shape[o] = shapes[0][i]
            self._set(op, shape)
        elif isinstance(op, L.SqueezeOp):
            dims = set(op.dims.get_values())
            self._set(op, [s for i, s in enumerate(shapes[0]) if i not in dims])
        elif isinstance(op, L.PermuteOp):
            self._set(op, [shapes[0][p] for p in op.dims.get_values()])
        elif isinstance(op, (L.ExpandOp, L.ReshapeOp, F.FullOp)):
            extents = iter(op.extents)
            shape = []
            for d, e in enumerate(out_type.shape):
                keep = isinstance(op, L.ExpandOp) and shapes[0][d] != B
                if keep:
                    shape.append(shapes[0][d])
                    if e == DYNAMIC:
                        next(extents)
                elif e == DYNAMIC:
                    shape.append(self._extent_sym(next(extents)))
                else:
                    shape.append(self._from_type(e))
            self._set(op, shape)
        elif isinstance(op, R.PadOp):
            widths = op.widths.get_values()
            self._set(op, [s if widths[2 * d] == widths[2 * d + 1] == 0 else self._fresh()
                           for d, s in enumerate(shapes[0])])
        elif isinstance(op, R.SliceOp):
            self._set(op, [self._fresh() for _ in shapes[0]])
        elif isinstance(op, R.CatOp):
            dim = op.dim.value.data
            shape = list(shapes[0])
            for other in shapes[1:]:
                shape = [a if d == dim else self._join(a, b) for d, (a, b) in enumerate(zip(shape, other))]
            shape[dim] = self._fresh()
            self._set(op, shape)
        elif isinstance(op, G.GatherOp):
            self._set(op, list(shapes[1]))
        elif isinstance(op, G.TakeAlongAxisOp):
            self._set(op, [b if d == op.axis else self._join(a, b) for d, (a, b) in enumerate(zip(shapes[0], shapes[1]))])
        elif isinstance(op, G.IndexSelectOp):
            n = shapes[1][0] if shapes[1] else B
            self._set(op, [n if d == op.axis else s for d, s in enumerate(shapes[0])])
        elif isinstance(op, C.ReductionOp):
            dims = set(op.reduced_dims)
            if op.keepdim is not None:
                self._set(op, [B if d in dims else s for d, s in enumerate(shapes[0])])
            else:
                self._set(op, [s for d, s in enumerate(shapes[0]) if d not in dims])
        elif isinstance(op, F.IotaOp):
            self._set(op, [self._extent_sym(op.length)])
        else:
            self._set(op, [self._from_type(e) for e in out_type.shape])
