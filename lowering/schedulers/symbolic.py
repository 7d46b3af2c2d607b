"""Symbolic extents: which dynamic extents of a fusion are the same at run time.

Every `?` dim gets a symbol; each op unifies the symbols of the extents its dim rule ties
(fuser_dialect.op_table: elementwise ops join their operands' dims, layout ops carry them
along, resized dims tie to nothing and get new ones). A static extent is a constant in the
same union-find: a symbol tied to it becomes that constant everywhere, so `x: ?x?` times a
`64x4096` broadcast is one domain [64, 4096], as its all-symbolic spelling is one domain
[s0, s1]. Segmentation compares iteration domains with these symbols, so the grouping never
depends on the extents of one particular call."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from fuser_dialect.op_table import dim_ties
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType
from fuser_dialect.union_find import UnionFind

B = "b"
Sym = int | str  # a static extent, "b", or "s<k>" for a dynamic extent class


class SymbolicExtents:
    def __init__(self, fusion: func.FuncOp):
        # Symbols and the static extents they are tied to; a constant is always its class's root.
        self._classes: UnionFind[Sym] = UnionFind()
        self._symbols = 0
        self._shapes: dict[SSAValue, list[Sym]] = {}
        self._dim_of: dict[SSAValue, Sym] = {}
        for arg in fusion.body.block.args:
            if isinstance(arg.type, TensorType):
                self._shapes[arg] = [self._from_type(e) for e in arg.type.shape]
        for op in fusion.body.block.ops:
            self._visit(op)

    # -- symbols ------------------------------------------------------------------
    def _fresh(self) -> str:
        s = f"s{self._symbols}"
        self._symbols += 1
        self._classes.add(s)
        return s

    def find(self, s: Sym) -> Sym:
        if not isinstance(s, str) or s == B:
            return s
        return self._classes.find(s)

    def _join(self, a: Sym, b: Sym) -> Sym:
        a, b = self.find(a), self.find(b)
        if a == B:
            return b
        if b == B or a == b:
            return a
        if isinstance(a, int) and isinstance(b, int):
            # Only a tie that may break at run time (an extent-1 dim expanding without being
            # typed `b`) joins two different constants; the verifier rejects the others.
            return a
        if isinstance(b, int):
            a, b = b, a
        return self._classes.union(a, b)  # a constant stays the root: the symbol becomes it

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

    def _operand_sym(self, op: Operation, operand: int, dim: int | None) -> Sym:
        value = op.operands[operand]
        return self._extent_sym(value) if dim is None else self._shapes[value][dim]

    def _set(self, op: Operation, shape: list[Sym | None]) -> None:
        result = op.results[0]
        assert isinstance(result.type, TensorType)
        # A static type binds the symbols tied to it (`?x?` times `64x4096` is 64x4096 on
        # both sides); a dim the op's dim rule ties to nothing is what its type says.
        self._shapes[result] = [
            B if t == BROADCAST else self._join(t, s) if t >= 0 and s is not None else t if t >= 0
            else s if s is not None else self._fresh()
            for t, s in zip(result.type.shape, shape)
        ]

    def _visit(self, op: Operation) -> None:
        """Unifies the extents the op's dim rule (fuser_dialect.op_table) ties together."""
        if not op.results:
            return
        result_type = op.results[0].type
        if not isinstance(result_type, TensorType):
            for tie in dim_ties(op):
                if tie.result_dim is None and tie.operand_dim is not None:
                    self._dim_of[op.results[0]] = self._operand_sym(op, tie.operand, tie.operand_dim)
            return
        shape: list[Sym | None] = [None] * result_type.rank
        for tie in dim_ties(op):
            if tie.result_dim is None or not tie.exact:
                # An inexact tie (an extent-1 dim that expands) joins nothing: a value read
                # through it is not of the result's domain (an output exp(w) beside x + expand(w)
                # would be written over x's domain).
                continue
            sym = self._operand_sym(op, tie.operand, tie.operand_dim)
            current = shape[tie.result_dim]
            shape[tie.result_dim] = sym if current is None else self._join(current, sym)
        self._set(op, shape)
