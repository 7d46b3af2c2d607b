"""Runs a pass's rewrite patterns with xDSL's walker, offering them only the ops they can match.

xDSL's `PatternRewriteWalker` puts every op of the module on its worklist and offers each one to
every pattern, again on each round of `apply_recursively`: on a 20,000-op fusion a pass that
matches nothing still costs about 0.2 s, and the pre-segmentation pipeline runs eight of them.
A pattern written with `op_type_rewrite_pattern` matches only its root op types (the type hint
of its `op` argument), so the walker here starts from the ops of those types, and a pass none of
whose root types occurs in the module walks nothing. What a rewrite touches is still revisited as
in xDSL (the rewriter's listener pushes the users of replaced values and the defining ops of
erased operands), so a rewrite's newly dead ops are still erased when `dce` is on; dead ops that
were already in the input and are not roots are left to `dce`, the pipeline's last pass.

A pattern whose root types cannot be read (not written with `op_type_rewrite_pattern`) makes the
walker visit every op, as xDSL's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import UnionType
from typing import Union, get_args, get_origin

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker, RewritePattern


def pattern_roots(pattern: RewritePattern) -> tuple[type[Operation], ...] | None:
    """The op types `pattern` can match, or None when it does not say (it may match any op).

    `op_type_rewrite_pattern` keeps the annotated type in its wrapper's closure as
    `expected_type` (xDSL 0.74); a union there stands for each of its members."""
    method = type(pattern).match_and_rewrite
    code, cells = getattr(method, "__code__", None), getattr(method, "__closure__", None)
    if code is None or not cells or "expected_type" not in code.co_freevars:
        return None
    expected = cells[code.co_freevars.index("expected_type")].cell_contents
    members = get_args(expected) if get_origin(expected) in (Union, UnionType) else (expected,)
    if not all(isinstance(t, type) and issubclass(t, Operation) for t in members):
        return None
    return tuple(members)


@dataclass(eq=False, repr=False)
class RootedWalker(PatternRewriteWalker):
    """A `PatternRewriteWalker` whose worklist starts from the ops of `roots` (None: every op)."""

    roots: tuple[type[Operation], ...] | None = field(default=None, kw_only=True)

    def _populate_worklist(self, op: Operation | Region | Block) -> None:
        if self.roots is None:
            return super()._populate_worklist(op)
        # Same order as xDSL's (the worklist is a stack).
        for sub_op in op.walk(reverse=not self.walk_reverse, region_first=not self.walk_regions_first):
            if isinstance(sub_op, self.roots):
                self._worklist.push(sub_op)


def rewrite_module(module: ModuleOp, patterns: Sequence[RewritePattern], *, apply_recursively: bool = True,
                   dce: bool = False) -> bool:
    """Applies `patterns` greedily (the first that matches an op rewrites it) over `module`, as
    `PatternRewriteWalker(GreedyRewritePatternApplier(patterns, dce_enabled=dce),
    apply_recursively=...)` does, starting only from ops the patterns can match. Returns whether
    the IR changed."""
    roots = _union_of_roots(patterns)
    if roots is not None and not _has_any(module, roots):
        return False
    walker = RootedWalker(GreedyRewritePatternApplier(list(patterns), dce_enabled=dce),
                          apply_recursively=apply_recursively, roots=roots)
    return walker.rewrite_module(module)


def _union_of_roots(patterns: Sequence[RewritePattern]) -> tuple[type[Operation], ...] | None:
    roots: list[type[Operation]] = []
    for pattern in patterns:
        found = pattern_roots(pattern)
        if found is None:
            return None
        roots += [t for t in found if t not in roots]
    return tuple(roots)


def _has_any(module: ModuleOp, roots: tuple[type[Operation], ...]) -> bool:
    return any(isinstance(op, roots) for op in module.walk())


__all__ = ["RootedWalker", "pattern_roots", "rewrite_module"]
