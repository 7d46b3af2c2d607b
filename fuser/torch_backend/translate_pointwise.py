"""Elementwise ATen ops → fd.ops: unary, binary (with torch's implicit broadcasting and
`alpha`), comparisons, where, casts, clamp, and the identity-like ops (alias, clone)."""

from __future__ import annotations

import torch

from fuser_dialect.values import Tensor
from fuser.torch_backend.dtypes import fuser_dtype
from fuser.torch_backend.op_table import translates

aten = torch.ops.aten

# ATen unary op → fd.ops method of the same meaning.
UNARY = {
    aten.neg.default: "neg", aten.abs.default: "abs", aten.exp.default: "exp", aten.exp2.default: "exp2",
    aten.expm1.default: "expm1", aten.log.default: "log", aten.log2.default: "log2", aten.log1p.default: "log1p",
    aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt", aten.reciprocal.default: "reciprocal",
    aten.relu.default: "relu", aten.sigmoid.default: "sigmoid", aten.tanh.default: "tanh",
    aten.sin.default: "sin", aten.cos.default: "cos", aten.erf.default: "erf", aten.floor.default: "floor",
    aten.ceil.default: "ceil", aten.round.default: "round", aten.trunc.default: "trunc", aten.sign.default: "sign",
    aten.logical_not.default: "logical_not", aten.bitwise_not.default: "bitwise_not",
    aten.isnan.default: "isnan", aten.isinf.default: "isinf",
}

# ATen binary op (Tensor and Scalar overloads) → fd.ops method.
BINARY = {
    "mul": "mul", "div": "div", "pow": "pow", "maximum": "maximum", "minimum": "minimum",
    "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "fmod": "fmod",
    "remainder": "remainder", "atan2": "atan2",
    "logical_and": "logical_and", "logical_or": "logical_or",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
}
BINARY_OVERLOADS = ("Tensor", "Scalar", "Tensor_Scalar", "Tensor_Tensor")


def _binary_targets(name: str):
    """The tensor overloads of an ATen binary op. Its `default` overload is one of them only when
    it takes tensors (maximum, logical_and, atan2); for mul, eq, fmod... `default` is the
    Python-number overload of SymInt arithmetic."""
    packet = getattr(aten, name)
    targets = [getattr(packet, o) for o in BINARY_OVERLOADS if o in packet.overloads()]
    if "default" in packet.overloads() and _takes_tensors(packet.default):
        targets.append(packet.default)
    return targets


def _takes_tensors(overload) -> bool:
    return isinstance(overload._schema.arguments[0].type, torch._C.TensorType)


def _rank(node: torch.fx.Node) -> int:
    return node.meta["val"].dim()


def _operands(tx, node) -> list:
    """The two operands; when both are Python numbers (a scalar_tensor the trace folded to a
    number), the first becomes a 0-d tensor of its Python type's dtype (as torch.tensor(a)), as
    the result is a tensor; torch's promotion of a 0-d tensor with a number then applies."""
    a, b = tx.value(node.args[0]), tx.value(node.args[1])
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = tx.tensor(node.args[0])
    return [a, b]


def _make_unary(method: str):
    def build(tx, node):
        return getattr(tx.ops, method)(tx.tensor(node.args[0]))

    build.__name__ = f"translate_{method}"
    return build


# torch divides (and raises to powers) integer tensors in floating point; fuser, like C,
# would divide integers: the operands are converted to the traced result dtype first.
TRUE_FLOAT_OPS = {"div", "pow"}


def _make_binary(method: str):
    def build(tx, node):
        a, b = tx.aligned(_operands(tx, node), _rank(node))
        out_dtype = node.meta["val"].dtype
        if method in TRUE_FLOAT_OPS and out_dtype.is_floating_point:
            a, b = (tx.ops.cast(v, fuser_dtype(out_dtype)) if isinstance(v, Tensor) else v for v in (a, b))
        return getattr(tx.ops, method)(a, b)

    build.__name__ = f"translate_{method}"
    return build


for _target, _method in UNARY.items():
    translates(_target)(_make_unary(_method))
for _name, _method in BINARY.items():
    translates(*_binary_targets(_name))(_make_binary(_method))


