"""`FusionBuilder`: nvFuser's Python frontend, building fuser-dialect IR.

    with FusionBuilder() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))

IR is built directly (no parsing); `print(fd)` shows it as MLIR that fuser-opt reads.
Executing a definition is the public package's job: `fuser.FusionDefinition` is this
builder plus `execute`, and this module imports nothing above the dialect.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence

import numpy as np

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, Float64Type, FloatAttr, IntegerAttr, ModuleOp, i1, i64
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.printer import Printer

from fuser_dialect.errors import FuserRangeError, reports_errors
from fuser_dialect.fusion import HINT_ORDER, REQUIRED_ORDER, verify_fusion
from fuser_dialect.builder_ops import Ops
from fuser_dialect.inputs import torch_dtype_name
from fuser_dialect.promotion import scalar_dtype_of
from fuser_dialect.scalar_ops import ScalarBuilder
from fuser_dialect.types import BROADCAST, COMPLEX_DTYPES, DYNAMIC, INT64_MAX, DataType, TensorType, dtype_name
from fuser_dialect.values import Scalar, Tensor, Vector, static_int


def _dims_from_shape(shape: Sequence[int], name: str = "shape") -> list[int]:
    dims = []
    for i, s in enumerate(shape):
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{name}[{i}] = {s!r}: expected an int (-1 dynamic, 1 broadcast, 0 or > 1 static)")
        if not -1 <= s <= INT64_MAX:  # as nvFuser's: the value -2 "was neither symbolic(-1), zero_element(0), ..."
            if s > INT64_MAX:  # a ValueError, and a TypeError as nvFuser's bindings refuse it
                raise FuserRangeError(f"{name}[{i}] = {s} does not fit in 64 bits (|value| < 2**63)")
            raise ValueError(f"{name}[{i}] = {s}: use -1 (dynamic), 1 (broadcast), 0 (empty) or a static extent > 1")
        dims.append(DYNAMIC if s == -1 else BROADCAST if s == 1 else int(s))
    return dims


def _check_contiguity(contiguity: object, rank: int) -> None:
    """nvFuser's contiguity: None, a bool for every dim, or one per dim (bools or None). A DataType
    there is a dtype given positionally to the wrong parameter (the second is contiguity)."""
    if contiguity is None or isinstance(contiguity, bool):
        return
    if isinstance(contiguity, DataType):
        raise TypeError(f"define_tensor: the second argument is contiguity, got {contiguity}; pass the dtype as "
                        f"dtype={contiguity} (nvFuser's order: shape, contiguity, dtype)")
    if not isinstance(contiguity, (list, tuple)) or not all(c is None or isinstance(c, bool) for c in contiguity):
        raise TypeError(f"define_tensor: contiguity must be None, a bool or one bool (or None) per dim, "
                        f"got {contiguity!r}")
    if len(contiguity) != rank:
        raise ValueError(f"define_tensor: contiguity {list(contiguity)} has {len(contiguity)} entries for "
                         f"{rank} dims")


def _normalize_order(stride_order: Sequence[int] | None, rank: int, what: str) -> tuple[int, ...] | None:
    if stride_order is None:
        return None
    order = tuple(stride_order)
    if sorted(order) != list(range(rank)):
        raise ValueError(f"{what}: stride_order {list(order)} is not a permutation of range({rank})")
    return None if order == tuple(range(rank - 1, -1, -1)) else order


class FusionBuilder:
    """Builds one fusion's IR, with nvFuser's frontend API. `fuser.FusionDefinition` is this
    builder plus `execute`, and the only FusionDefinition; use that one."""

    def __init__(self, name: str = "fusion"):
        self.name = name
        self.block = Block()
        self.ops = Ops(self)
        self.scalars = ScalarBuilder(self)
        """Arithmetic on Scalars alone (arith ops; fd.ops routes scalar-only calls here)."""
        self._outputs: list[tuple[SSAValue, tuple[int, ...] | None]] = []
        self._module: ModuleOp | None = None
        self.vector_inputs: dict[int, int] = {}
        """Argument index of a `define_vector(size)` input's first element -> its size
        (`execute` takes its ints as separate inputs, or as one list in their place)."""
        self.aliases: dict[int, int] = {}
        """Output position -> the argument index whose buffer it is written into (alias_input)."""
        self.stride_orders: dict[SSAValue, tuple[int, ...]] = {}
        """Values made by fd.ops.stride_order -> their order: a requirement when one is an output."""

    # -- definition ------------------------------------------------------
    def __enter__(self) -> FusionBuilder:
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
        shape: Sequence[int] | None = None,
        contiguity: Sequence[bool | None] | bool | None = None,
        dtype: DataType = DataType.Float,
        stride_order: Sequence[int] | None = None,
        *,
        sizes: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        static_sizes: bool = False,
        is_cpu: bool = False,
    ) -> Tensor:
        """A tensor input. shape: -1 dynamic, 1 broadcast, >1 static. stride_order[i] ranks dim i
        (0 = fastest). contiguity is accepted for nvFuser compatibility: inputs that are not
        dense in their stride order are made dense by `execute` (a copy).

        nvFuser's other spelling: `sizes` and `strides` of an example tensor. Sizes of 1 become
        broadcast dims, the others dynamic (static with static_sizes=True); the stride order is
        read from the strides. is_cpu is accepted for compatibility (every input is host memory
        or a device tensor alike here)."""
        if sizes is not None or strides is not None:
            if shape is not None or stride_order is not None:
                raise ValueError("define_tensor: give either shape/stride_order or sizes/strides, not both")
            shape, stride_order = shape_from_sizes(sizes, strides, static_sizes)
        if shape is None:
            raise TypeError("define_tensor: missing `shape` (or `sizes` and `strides`)")
        _check_contiguity(contiguity, len(shape))
        dims = _dims_from_shape(shape)
        order = _normalize_order(stride_order, len(dims), f"define_tensor #{len(self.block.args)}")
        t = TensorType(DataType(dtype).element_type, dims, order or ())
        return Tensor(self, self.block.insert_arg(t, len(self.block.args)))

    def from_pytorch(self, tensor, static_sizes: bool = False) -> Tensor:
        """An input shaped like the torch tensor `tensor`: its dtype, rank, broadcast (extent-1)
        dims and stride order; extents dynamic unless static_sizes."""
        if not (hasattr(tensor, "stride") and hasattr(tensor, "dtype") and hasattr(tensor, "size")):
            raise TypeError(f"from_pytorch: expected a torch.Tensor, got {type(tensor).__name__}")
        name = torch_dtype_name(tensor.dtype)
        if name is None:
            raise TypeError(f"from_pytorch: torch dtype {tensor.dtype} has no fuser DataType "
                            f"(supported: {', '.join(d.name for d in DataType)})")
        return self.define_tensor(sizes=tuple(tensor.size()), strides=tuple(tensor.stride()),
                                  dtype=DataType(name), static_sizes=static_sizes)

    def define_vector(self, values: Sequence[int | Scalar] | int, dtype: DataType = DataType.Int) -> Vector:
        """nvFuser's Vector of Int scalars: from a list of ints and Scalars (constants where
        ints), or with an int `size`, `size` Int inputs (`execute` takes them as that many
        separate inputs, as nvFuser does, or as one list)."""
        if DataType(dtype) != DataType.Int:
            raise TypeError(f"define_vector: dtype must be DataType.Int (a vector of extents), got {dtype}")
        if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
            size = static_int(values, "define_vector: size")
            if size < 0:
                raise ValueError(f"define_vector: size {size} is negative")
            first = len(self.block.args)
            self.vector_inputs[first] = size
            return Vector(Scalar(self, self.block.insert_arg(i64, first + k)) for k in range(size))
        if not isinstance(values, Sequence):
            raise TypeError(f"define_vector: expected a list of ints/Scalars or a size, got {type(values).__name__}")
        for k, v in enumerate(values):
            if not isinstance(v, Scalar) and static_int(v, f"define_vector: values[{k}]") < -1:
                raise ValueError(f"define_vector: values[{k}] = {v} is neither -1 (symbolic: reshape infers it), 0 "
                                 "(an empty dim), 1 (a broadcast dim) nor a static extent > 1")
        return Vector(self._scalar(v if isinstance(v, Scalar) else static_int(v, f"define_vector: values[{k}]"), i64)
                      for k, v in enumerate(values))

    def define_scalar(self, value: float | int | bool | DataType | None = None,
                      dtype: DataType | None = None) -> Scalar:
        """A scalar input (value=None, or a DataType given in value's place as nvFuser's
        `define_scalar(DataType.Int)`) or a constant. A complex value or dtype makes a complex
        Scalar (see _complex_scalar: a 0-d complex tensor underneath)."""
        if isinstance(value, DataType):
            if dtype is not None:
                raise TypeError(f"define_scalar: got the dtype twice ({value} in value's place and dtype={dtype})")
            value, dtype = None, value
        complex_dtype = dtype is not None and DataType(dtype).value in COMPLEX_DTYPES
        if isinstance(value, (complex, np.complexfloating)) or complex_dtype:
            return self._complex_scalar(value, dtype)
        if value is None:
            t = DataType(dtype or DataType.Double).element_type
            return Scalar(self, self.block.insert_arg(t, len(self.block.args)))
        if dtype is None:
            dtype = DataType(scalar_dtype_of(value))  # the one rule Python number operands follow too
        return self._scalar(value, DataType(dtype).element_type)

    def _complex_scalar(self, value: complex | float | int | None, dtype: DataType | None) -> Scalar:
        """A complex Scalar (ComplexDouble unless `dtype` says ComplexFloat), carried as a 0-d
        complex tensor: an input (`execute` takes a Python complex for it) or a constant."""
        name = DataType(dtype or DataType.ComplexDouble).value
        if name not in COMPLEX_DTYPES:
            raise TypeError(f"define_scalar({value!r}, dtype={dtype}): a complex value needs a complex dtype "
                            "(DataType.ComplexFloat or DataType.ComplexDouble)")
        t = TensorType(name, [])
        if value is None:
            return Scalar(self, self.block.insert_arg(t, len(self.block.args)))
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, complex, np.number)):
            raise TypeError(f"define_scalar: a complex constant must be a number, got {type(value).__name__}")
        from xdsl.dialects import complex as cplx

        from fuser_dialect.ops_factory import FullOp

        z = complex(value)
        parts = self._append(cplx.ConstantOp.from_floats((z.real, z.imag), Float64Type())).results[0]
        return Scalar(self, self._append(FullOp([], parts, t)).results[0])

    def _scalar(self, value: object, t: Attribute) -> Scalar:
        """A Python number as a constant of type t (scalars pass through)."""
        if isinstance(value, Scalar):
            return value if value.value.type == t or t != i64 else self._as_index(value)
        if isinstance(value, Tensor):
            raise TypeError(f"expected a scalar, got {value!r}")
        name = declared = dtype_name(t)
        if name in ("f16", "bf16", "f32"):
            t, name = Float64Type(), "f64"
        if name == "i1":
            attr = IntegerAttr(int(bool(value)), i1)
        elif name in ("i64", "i32"):
            attr = IntegerAttr(int(value), t)
        else:
            attr = FloatAttr(float(value), t)
        return Scalar(self, self._append(arith.ConstantOp(attr)).results[0], declared if declared != name else None)

    def _as_index(self, value: Scalar) -> Scalar:
        """An integer or bool Scalar as i64 (what extents, widths and bounds are)."""
        if value.dtype not in ("i32", "i1"):
            raise TypeError(f"expected an integer scalar (an extent, width or index), got a {value.dtype} Scalar")
        return self.scalars.cast(value, DataType.Int)

    def add_output(self, output: Tensor | Scalar, alias_input: Tensor | Sequence[int] | None = None,
                   stride_order: Sequence[int] | None = None) -> None:
        """Marks `output` as a fusion output, with nvFuser's signatures: add_output(output,
        alias_input=None) and add_output(output, stride_order) — a list in alias_input's place
        is a stride order. stride_order is a REQUIREMENT on the output's layout.
        alias_input: an input tensor whose buffer receives the output (an in-place update,
        written after every output is computed); as in nvFuser, such an output is not returned
        by `execute`, and the input, if it is an output too, is returned updated."""
        t = output
        if not isinstance(t, (Tensor, Scalar)):
            raise TypeError(f"add_output #{len(self._outputs)}: expected a Tensor or Scalar of this fusion, got "
                            f"{type(t).__name__}")
        if alias_input is not None and not isinstance(alias_input, Tensor):
            if stride_order is not None:
                raise TypeError(f"add_output #{len(self._outputs)}: got a stride order twice ({alias_input!r} in "
                                "alias_input's place and stride_order=); alias_input must be an input Tensor")
            if not isinstance(alias_input, Sequence):
                raise TypeError(f"add_output #{len(self._outputs)}: alias_input must be an input Tensor (or, in its "
                                f"place, a stride order: a list of ints), got {type(alias_input).__name__}")
            alias_input, stride_order = None, alias_input
        if alias_input is not None:
            self.aliases[len(self._outputs)] = self._alias_target(t, alias_input)
        if stride_order is not None:
            if not isinstance(t, Tensor):
                raise TypeError("stride_order applies to tensor outputs only")
            if sorted(stride_order) != list(range(t.ndim)):
                raise ValueError(f"add_output: stride_order {list(stride_order)} is not a permutation of range({t.ndim})")
        given = self.stride_orders.get(t.value) if isinstance(t, Tensor) else None
        if given is not None:
            if stride_order is not None and tuple(stride_order) != given:
                raise ValueError(f"add_output #{len(self._outputs)}: stride_order {list(stride_order)} contradicts "
                                 f"the fd.ops.stride_order {list(given)} of this tensor")
            stride_order = given
        self._check_own(t.value, f"add_output #{len(self._outputs)}")
        self._outputs.append((t.value, tuple(stride_order) if stride_order is not None else None))

    def _alias_target(self, t: object, alias_input: object) -> int:
        what = f"add_output #{len(self._outputs)}: alias_input"
        if not isinstance(t, Tensor) or not isinstance(alias_input, Tensor):
            raise TypeError(f"{what}: both the output and alias_input must be Tensors")
        arg = alias_input.value
        if not isinstance(arg, BlockArgument) or arg.block is not self.block:
            raise ValueError(f"{what} must be a fusion input (from define_tensor), got {alias_input!r}")
        if arg.index in self.aliases.values():
            raise ValueError(f"{what}: input {arg.index} already receives another output")
        have, want = t.type, alias_input.type
        if have.dtype != want.dtype:
            raise TypeError(f"{what}: output dtype {have.dtype} differs from input {arg.index}'s dtype {want.dtype}")
        if have.rank != want.rank:
            raise ValueError(f"{what}: output {have.describe()} has rank {have.rank}, input {arg.index} "
                             f"{want.describe()} has rank {want.rank}")
        for d in range(have.rank):
            a, b = have.static_extent(d), want.static_extent(d)
            if a is not None and b is not None and a != b:
                raise ValueError(f"{what}: dim {d} of the output {have.describe()} has extent {a}, input "
                                 f"{arg.index} {want.describe()} has {b}")
        return arg.index

    def _finalize(self) -> None:
        if not self._outputs:
            raise ValueError("the fusion has no outputs: call fd.add_output(...)")
        self.block.add_op(func.ReturnOp(*[v for v, _ in self._outputs]))
        inputs = [a.type for a in self.block.args]
        outputs = [v.type for v, _ in self._outputs]
        res_attrs = None  # none at all rather than all-empty: prints (and re-parses) the same
        if any(o is not None for _, o in self._outputs) or self.aliases:
            res_attrs = ArrayAttr([DictionaryAttr(self._result_attrs(k)) for k in range(len(self._outputs))])
        f = func.FuncOp(self.name, (inputs, outputs), Region(self.block), res_attrs=res_attrs)
        self._module = ModuleOp([f])
        self._module.verify()
        verify_fusion(f)

    def _result_attrs(self, k: int) -> dict[str, Attribute]:
        order = self._outputs[k][1]
        attrs: dict[str, Attribute] = {} if order is None else {REQUIRED_ORDER: _order_attr(order)}
        if k in self.aliases:
            attrs[ALIAS_INPUT] = IntegerAttr(self.aliases[k], i64)
        return attrs

    @classmethod
    def from_ir(cls, text: str) -> FusionBuilder:
        """A finished definition of the fusion in `text` (fuser-dialect MLIR, as `print(fd)`
        shows it): how repro scripts rebuild a fusion. Outputs written into inputs
        (alias_input) and required output layouts come back from the IR's result attributes."""
        from xdsl.parser import Parser

        from fuser_dialect.fusion import make_context, the_fusion

        module = Parser(make_context(), text).parse_module()
        module.verify()
        f = the_fusion(module)
        verify_fusion(f)
        fd = cls(f.sym_name.data)
        fd.block, fd._module = f.body.block, module
        fd._outputs = [(v, None) for v in f.body.block.last_op.operands]
        for k, attrs in enumerate(f.res_attrs.data if f.res_attrs is not None else ()):
            alias = attrs.data.get(ALIAS_INPUT)
            if alias is not None:
                fd.aliases[k] = alias.value.data
        return fd

    def definition(self) -> None:
        """Class-based definitions, as in nvFuser: a subclass overrides this method to define
        the fusion (`class MyFusion(FusionDefinition): def definition(self): ...`), and it runs
        once, on the first use of the fusion (`execute`, `print`, ...), instead of a `with` block.
        nvFuser's user schedules (a `schedule` method) do not apply: fuser's schedulers pick
        every schedule (a subclass defining one is refused).
        This one, run on the first use of a fusion that defines nothing, raises
        NotImplementedError, as nvFuser's does."""
        raise NotImplementedError("the fusion defines nothing: define it in a `with FusionDefinition() as fd:` "
                                  "block, or override definition() in a subclass of FusionDefinition")

    def _define_by_subclass(self) -> bool:
        """Runs `definition()` if nothing is defined yet: a subclass's defines the fusion, the
        base one raises NotImplementedError."""
        if self.block.first_op is not None or self.block.args:
            return False
        with _DEFINE_LOCK:
            if self._module is not None:
                return True
            for name in ("schedule", "multidevice_schedule"):
                if callable(getattr(self, name, None)):
                    raise NotImplementedError(f"{type(self).__name__}.{name}(): user schedules are not supported; "
                                              "fuser's schedulers choose every kernel's schedule")
            self.definition()
            self._finalize()
        return True

    # -- inspection (nvFuser's names) -------------------------------------
    def inputs(self) -> list[Tensor | Scalar]:
        """The fusion's inputs, in execute's order (nvFuser returns state ids; fuser, the values)."""
        return [Tensor(self, a) if isinstance(a.type, TensorType) else Scalar(self, a)
                for a in self.fusion.body.block.args]

    def outputs(self) -> list[Tensor | Scalar]:
        """The fusion's outputs, in add_output's order (outputs written into an input included)."""
        returned = self.fusion.body.block.last_op.operands
        return [Tensor(self, v) if isinstance(v.type, TensorType) else Scalar(self, v) for v in returned]

    def extents(self) -> list[tuple[int, int]]:
        """The symbolic extents of the tensor inputs, as (input position, dim) pairs in input
        order: the sizes known only at execution (static and broadcast dims are not listed)."""
        return [(k, d) for k, a in enumerate(self.fusion.body.block.args) if isinstance(a.type, TensorType)
                for d, e in enumerate(a.type.shape) if e == DYNAMIC]

    def fusion_ir(self) -> str:
        """The unscheduled fusion, as fuser-dialect MLIR (what `print(fd)` shows)."""
        return str(self)

    # -- access ----------------------------------------------------------
    @property
    def module(self) -> ModuleOp:
        if self._module is None and not self._define_by_subclass():
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


