"""Which nodes of an ATen graph fuser takes: `FuserSupport`, the partitioner's OperatorSupport.

A node is supported when its op has a translation (op_table.py), every tensor it reads and
writes has a dtype fuser knows and lives on one device fuser runs on (cpu, cuda), and the
op's own check accepts this call's argument form. The reason a node is refused is kept
(`reasons`): explain() reports it."""

from __future__ import annotations

import operator

import torch
import torch.fx
from torch.fx.passes.operator_support import OperatorSupport

import fuser.torch_backend.linear_cross_entropy  # noqa: F401  (defines torch.ops.fuser.linear_cross_entropy)
from fuser.torch_backend.dtypes import FUSER_DTYPES
from fuser.torch_backend.op_table import translation_for
from fuser.torch_backend.report import COLLECTIVE_NAMESPACES

FUSER_DEVICES = ("cpu", "cuda")


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def _arg_values(node: torch.fx.Node):
    for arg in node.all_input_nodes:
        yield arg.meta.get("val")


aten = torch.ops.aten

LEFT_TO_LIBRARIES = {
    aten.index_put.default: "index_put (with accumulate: an embedding's backward) is a scatter-add, which needs "
                            "atomics or a sort fuser's kernels do not have; it stays a library call",
    aten.native_dropout.default: "random: the compiled program must draw what eager draws (torch's generator)",
    aten.sort.default: "sorting is a library call",
    aten.topk.default: "top-k is a library call",
    torch.ops.fuser.linear_cross_entropy.default: "the LM head's linear and cross-entropy, a chunk of rows at a "
                                                  "time: matmuls and one fuser kernel per chunk (linear_cross_entropy.py)",
}
"""Ops fuser leaves to ATen on purpose, with why (besides matmul, convolution, attention and
pooling: report.LIBRARY_OPS)."""


MISDECLARED_OUTPUTS = {
    aten._batch_norm_with_update_functional.default: {4: 3, 5: 4},
    aten._native_batch_norm_legit_functional.default: {3: 3, 4: 4},
}
"""Library outputs whose traced dtype torch's fake kernel gets wrong: {op: {output: the input
whose dtype the real kernel gives it}} (updated running stats of 16-bit batch norm: declared
f32, returned in the running stats' dtype). A fusion reading one would be defined for a dtype
it does not receive, so a reader is refused instead."""


def _misdeclared_read(node: torch.fx.Node) -> str | None:
    for arg in node.all_input_nodes:
        if arg.target is not operator.getitem or not isinstance(arg.args[0], torch.fx.Node):
            continue
        producer, index = arg.args[0], arg.args[1]
        source = MISDECLARED_OUTPUTS.get(producer.target, {}).get(index)
        if source is None:
            continue
        declared, real = arg.meta.get("val"), producer.args[source].meta.get("val")
        if isinstance(declared, torch.Tensor) and isinstance(real, torch.Tensor) and declared.dtype != real.dtype:
            return (f"reads output {index} of {producer.target}, which torch's fake kernel declares "
                    f"{declared.dtype} but the real kernel returns as {real.dtype}")
    return None


def unsupported_reason(node: torch.fx.Node) -> str | None:
    """Why fuser cannot take this call node (None: it can)."""
    if node.target is operator.getitem:
        return None  # a part of a tuple result: goes where its producer goes
    misdeclared = _misdeclared_read(node)
    if misdeclared is not None:
        return misdeclared
    if not isinstance(node.target, torch._ops.OpOverload):
        return f"{getattr(node.target, '__name__', node.target)} is not an ATen op"
    if node.target.namespace in COLLECTIVE_NAMESPACES:
        return "a collective (torch.distributed): a library call, never inside a fusion"
    translation = translation_for(node.target)
    if translation is None:
        from fuser.torch_backend.report import LIBRARY_OPS

        if node.target not in LEFT_TO_LIBRARIES and str(node.target) in LIBRARY_OPS:
            return "a library call by design (matmuls, convolutions, attention, pooling): fuser fuses what lies between"
        return LEFT_TO_LIBRARIES.get(node.target, f"no translation for {node.target}")
    if "val" not in node.meta:
        return "no example value (traced without fake tensors)"
    devices = set()
    for value in [node.meta["val"], *_arg_values(node)]:
        for t in _tensors(value):
            if t.dtype not in FUSER_DTYPES:
                return f"dtype {t.dtype}"
            devices.add(t.device.type)
    if len(devices) > 1:
        return f"tensors on several devices ({sorted(devices)})"
    if devices and not devices <= set(FUSER_DEVICES):
        return f"device {devices.pop()}"
    if translation.check is None:
        return None
    try:
        return translation.check(node)
    except Exception as error:  # a check that cannot read this call's form: not for fuser
        return f"argument form not understood ({type(error).__name__}: {error})"


class FuserSupport(OperatorSupport):
    def __init__(self):
        super().__init__()
        self.reasons: dict[torch.fx.Node, str] = {}

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        reason = unsupported_reason(node)
        if reason is not None:
            self.reasons[node] = reason
        return reason is None
