"""Elementwise ops (unary, binary, where, cast) and reductions.

Binary and where operands are tensors or scalars (builtin f64/f32/i64/i32/i1 SSA values);
tensor operands share one rank and dtype (the builder inserts casts for promotion), and
broadcast dims broadcast. Comparisons and logical ops yield i1."""

from __future__ import annotations

from enum import auto

from xdsl.dialects.builtin import DenseArrayBase, UnitAttr, i64
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from fuser_dialect import shape_rules as rules
from fuser_dialect.canonicalization import CastCanonicalization
from fuser_dialect.op_base import check_result, tensor_type
from fuser_dialect.types import FLOAT_DTYPES, TensorType, dtype_name, is_scalar_type


class UnaryKind(StrEnum):
    NEG = auto()
    ABS = auto()
    EXP = auto()
    EXP2 = auto()
    EXPM1 = auto()
    LOG = auto()
    LOG2 = auto()
    LOG1P = auto()
    SQRT = auto()
    RSQRT = auto()
    RECIPROCAL = auto()
    RELU = auto()
    SIGMOID = auto()
    TANH = auto()
    SIN = auto()
    COS = auto()
    ERF = auto()
    FLOOR = auto()
    CEIL = auto()
    ROUND = auto()
    TRUNC = auto()
    SIGN = auto()
    LOGICAL_NOT = auto()
    BITWISE_NOT = auto()
    ISNAN = auto()
    ISINF = auto()


FLOAT_ONLY_UNARY = {
    UnaryKind.EXP, UnaryKind.EXP2, UnaryKind.EXPM1, UnaryKind.LOG, UnaryKind.LOG2, UnaryKind.LOG1P,
    UnaryKind.SQRT, UnaryKind.RSQRT, UnaryKind.RECIPROCAL, UnaryKind.SIGMOID, UnaryKind.TANH,
    UnaryKind.SIN, UnaryKind.COS, UnaryKind.ERF,
}
BOOL_RESULT_UNARY = {UnaryKind.LOGICAL_NOT, UnaryKind.ISNAN, UnaryKind.ISINF}


class BinaryKind(StrEnum):
    ADD = auto()
    SUB = auto()
    MUL = auto()
    DIV = auto()
    POW = auto()
    FMOD = auto()
    MAXIMUM = auto()
    MINIMUM = auto()
    EQ = auto()
    NE = auto()
    LT = auto()
    LE = auto()
    GT = auto()
    GE = auto()
    LOGICAL_AND = auto()
    LOGICAL_OR = auto()
    BITWISE_AND = auto()
    BITWISE_OR = auto()
    BITWISE_XOR = auto()


BOOL_RESULT_BINARY = {
    BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT, BinaryKind.LE, BinaryKind.GT, BinaryKind.GE,
    BinaryKind.LOGICAL_AND, BinaryKind.LOGICAL_OR,
}


class ReductionKind(StrEnum):
    SUM = auto()
    PROD = auto()
    MAX = auto()
    MIN = auto()


@irdl_attr_definition
class UnaryKindAttr(EnumAttribute[UnaryKind], SpacedOpaqueSyntaxAttribute):
    name = "fuser.unary_kind"


@irdl_attr_definition
class BinaryKindAttr(EnumAttribute[BinaryKind], SpacedOpaqueSyntaxAttribute):
    name = "fuser.binary_kind"


@irdl_attr_definition
class ReductionKindAttr(EnumAttribute[ReductionKind], SpacedOpaqueSyntaxAttribute):
    name = "fuser.reduction_kind"


def _dtype(value: SSAValue) -> str:
    """'f32', 'i1', ... of a tensor or scalar; the type itself when it has no fuser dtype."""
    t = value.type
    if isinstance(t, TensorType):
        return t.dtype
    return dtype_name(t) if is_scalar_type(t) else str(t)


def _tensor_operands(op: IRDLOperation, operands: list[tuple[str, SSAValue]]) -> list[TensorType]:
    tensors = []
    for what, v in operands:
        if isinstance(v.type, TensorType):
            tensors.append(v.type)
        elif not is_scalar_type(v.type):
            raise VerifyException(f"{op.name}: {what} must be a tensor or a scalar, got {v.type}")
    if not tensors:
        raise VerifyException(f"{op.name}: at least one operand must be a tensor (use arith for scalars)")
    return tensors


