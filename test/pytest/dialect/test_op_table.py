"""Every op of the fuser dialect registers all its pieces in the op table
(fuser_dialect/op_table.py), or declares explicitly why it has none of one kind."""

from __future__ import annotations

import pytest
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def

from fuser.lowering.codegen.emit_cuda import ACCESS_RULES, EMITTERS
from fuser_dialect.dialect import Fuser
from fuser_dialect.op_table import OP_TABLE, NotApplicable, missing_pieces, register, same_dims, same_position
from fuser_dialect.types import TensorType


@pytest.mark.parametrize("op_type", list(Fuser.operations), ids=lambda op: op.name)
def test_every_fuser_op_has_every_piece(op_type):
    problems = missing_pieces(op_type, EMITTERS)
    assert not problems, "\n".join(problems)


def test_every_emitter_has_an_access_rule():
    """The kernel analysis walks kernels with ACCESS_RULES the way emission does with
    EMITTERS: an op the emitter handles but the analysis cannot follow would be scheduled blind."""
    assert set(EMITTERS) == set(ACCESS_RULES), {
        "emitter without access rule": sorted(c.__name__ for c in set(EMITTERS) - set(ACCESS_RULES)),
        "access rule without emitter": sorted(c.__name__ for c in set(ACCESS_RULES) - set(EMITTERS)),
    }


def test_every_declared_absence_says_why():
    for op_type, pieces in OP_TABLE.items():
        for piece in vars(pieces).values():
            if isinstance(piece, NotApplicable):
                assert piece.reason.strip(), f"{op_type.__name__}: a NotApplicable piece gives no reason"


@irdl_op_definition
class _HalfRegisteredOp(IRDLOperation):
    name = "test.half_registered"
    input = operand_def(TensorType)
    result = result_def(TensorType)


@irdl_op_definition
class _UnregisteredOp(IRDLOperation):
    name = "test.unregistered"


@pytest.fixture
def half_registered():
    register(_HalfRegisteredOp, shape=lambda op, type_of: type_of(op.input).shape, dim_ties=same_dims,
             layout=same_position)
    yield _HalfRegisteredOp
    del OP_TABLE[_HalfRegisteredOp]


def test_report_names_the_op_and_each_missing_piece(half_registered):
    problems = missing_pieces(half_registered, EMITTERS)
    assert problems == [
        "test.half_registered: no reference-interpreter implementation (register one, or declare it NotApplicable(why))",
        "test.half_registered: no run-time extent planner (register one, or declare it NotApplicable(why))",
        "test.half_registered: no CUDA emitter in EMITTERS (add one, or register emitted=NotApplicable(why))",
    ]


def test_report_names_an_unregistered_op():
    assert missing_pieces(_UnregisteredOp, EMITTERS) == [
        "test.unregistered: not registered in the op table (fuser_dialect.op_table.register)"
    ]


def test_declared_absences_are_not_missing():
    @irdl_op_definition
    class _ScalarOp(IRDLOperation):
        name = "test.scalar"

    none = NotApplicable("a test op")
    register(_ScalarOp, shape=none, interpret=none, plan_extents=none, layout=none, dim_ties=none, emitted=none)
    try:
        assert missing_pieces(_ScalarOp, EMITTERS) == []
    finally:
        del OP_TABLE[_ScalarOp]


def test_an_op_registers_once(half_registered):
    with pytest.raises(ValueError, match="_HalfRegisteredOp is registered twice"):
        register(half_registered)
