"""`FusionDefinition`: nvFuser's Python frontend, building fuser-dialect IR.

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))

IR is built directly (no parsing); `print(fd)` shows it as MLIR that fuser-opt reads.
Executing a definition is the public package's job: `fuser.FusionDefinition` is this
builder plus `execute`, and this module imports nothing above the dialect.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, Float64Type, FloatAttr, IntegerAttr, ModuleOp, i1, i64
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.printer import Printer

from fuser_dialect.fusion import HINT_ORDER, REQUIRED_ORDER, verify_fusion
from fuser_dialect.types import BROADCAST, DYNAMIC, INT64_MAX, DataType, TensorType, dtype_name


class Scalar:
    """A scalar value of the fusion (an input, a constant, or a size)."""

    def __init__(self, fd: FusionDefinition, value: SSAValue):
        self.fd = fd
        self.value = value

    @property
    def dtype(self) -> str:
        return dtype_name(self.value.type)

    def _arith(self, other: object, int_op: type[Operation], float_op: type[Operation] | None, reverse=False):
        if isinstance(other, Tensor):
            return NotImplemented  # scalar (op) tensor is a tensor op: Tensor's reflected method
        rhs = self.fd._scalar(other, self.value.type)
        lhs, rhs = (rhs, self) if reverse else (self, rhs)
        is_int = self.dtype in ("i64", "i32")
        op_type = int_op if is_int else float_op
        if op_type is None:
            raise TypeError(f"operation not supported on {self.dtype} scalars")
        return Scalar(self.fd, self.fd._append(op_type(lhs.value, rhs.value)).results[0])

    def __add__(self, o): return self._arith(o, arith.AddiOp, arith.AddfOp)
    def __radd__(self, o): return self._arith(o, arith.AddiOp, arith.AddfOp, reverse=True)
    def __sub__(self, o): return self._arith(o, arith.SubiOp, arith.SubfOp)
    def __rsub__(self, o): return self._arith(o, arith.SubiOp, arith.SubfOp, reverse=True)
    def __mul__(self, o): return self._arith(o, arith.MuliOp, arith.MulfOp)
    def __rmul__(self, o): return self._arith(o, arith.MuliOp, arith.MulfOp, reverse=True)
    def __floordiv__(self, o): return self._arith(o, arith.FloorDivSIOp, None)
    def __truediv__(self, o): return self._arith(o, arith.DivSIOp, arith.DivfOp)

    def __neg__(self):
        return self.fd._scalar(0, self.value.type) - self

    def __repr__(self) -> str:
        return f"Scalar({self.dtype})"


class Tensor:
    """A tensor value of the fusion; arithmetic operators map to `fd.ops`."""

    def __init__(self, fd: FusionDefinition, value: SSAValue):
        self.fd = fd
        self.value = value

    @property
    def type(self) -> TensorType:
        t = self.value.type
        assert isinstance(t, TensorType)
        return t

    @property
    def ndim(self) -> int:
        return self.type.rank

    @property
    def dtype(self) -> DataType:
        return DataType(self.type.dtype)

    def size(self, dim: int) -> Scalar:
        return self.fd.ops.size(self, dim)

    def shape(self) -> list[Scalar]:
        return [self.size(d) for d in range(self.ndim)]

    def __repr__(self) -> str:
        return f"Tensor({self.type.describe()})"

    def __add__(self, o): return self.fd.ops.add(self, o)
    def __radd__(self, o): return self.fd.ops.add(o, self)
    def __sub__(self, o): return self.fd.ops.sub(self, o)
    def __rsub__(self, o): return self.fd.ops.sub(o, self)
    def __mul__(self, o): return self.fd.ops.mul(self, o)
    def __rmul__(self, o): return self.fd.ops.mul(o, self)
    def __truediv__(self, o): return self.fd.ops.div(self, o)
    def __rtruediv__(self, o): return self.fd.ops.div(o, self)
    def __neg__(self): return self.fd.ops.neg(self)
    def __lt__(self, o): return self.fd.ops.lt(self, o)
    def __le__(self, o): return self.fd.ops.le(self, o)
    def __gt__(self, o): return self.fd.ops.gt(self, o)
    def __ge__(self, o): return self.fd.ops.ge(self, o)


def static_int(value: object, what: str) -> int:
    """`value` as a Python int that fits the kernels' 64-bit index arithmetic."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} = {value!r}: expected an int")
    if not -INT64_MAX - 1 <= int(value) <= INT64_MAX:
        raise ValueError(f"{what} = {int(value)} does not fit in 64 bits (|value| < 2**63)")
    return int(value)


def _dims_from_shape(shape: Sequence[int], name: str = "shape") -> list[int]:
    dims = []
    for i, s in enumerate(shape):
        if s == -1:
            dims.append(DYNAMIC)
        elif s == 1:
            dims.append(BROADCAST)
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and (s > 1 or s == 0):
            dims.append(static_int(s, f"{name}[{i}]"))
        else:
            raise ValueError(f"{name}[{i}] = {s}: use -1 (dynamic), 1 (broadcast) or a static extent > 1")
    return dims


def _normalize_order(stride_order: Sequence[int] | None, rank: int, what: str) -> tuple[int, ...] | None:
    if stride_order is None:
        return None
    order = tuple(stride_order)
    if sorted(order) != list(range(rank)):
        raise ValueError(f"{what}: stride_order {list(order)} is not a permutation of range({rank})")
    return None if order == tuple(range(rank - 1, -1, -1)) else order


