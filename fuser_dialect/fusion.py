"""Fusion-level conventions: the fusion func of a module, output layouts
(requirement vs hint), and the context that parses fuser IR."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.complex import Complex
from xdsl.dialects.builtin import Builtin, DenseArrayBase, DictionaryAttr, ModuleOp, i64
from xdsl.utils.exceptions import VerifyException

from fuser_dialect.dialect import Fuser
from fuser_dialect.types import TensorType

REQUIRED_ORDER = "fuser.stride_order"
"""Result attribute: a stride order the user REQUIRES (kept and honoured by every stage)."""
HINT_ORDER = "fuser.stride_order_hint"
"""Result attribute: an INFERRED stride order, a hint a schedule may override."""


def make_context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(func.Func)
    ctx.load_dialect(arith.Arith)
    ctx.load_dialect(Complex)  # complex.constant: the fill value of a complex Scalar constant
    ctx.load_dialect(Fuser)
    return ctx


def fusion_funcs(module: ModuleOp) -> list[func.FuncOp]:
    return [op for op in module.ops if isinstance(op, func.FuncOp)]


def the_fusion(module: ModuleOp) -> func.FuncOp:
    funcs = fusion_funcs(module)
    if len(funcs) != 1:
        raise ValueError(f"expected one fusion (func.func) in the module, found {len(funcs)}")
    return funcs[0]


def _result_attrs(f: func.FuncOp, i: int) -> dict:
    if f.res_attrs is None:
        return {}
    return dict(f.res_attrs.data[i].data)


def output_order(f: func.FuncOp, i: int) -> tuple[tuple[int, ...] | None, bool]:
    """(stride order, is_requirement) of fusion output i; (None, False) when it has none."""
    attrs = _result_attrs(f, i)
    if REQUIRED_ORDER in attrs:
        return tuple(attrs[REQUIRED_ORDER].get_values()), True
    if HINT_ORDER in attrs:
        return tuple(attrs[HINT_ORDER].get_values()), False
    return None, False


def set_output_order(f: func.FuncOp, i: int, order: Sequence[int] | None, required: bool) -> None:
    """Sets (or with None clears) output i's layout. A requirement is never replaced by a hint."""
    n = len(f.function_type.outputs.data)
    all_attrs = [_result_attrs(f, k) for k in range(n)]
    attrs = all_attrs[i]
    if not required and REQUIRED_ORDER in attrs:
        raise ValueError(f"output {i} has a required stride order; a hint cannot replace it")
    attrs.pop(HINT_ORDER, None)
    if required:
        attrs.pop(REQUIRED_ORDER, None)
    if order is not None:
        attrs[REQUIRED_ORDER if required else HINT_ORDER] = DenseArrayBase.from_list(i64, list(order))
    from xdsl.dialects.builtin import ArrayAttr

    f.res_attrs = ArrayAttr([DictionaryAttr(a) for a in all_attrs])


def verify_fusion(f: func.FuncOp) -> None:
    """Checks the fusion-level rules that no single op can: output layouts."""
    for i, t in enumerate(f.function_type.outputs.data):
        attrs = _result_attrs(f, i)
        for key in (REQUIRED_ORDER, HINT_ORDER):
            value = attrs.get(key)
            if value is not None and not (isinstance(value, DenseArrayBase) and value.elt_type == i64):
                raise VerifyException(
                    f"fusion @{f.sym_name.data}: {key} of output {i} must be an array<i64: ...>, got {value}"
                )
        if REQUIRED_ORDER in attrs and HINT_ORDER in attrs:
            raise VerifyException(
                f"fusion @{f.sym_name.data}: output {i} has both a required ({REQUIRED_ORDER}) and a "
                f"hinted ({HINT_ORDER}) stride order; a requirement leaves no room for a hint"
            )
        order, required = output_order(f, i)
        if order is None:
            continue
        kind = "required" if required else "hinted"
        if not isinstance(t, TensorType):
            raise VerifyException(f"fusion @{f.sym_name.data}: output {i} is a scalar but has a {kind} stride order")
        if sorted(order) != list(range(t.rank)):
            raise VerifyException(
                f"fusion @{f.sym_name.data}: {kind} stride order {list(order)} of output {i} is not a "
                f"permutation of its {t.rank} dims ({t.describe()})"
            )
