"""What `concretize` verifies after its rewrite: the function, its return and the ops it made or
changed, not the whole fusion again (the builder and the parser verified the rest); a rewrite
that breaks an op is still caught. Counted, never timed."""

from __future__ import annotations

import pytest
from xdsl.ir import Operation
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from fuser import DataType, FusionDefinition
from fuser.passes import concretize as C
from fuser_dialect.fusion import the_fusion
from fuser_dialect.types import TensorType


def _chain(n: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        v = x
        for i in range(n):
            v = fd.ops.neg(v) if i % 2 else fd.ops.mul(v, 0.5)
        fd.add_output(v)
    return fd


@pytest.fixture
def verified(monkeypatch):
    names: list[str] = []
    real = Operation.verify

    def counting(op, verify_nested_ops: bool = True):
        names.append(op.name)
        return real(op, verify_nested_ops)

    monkeypatch.setattr(Operation, "verify", counting)
    return names


def test_a_rewrite_that_changes_nothing_verifies_the_function_and_its_return(verified):
    module = _chain(200).module.clone()
    verified.clear()  # the builder's verify
    C.concretize(module, [(4, 8)], [None])
    assert sorted(verified) == ["func.func", "func.return"]


def test_the_ops_a_rewrite_changes_are_verified(verified):
    with FusionDefinition() as fd:  # the pad's widths become constants: the pad is rebuilt
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        w = fd.define_scalar(dtype=DataType.Int)
        y = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(fd.ops.pad(fd.ops.mul(x, 2.0), [w, w])))  # all static now: 4x8 -> 4x12
        fd.add_output(fd.ops.exp(y))  # tied to nothing static: as it was
    module = fd.module.clone()
    verified.clear()
    C.concretize(module, [(4, 8), None, (5,)], [None, 2, None])
    assert sorted(verified) == ["func.func", "func.return", "fuser.binary", "fuser.pad", "fuser.unary"]
    types = [op.results[0].type for op in the_fusion(module).body.block.ops if op.name == "fuser.pad"]
    assert types and types[0].shape[1] == 12


def test_a_rewrite_that_breaks_an_op_is_caught(monkeypatch):
    real_apply = C._Concretizer._apply

    def broken(self, new_types):
        real_apply(self, new_types)
        neg = next(op for op in self.block.ops if op.name == "fuser.unary")
        t = neg.results[0].type
        Rewriter.replace_value_with_new_type(neg.results[0], TensorType(t.element_type, [-1], ()))  # rank 1 of rank 2

    monkeypatch.setattr(C._Concretizer, "_apply", broken)
    module = _chain(6).module.clone()
    with pytest.raises(VerifyException):
        C.concretize(module, [(4, 8)], [None])
