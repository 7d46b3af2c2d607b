"""`TensorCall`: a launch plan called with torch tensors, with nothing between the call and its
launches but a guard.

A compiled torch program calls each fused region once per step, with tensors of the same
shapes, strides, dtypes and devices step after step. `FusionExecutor.execute` serves such a
call from its launch plan (lowering/execution/launch_plan.py), but first computes the call's
signature and hashes it into the plan's key, and on the cpu backend the plan's buffers are
numpy arrays wrapped as tensors afterwards. A TensorCall is built once per plan from the call
that reached it, and per call does only this:

- a guard generated for the plan's signature (straight-line code, as call_signature.py's):
  per tensor input its type, dtype, shape, strides, device and the alignment class of its data
  address (address mod 16: it decides vector widths), per scalar input its type and value;
  and the settings snapshot and forced schedules the plan was keyed by still current, and the
  plan still kept by its executor. What it checks is exactly the plan's key, so a call it lets
  through is one the plan replays;
- the data addresses, read while guarding;
- the outputs allocated by torch (its caching allocator on a GPU) in the layouts the plan's
  buffers have, their addresses written into the plan's prebuilt launches.

A call the guard refuses returns None: the caller takes `execute`, which builds or finds the
plan of the new signature (and its TensorCall). A plan whose steps are all launches and whose
results are all kernels' buffers has one; per-launch workspaces, random states and the records
of in-kernel index checks are passed as the plan passes them, and host index checks run as in
the plan.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from fuser.lowering import settings
from fuser.lowering.addresses import dense_strides
from fuser.lowering.errors import MemcheckError
from fuser.lowering.execution.call_signature import _SCALAR_TYPES
from fuser.lowering.execution.launch import IndexErrorWord, PerLaunch, RngState, named
from fuser.lowering.execution.launch_plan import KeptWorkspaces
from fuser_dialect import philox

MAX_PER_REGION = 4
"""TensorCalls a caller keeps (the signatures it alternates between, newest first)."""


def _torch():
    return sys.modules["torch"]


class TensorCall:
    """The plan `plan` of `executor`, called with torch tensors like `inputs` (see the module
    doc). `run(inputs)`: the fusion's outputs (in `order` as a tuple, when given: the caller's
    selection of them), or None when the inputs are not what this plan is for (nothing ran)."""

    def __init__(self, executor, plan, inputs: Sequence[object], backend, order: tuple[int, ...] | None = None):
        self.plan = plan
        self.kernel_names = plan.kernel_names
        self.order = order
        self.run = _call_function(executor, plan, inputs, backend, order)

    @classmethod
    def of(cls, executor, plan, inputs: Sequence[object], backend,
           order: tuple[int, ...] | None = None) -> "TensorCall | None":
        """The TensorCall of `plan` for this selection of outputs (built at the plan's first call
        with torch tensors), or None where the plan has none (`_eligible`)."""
        built = plan.__dict__.setdefault("tensor_calls", {})
        found = built.get(order, ...)
        if found is ...:
            found = built[order] = cls(executor, plan, inputs, backend, order) \
                if _eligible(executor, plan, inputs) else None
        return found


def _eligible(executor, plan, inputs) -> bool:
    """A plan a TensorCall replays: every step a launch (no host segment, no empty kernel), no
    input copied per call, every result a kernel's buffer; tensor inputs torch tensors, the
    others plain scalars; no empty buffer (it may have no address)."""
    torch = sys.modules.get("torch")
    if torch is None or plan.adopted or len(inputs) != len(executor.tensor_args):
        return False
    if any(step.launch is None or step.host is not None for step in plan.steps):
        return False
    if any(kind != "buffer" or is_input for kind, _, is_input in plan.results):
        return False
    if any(0 in shape for shape, _, _ in plan.buffer_specs.values()):
        return False
    tensors = False
    for x, kind in zip(inputs, executor.tensor_args):
        if kind:
            if not isinstance(x, torch.Tensor):
                return False
            tensors = True
        elif type(x) not in _SCALAR_TYPES or x != x:
            return False
    return tensors


def _empty_strided_cpu(torch) -> Callable | None:
    """torch's allocation of a CPU tensor without the dispatcher's argument parsing (what Inductor's
    generated code calls): 0.4-0.8 µs less a call than `torch.empty_strided` on the 2-core
    development machine; None where this torch lacks it."""
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    return getattr(guards, "_empty_strided_cpu", None)


def _call_function(executor, plan, inputs: Sequence[object], backend, order) -> Callable:
    """`TensorCall.run` generated as straight-line code for this plan: the guard, the data
    addresses, then what `LaunchPlan.run` does per call in the same order (index checks, each
    step's output allocations, per-launch pointers, launch), the outputs."""
    torch = _torch()
    n = len(inputs)
    device = next(x.device for x in inputs if isinstance(x, torch.Tensor))
    namespace: dict = {"settings": settings, "SNAPSHOT": settings.launch_settings(), "executor": executor,
                       "OVERRIDES": executor._overrides_key, "empty_strided": torch.empty_strided,
                       "empty_cpu": _empty_strided_cpu(torch),
                       "DEVICE": device, "local": executor._local, "hits": executor._plan_hits,
                       "COMPILED": plan.compiled, "PLAN": plan, "stream_of": plan.stream_of,
                       "MemcheckError": MemcheckError, "named": named, "RT": plan.rt, "CHECKS": plan.index_checks,
                       "RECORDS": plan.index_records, "before_call": plan.before_call,
                       "index_record": plan.index_record, "after_checked_launch": plan.after_checked_launch,
                       "workspace": plan.workspace, "adopt": plan.adopt, "address": plan.address,
                       "draw_states": philox.draw_states, "DRAWS": plan.n_draws}
    guard = [f"    if len(inputs) != {n}:", "        return None"]
    if n:
        guard.append(f"    {''.join(f'x{i}, ' for i in range(n))}= inputs")
    for i, x in enumerate(inputs):  # exactly the plan's signature (call_signature.py)
        kind = executor.tensor_args[i]
        if kind:
            namespace.update({f"T{i}": type(x), f"D{i}": x.dtype, f"S{i}": x.shape, f"R{i}": x.stride(),
                              f"V{i}": x.device, f"A{i}": x.data_ptr() & 15})
            # A CPU tensor's device is the CPU (one, no index): is_cpu is a flag read, where
            # `device` makes a torch.device to compare (~0.1 µs a call).
            device_check = f"not x{i}.is_cpu" if x.device.type == "cpu" else f"x{i}.device != V{i}"
            guard += [f"    if type(x{i}) is not T{i} or x{i}.dtype is not D{i} or x{i}.shape != S{i} "
                      f"or x{i}.stride() != R{i} or {device_check}:",
                      "        return None",
                      f"    a{i} = x{i}.data_ptr()",
                      f"    if a{i} & 15 != A{i}:",
                      "        return None"]
        elif kind is False:
            namespace.update({f"K{i}": type(x), f"C{i}": x})
            guard += [f"    if type(x{i}) is not K{i} or x{i} != C{i}:", "        return None"]
        else:  # a random op's seed or offset: its value is read per call (RngState.words)
            namespace[f"K{i}"] = type(x)
            guard += [f"    if type(x{i}) is not K{i}:", "        return None"]
    guard += ["    if settings._snapshot is not SNAPSHOT or executor._overrides_key is not OVERRIDES or PLAN.retired:",
              "        return None"]
    body = []
    if plan.index_checks:
        body += ["for check, extent in CHECKS:", "    check.check(inputs, extent)"]
    if plan.index_records is not None:
        body.append("before_call(RECORDS)")
    body.append("stream = stream_of()" if backend.on_gpu else "stream = None")  # the host emulation has none
    if any(isinstance(p, RngState) for step in plan.steps for p in step.pointers):
        body.append("draws = draw_states(DRAWS)")
    specs = plan.buffer_specs
    counts = []
    held_workspaces = False
    for k, step in enumerate(plan.steps):
        for slot, _ in step.allocations:
            shape, dtype, layout = specs[slot]
            namespace.update({f"SH{slot}": shape, f"ST{slot}": dense_strides(shape, layout),
                              f"DT{slot}": getattr(torch, "bool" if dtype.kind == "b" else dtype.name)})
            if device.type == "cpu" and namespace["empty_cpu"] is not None:
                body.append(f"b{slot} = empty_cpu(SH{slot}, ST{slot}, DT{slot})")
            else:
                body.append(f"b{slot} = empty_strided(SH{slot}, ST{slot}, dtype=DT{slot}, device=DEVICE)")
            body.append(f"a{slot} = b{slot}.data_ptr()")
        pointers = []
        kept_zeroed = []  # (position, words): where launches are synchronous, kept per thread
        for j, source in enumerate(step.pointers):
            if isinstance(source, int):
                pointers.append(f"a{source}")
            elif isinstance(source, PerLaunch) and plan.synchronous:
                kept_zeroed.append((j, source.words))
                pointers.append("0")
            elif isinstance(source, PerLaunch):
                body.append(f"w{k}_{j}, q{k}_{j} = workspace({source.words})")  # held until the call returns
                pointers.append(f"q{k}_{j}")
            elif isinstance(source, RngState):
                namespace[f"RNG{k}_{j}"] = source
                body.append(f"w{k}_{j} = adopt(RNG{k}_{j}.words(inputs, draws))")
                pointers.append(f"address(w{k}_{j})")
            elif isinstance(source, IndexErrorWord):
                pointers.append("index_record(RECORDS)[1]")
            else:  # pragma: no cover - launch_plan._POINTERS lists the kinds
                raise TypeError(f"a TensorCall cannot pass {source!r}")
        namespace.update({f"L{k}": step.launch, f"P{k}": step.launched.kernel.params})
        # A cpu launch through the native launcher is called with its pointers themselves (its
        # BoundLaunch would only pass them on); any other launch with their list and the stream.
        native = getattr(step.launch, "native", None) if not backend.on_gpu else None
        if native is not None:
            namespace[f"N{k}"] = native
        if kept_zeroed:
            held_workspaces = True
            namespace[f"W{k}"] = tuple(kept_zeroed)
            body += [f"p = [{', '.join(pointers)}]", f"for i, w in workspaces_of({k}, W{k}):", "    p[i] = w"]
            launch = f"N{k}(*p)" if native is not None else f"L{k}(p, stream)"
        else:
            launch = f"N{k}({', '.join(pointers)})" if native is not None else f"L{k}([{', '.join(pointers)}], stream)"
        body += ["try:", f"    c{k} = {launch}", "except MemcheckError as e:"]
        if kept_zeroed:  # a launch that failed: a fresh zeroed set next time
            body += [f"    forget({k})", f"    raise named(e, P{k}, COMPILED, RT) from None",
                     "except BaseException:", f"    forget({k})", "    raise"]
        else:
            body.append(f"    raise named(e, P{k}, COMPILED, RT) from None")
        if any(isinstance(p, IndexErrorWord) for p in step.pointers):
            body.append("after_checked_launch(RECORDS)")
        counts.append(f"c{k}")
    body += [f"local.last = (COMPILED, PLAN, [{', '.join(counts)}])", "next(hits)"]
    results = [f"b{slot}" for _, slot, _ in plan.results]
    if order is not None:
        body.append(f"return ({''.join(results[i] + ', ' for i in order)})")
    else:
        body.append(f"return [{', '.join(results)}]")
    if held_workspaces:
        kept = KeptWorkspaces(plan.workspace)
        namespace.update(workspaces_of=kept.of, forget=kept.forget)
    natively = all(getattr(step.launch, "native", None) is not None for step in plan.steps)
    if backend.on_gpu and plan.index_records is not None:
        # The record of in-kernel index checks is mapped host memory the driver allocates once
        # (in a context); after that the call only reads it and passes its device address.
        with backend.context():
            plan.index_record(plan.index_records)
    if backend.on_gpu and not natively:
        # The primary context current for the launches, as execute makes it; native launches make
        # it current themselves (lowering/backends/gpu_launcher.py).
        namespace["context"] = backend.context
        lines = ["def run(inputs):", *guard, "    with context():", *("        " + line for line in body)]
    else:
        lines = ["def run(inputs):", *guard, *("    " + line for line in body)]
    exec(compile("\n".join(lines), f"<tensor call of {plan.kernel_names}>", "exec"), namespace)  # noqa: S102
    return namespace["run"]


__all__ = ["MAX_PER_REGION", "TensorCall"]