@irdl_op_definition
class UnaryOp(IRDLOperation):
    name = "fuser.unary"
    kind = prop_def(UnaryKindAttr)
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$kind $input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, kind: UnaryKind, input: SSAValue, result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type], properties={"kind": UnaryKindAttr(kind)})

    @property
    def op_kind(self) -> UnaryKind:
        return self.kind.data

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        if self.op_kind in FLOAT_ONLY_UNARY and t.dtype not in FLOAT_DTYPES:
            raise VerifyException(f"{self.name} {self.op_kind}: needs a floating-point input, got {t.dtype}")
        check_result(self, t.shape, "i1" if self.op_kind in BOOL_RESULT_UNARY else t.dtype, f"{self.name} {self.op_kind}")


@irdl_op_definition
class BinaryOp(IRDLOperation):
    name = "fuser.binary"
    kind = prop_def(BinaryKindAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$kind $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)"

    def __init__(self, kind: BinaryKind, lhs: SSAValue, rhs: SSAValue, result_type: TensorType):
        super().__init__(operands=[lhs, rhs], result_types=[result_type], properties={"kind": BinaryKindAttr(kind)})

    @property
    def op_kind(self) -> BinaryKind:
        return self.kind.data

    def verify_(self) -> None:
        tensors = _tensor_operands(self, [("lhs", self.lhs), ("rhs", self.rhs)])
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) != 1:
            raise VerifyException(
                f"{self.name} {self.op_kind}: tensor operands have dtypes {_dtype(self.lhs)} and "
                f"{_dtype(self.rhs)}; cast one of them first"
            )
        dims = rules.elementwise(f"{self.name} {self.op_kind}", tensors)
        dtype = "i1" if self.op_kind in BOOL_RESULT_BINARY else tensors[0].dtype
        check_result(self, dims, dtype, f"{self.name} {self.op_kind}")


@irdl_op_definition
class WhereOp(IRDLOperation):
    """where(cond, x, y): x where cond is true, else y."""

    name = "fuser.where"
    cond = operand_def()
    lhs = operand_def()
    rhs = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$cond `,` $lhs `,` $rhs attr-dict `:` `(` type($cond) `,` type($lhs) `,` type($rhs) `)` `->` type($result)"
    )

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue, result_type: TensorType):
        super().__init__(operands=[cond, lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        tensors = _tensor_operands(self, [("condition", self.cond), ("lhs", self.lhs), ("rhs", self.rhs)])
        if _dtype(self.cond) != "i1":
            raise VerifyException(f"{self.name}: condition must have dtype i1, got {_dtype(self.cond)}")
        value_tensors = [v.type for v in (self.lhs, self.rhs) if isinstance(v.type, TensorType)]
        dtypes = {t.dtype for t in value_tensors}
        if len(dtypes) > 1:
            raise VerifyException(
                f"{self.name}: values have dtypes {_dtype(self.lhs)} and {_dtype(self.rhs)}; cast one of them first"
            )
        dtype = value_tensors[0].dtype if value_tensors else self.result.type.dtype
        dims = rules.elementwise(self.name, tensors)
        check_result(self, dims, dtype)


@irdl_op_definition
class CastOp(IRDLOperation):
    name = "fuser.cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), CastCanonicalization())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type])

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        result = tensor_type(self, self.result, "result")
        check_result(self, t.shape, result.dtype)


@irdl_op_definition
class ReductionOp(IRDLOperation):
    """sum/prod/max/min over `dims`; keepdim leaves broadcast dims in their place.
    f16/bf16 inputs accumulate in f32 and round once at the end."""

    name = "fuser.reduction"
    kind = prop_def(ReductionKindAttr)
    input = operand_def(TensorType)
    dims = prop_def(DenseArrayBase.constr(i64))
    keepdim = opt_prop_def(UnitAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$kind $input `dims` $dims (`keepdim` $keepdim^)? attr-dict `:` type($input) `->` type($result)"

    def __init__(self, kind: ReductionKind, input: SSAValue, dims: list[int], keepdim: bool, result_type: TensorType):
        props = {"kind": ReductionKindAttr(kind), "dims": DenseArrayBase.from_list(i64, sorted(dims))}
        if keepdim:
            props["keepdim"] = UnitAttr()
        super().__init__(operands=[input], result_types=[result_type], properties=props)

    @property
    def op_kind(self) -> ReductionKind:
        return self.kind.data

    @property
    def reduced_dims(self) -> tuple[int, ...]:
        return self.dims.get_values()

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        label = f"{self.name} {self.op_kind}"
        dims = rules.reduction(label, t, self.reduced_dims, self.keepdim is not None)
        check_result(self, dims, t.dtype, label)