class FusionDefinition:
    """Defines one fusion (IR only). Use as a context manager; `fuser.FusionDefinition` executes it."""

    def __init__(self, name: str = "fusion"):
        from fuser_dialect.builder_ops import Ops

        self.name = name
        self.block = Block()
        self.ops = Ops(self)
        self._outputs: list[tuple[SSAValue, tuple[int, ...] | None]] = []
        self._module: ModuleOp | None = None

    # -- definition ------------------------------------------------------
    def __enter__(self) -> FusionDefinition:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._finalize()

    def _append(self, op: Operation) -> Operation:
        if self._module is not None:
            raise RuntimeError("the fusion is already defined; ops cannot be added after the `with` block")
        for i, v in enumerate(op.operands):
            self._check_own(v, f"operand #{i} of {op.name}")
        self.block.add_op(op)
        return op

    def _check_own(self, v: SSAValue, what: str) -> None:
        block = v.block if isinstance(v, BlockArgument) else v.owner.parent_block()  # type: ignore[union-attr]
        if block is not self.block:
            raise ValueError(f"{what} was defined in another FusionDefinition: tensors and scalars "
                             "belong to the definition that created them")

    def define_tensor(
        self,
        shape: Sequence[int],
        contiguity: Sequence[bool | None] | bool | None = None,
        dtype: DataType = DataType.Float,
        stride_order: Sequence[int] | None = None,
    ) -> Tensor:
        """A tensor input. shape: -1 dynamic, 1 broadcast, >1 static. stride_order[i] ranks dim i
        (0 = fastest). contiguity is accepted for nvFuser compatibility: inputs that are not
        dense in their stride order are made dense by `execute` (a copy)."""
        dims = _dims_from_shape(shape)
        order = _normalize_order(stride_order, len(dims), f"define_tensor #{len(self.block.args)}")
        t = TensorType(DataType(dtype).element_type, dims, order or ())
        return Tensor(self, self.block.insert_arg(t, len(self.block.args)))

    def define_scalar(self, value: float | int | bool | None = None, dtype: DataType | None = None) -> Scalar:
        """A scalar input (value=None) or a constant."""
        if value is None:
            t = DataType(dtype or DataType.Double).element_type
            return Scalar(self, self.block.insert_arg(t, len(self.block.args)))
        if dtype is None:
            dtype = DataType.Bool if isinstance(value, bool) else DataType.Int if isinstance(value, int) else DataType.Double
        return self._scalar(value, DataType(dtype).element_type)

    def _scalar(self, value: object, t: Attribute) -> Scalar:
        """A Python number as a constant of type t (scalars pass through)."""
        if isinstance(value, Scalar):
            return value
        if isinstance(value, Tensor):
            raise TypeError(f"expected a scalar, got {value!r}")
        name = dtype_name(t)
        if name in ("f16", "bf16", "f32"):
            t, name = Float64Type(), "f64"
        if name == "i1":
            attr = IntegerAttr(int(bool(value)), i1)
        elif name in ("i64", "i32"):
            attr = IntegerAttr(int(value), t)
        else:
            attr = FloatAttr(float(value), t)
        return Scalar(self, self._append(arith.ConstantOp(attr)).results[0])

    def add_output(self, t: Tensor | Scalar, stride_order: Sequence[int] | None = None) -> None:
        """Marks t as a fusion output; stride_order is a REQUIREMENT on its layout."""
        if stride_order is not None:
            if not isinstance(t, Tensor):
                raise TypeError("stride_order applies to tensor outputs only")
            if sorted(stride_order) != list(range(t.ndim)):
                raise ValueError(f"add_output: stride_order {list(stride_order)} is not a permutation of range({t.ndim})")
        self._check_own(t.value, f"add_output #{len(self._outputs)}")
        self._outputs.append((t.value, tuple(stride_order) if stride_order is not None else None))

    def _finalize(self) -> None:
        if not self._outputs:
            raise ValueError("the fusion has no outputs: call fd.add_output(...)")
        self.block.add_op(func.ReturnOp(*[v for v, _ in self._outputs]))
        inputs = [a.type for a in self.block.args]
        outputs = [v.type for v, _ in self._outputs]
        res_attrs = None  # none at all rather than all-empty: prints (and re-parses) the same
        if any(o is not None for _, o in self._outputs):
            res_attrs = ArrayAttr([
                DictionaryAttr({REQUIRED_ORDER: _order_attr(o)} if o is not None else {}) for _, o in self._outputs
            ])
        f = func.FuncOp(self.name, (inputs, outputs), Region(self.block), res_attrs=res_attrs)
        self._module = ModuleOp([f])
        self._module.verify()
        verify_fusion(f)

    # -- access ----------------------------------------------------------
    @property
    def module(self) -> ModuleOp:
        if self._module is None:
            raise RuntimeError("the fusion is not finished: leave the `with FusionDefinition()` block first")
        return self._module

    @property
    def fusion(self) -> func.FuncOp:
        op = self.module.ops.first
        assert isinstance(op, func.FuncOp)
        return op

    def __str__(self) -> str:
        stream = io.StringIO()
        Printer(stream=stream).print_op(self.module)
        return stream.getvalue()


def _order_attr(order: Sequence[int]):
    from xdsl.dialects.builtin import DenseArrayBase

    return DenseArrayBase.from_list(i64, list(order))


__all__ = ["FusionDefinition", "DataType", "Tensor", "Scalar", "HINT_ORDER"]