def shape_from_sizes(sizes: Sequence[int] | None, strides: Sequence[int] | None,
                     static_sizes: bool) -> tuple[list[int], list[int]]:
    """(shape, stride_order) of define_tensor from an example tensor's sizes and strides, as
    nvFuser reads them: extent 1 is a broadcast dim, others dynamic unless static_sizes;
    dims ranked by stride (ties: the later dim is faster, as in row-major)."""
    if sizes is None or strides is None:
        raise ValueError("define_tensor: `sizes` and `strides` go together; give both")
    sizes = [static_int(v, f"define_tensor: sizes[{d}]") for d, v in enumerate(sizes)]
    strides = [static_int(v, f"define_tensor: strides[{d}]") for d, v in enumerate(strides)]
    if len(sizes) != len(strides):
        raise ValueError(f"define_tensor: {len(sizes)} sizes but {len(strides)} strides")
    for d, (size, stride) in enumerate(zip(sizes, strides)):
        if size < 0 or stride < 0:
            raise ValueError(f"define_tensor: dim {d} has size {size} and stride {stride}; both must be >= 0")
    shape = [size if static_sizes or size == 1 else -1 for size in sizes]
    fastest_first = sorted(range(len(sizes)), key=lambda d: (strides[d], -d))
    order = [0] * len(sizes)
    for rank, d in enumerate(fastest_first):
        order[d] = rank
    return shape, order


def _order_attr(order: Sequence[int]):
    from xdsl.dialects.builtin import DenseArrayBase

    return DenseArrayBase.from_list(i64, list(order))


_DEFINE_LOCK = threading.Lock()
"""Held while a class-based definition runs (two threads may use a fusion first at once)."""

ALIAS_INPUT = "fuser.alias_input"
"""Result attribute: the argument index whose buffer this output is written into (alias_input)."""


def _report_errors_at_the_frontend() -> None:
    """The definition entry points raise fuser's error classes, RuntimeErrors as nvFuser's
    (fuser_dialect/errors.py); leaving the `with` block too (a verifier's error among them)."""
    for name in ("define_tensor", "from_pytorch", "define_vector", "define_scalar", "add_output"):
        setattr(FusionBuilder, name, reports_errors(getattr(FusionBuilder, name)))
    for name in ("__exit__", "_define_by_subclass"):
        setattr(FusionBuilder, name, reports_errors(getattr(FusionBuilder, name), name=""))


_report_errors_at_the_frontend()

__all__ = ["FusionBuilder", "DataType", "Tensor", "Scalar", "Vector", "HINT_ORDER", "ALIAS_INPUT"]