@translates(aten.div.Tensor_mode, aten.div.Scalar_mode)
def translate_div_mode(tx, node):
    """torch.div(a, b, rounding_mode=None | "trunc" | "floor"): floats divide and round; integers
    divide exactly in C (truncating), and "floor" moves a negative inexact quotient down."""
    a, b = tx.aligned(_operands(tx, node), _rank(node))
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    out_dtype = node.meta["val"].dtype
    if mode is None or out_dtype.is_floating_point:
        # Eager floors the f32 quotient of 16-bit floats, but truncates the quotient rounded to
        # 16 bits (ATen's CPU kernels; rounding first can move a floor across an integer).
        compute = torch.float32 if mode == "floor" and out_dtype.itemsize < 4 else out_dtype
        a, b = (tx.ops.cast(v, fuser_dtype(compute)) if isinstance(v, Tensor) else v for v in (a, b))
        quotient = tx.ops.div(a, b)
        if mode is None:
            return quotient
        rounded = getattr(tx.ops, mode)(quotient)
        return rounded if compute == out_dtype else tx.ops.cast(rounded, fuser_dtype(out_dtype))
    quotient = tx.ops.div(a, b)  # C's: truncates
    if mode == "trunc":
        return quotient
    inexact = tx.ops.ne(tx.ops.mul(quotient, b), a)
    a_negative, b_negative = (tx.ops.lt(v, 0) if isinstance(v, Tensor) else v < 0 for v in (a, b))
    if isinstance(a_negative, bool) and isinstance(b_negative, bool):
        negative = a_negative != b_negative
    elif isinstance(a_negative, bool) or isinstance(b_negative, bool):
        known, tensor = (a_negative, b_negative) if isinstance(a_negative, bool) else (b_negative, a_negative)
        negative = tx.ops.logical_not(tensor) if known else tensor
    else:
        negative = tx.ops.ne(a_negative, b_negative)
    if negative is False:
        return quotient
    down = inexact if negative is True else tx.ops.logical_and(inexact, negative)
    return tx.ops.where(down, tx.ops.sub(quotient, 1), quotient)


@translates(aten.logical_xor.default)
def translate_logical_xor(tx, node):
    a, b = tx.aligned([tx.value(node.args[0]), tx.value(node.args[1])], _rank(node))
    as_bool = [tx.ops.ne(v, 0) if isinstance(v, Tensor) else bool(v) for v in (a, b)]
    return tx.ops.ne(*as_bool)


@translates(aten.copy.default)
def translate_copy(tx, node):
    """copy(self, src): src's values in self's shape and dtype (a functionalized `copy_`)."""
    target = node.args[0].meta["val"]
    src = tx.broadcast_to_rank(tx.tensor(node.args[1]), target.dim())
    self_value = tx.tensor(node.args[0])
    shape = [tx.extent(self_value, d) for d in range(self_value.ndim)]
    if any(src.type.static_extent(d) == 1 and self_value.type.static_extent(d) != 1 for d in range(src.ndim)):
        src = tx.ops.expand(src, shape)
    return tx.ops.cast(src, fuser_dtype(target.dtype))


def _add_or_sub(tx, node, method: str):
    """a ± alpha * b (alpha defaults to 1, so it costs nothing then)."""
    a, b = tx.aligned([tx.value(node.args[0]), tx.value(node.args[1])], _rank(node))
    alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
    if alpha != 1:
        b = tx.ops.mul(b, alpha) if isinstance(b, Tensor) else b * alpha
    return getattr(tx.ops, method)(a, b)


@translates(aten.add.Tensor, aten.add.Scalar)
def translate_add(tx, node):
    return _add_or_sub(tx, node, "add")


@translates(aten.sub.Tensor, aten.sub.Scalar)
def translate_sub(tx, node):
    return _add_or_sub(tx, node, "sub")


@translates(aten.rsub.Scalar, aten.rsub.Tensor)
def translate_rsub(tx, node):
    a, b = tx.aligned([tx.value(node.args[0]), tx.value(node.args[1])], _rank(node))
    return tx.ops.sub(b, a)


@translates(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def translate_where(tx, node):
    cond, x, y = tx.aligned([tx.value(a) for a in node.args[:3]], _rank(node))
    return tx.ops.where(cond, x, y)


def _clamp_check(node):
    meta = node.meta["val"]
    return None if meta.dtype.is_floating_point or meta.dtype == torch.int64 else f"clamp of {meta.dtype}"


@translates(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default, check=_clamp_check)
def translate_clamp(tx, node):
    x = tx.tensor(node.args[0])
    if node.target == aten.clamp_max.default:
        lo, hi = None, node.args[1]
    elif node.target == aten.clamp_min.default:
        lo, hi = node.args[1], None
    else:
        lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
        hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    if lo is not None:
        x = tx.ops.maximum(x, tx.value(lo))
    if hi is not None:
        x = tx.ops.minimum(x, tx.value(hi))
    return x


def _to_copy_check(node):
    src = node.args[0].meta.get("val")
    out = node.meta["val"]
    if src is not None and src.device != out.device:
        return f"_to_copy across devices ({src.device} → {out.device})"
    return None


@translates(aten._to_copy.default, check=_to_copy_check)
def translate_to_copy(tx, node):
    """A dtype conversion (same device); the layout is the region output's business."""
    return tx.ops.cast(tx.tensor(node.args[0]), fuser_dtype(node.meta["val"].dtype))


@translates(torch.ops.prims.convert_element_type.default)
def translate_convert_element_type(tx, node):
    return tx.ops.cast(tx.tensor(node.args[0]), fuser_dtype(node.args[1]))


@translates(aten.alias.default, aten.clone.default, aten.lift_fresh_copy.default, non_compute=True)
def translate_identity(tx, node):
    """Values, not storage, flow through a fusion: an alias or a copy is the value itself."""
    return tx.tensor(node.args[0])
