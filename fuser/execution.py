"""Running a fusion: `FusionDefinition` (the dialect's builder plus `execute`), backend
choice and numpy/torch interop.

This is the only place where the public API meets the lowering: `fuser_dialect` builds and
verifies IR and imports nothing above it; backends live in `fuser.lowering.backends`."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

import numpy as np
from xdsl.ir import BlockArgument

from fuser.inspection import Inspection, program_text
from fuser.lowering.gc_pause import paused_gc
from fuser.options import check_options
from fuser_dialect.builder import FusionBuilder
from fuser_dialect.errors import reports_errors
from fuser_dialect.inputs import arg_label, is_torch_tensor
from fuser_dialect.types import TensorType, numpy_dtype


def _check_input_list(inputs) -> None:
    """`execute` takes a list of inputs; one array or tensor passed alone would be read as a
    list of its rows ("takes 2 inputs, got 4"), so it is an error that says what to write."""
    if isinstance(inputs, np.ndarray) or is_torch_tensor(inputs):
        raise TypeError(f"execute takes a list of inputs, one per define_tensor/define_scalar; got one "
                        f"{type(inputs).__name__} of shape {list(inputs.shape)}: write execute([x])")
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise TypeError(f"execute takes a list of inputs, one per define_tensor/define_scalar; got "
                        f"{type(inputs).__name__}")


class FusionDefinition(Inspection, FusionBuilder):
    """Defines one fusion (as `fuser_dialect.FusionDefinition`) and executes it.

        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
            fd.add_output(fd.ops.exp(x))
        out, = fd.execute([np.ones((2, 3), np.float32)])
    """

    def __init__(self, name: str = "fusion"):
        super().__init__(name)
        self._executor = None
        self._executor_lock = threading.Lock()
        self._last_profile = None
        self._gc_pause = None

    def __enter__(self) -> "FusionDefinition":
        # Python's garbage collector is held off while the definition is open (every op is a
        # few dozen objects: a 20,000-op definition spent a third of its time in collections
        # that freed nothing; lowering/gc_pause.py); it runs again from the end of the block.
        if self._gc_pause is None:
            self._gc_pause = paused_gc()
            self._gc_pause.__enter__()
        return super().__enter__()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            pause, self._gc_pause = self._gc_pause, None
            if pause is not None:
                pause.__exit__(None, None, None)

    def execute(self, inputs: Sequence[object], backend: str | None = None, _disable_options: Sequence[str] = (),
                *, device=None, profile: bool = False, _enable_options: Sequence[str] = (), print_repro: bool = False,
                autotune: bool | str | None = None):
        """Runs the fusion and returns its outputs as a list.

        backend: "reference" runs the numpy interpreter; "cpu" runs the generated CUDA C
        on the host; "cuda" runs it on the GPU through pycuda; None picks "cuda" when a
        GPU and pycuda are usable, else "cpu" (and "reference" when the lowering cannot
        run here at all: no C++ compiler). Inputs are numpy arrays (bf16 via ml_dtypes),
        Python/numpy scalars and torch tensors, one per define_tensor/define_scalar and one
        per element of a define_vector(n) (or one list of its n ints); outputs are torch
        tensors when an input was, and, as in nvFuser, for a fusion without tensor inputs
        where torch is installed.
        device: where the outputs go ("cpu", "cuda", "cuda:0", a torch.device or a GPU index);
        it picks the backend when none is named (cpu → "cpu", a GPU → "cuda").
        profile: time each kernel; `fd.profile()` returns the times (fuser/profiler.py).
        print_repro: print `repro_script_for(inputs)` first.
        autotune: on a call whose heuristic schedules are new (a new extents bucket, a new GPU),
        time the schedulers' alternatives on these inputs and keep the fastest, stored in the
        disk cache for later calls and processes (lowering/execution/autotune.py); values never
        change. "sass": rank them by the performance model on their SASS instead (no GPU). None: the FUSER_AUTOTUNE setting (default off). `last_kernels()[i].tuning` says
        what tuning found.
        _enable_options / _disable_options: nvFuser's NVFUSER_ENABLE / NVFUSER_DISABLE for this
        call, e.g. _disable_options=["concretize_resize_extents"] (also env FUSER_DISABLE); an
        unknown name is a ValueError naming it (fuser/options.py).
        """
        if type(inputs) is not list and type(inputs) is not tuple:
            _check_input_list(inputs)
        if _enable_options or _disable_options:
            _disable_options = check_options(_enable_options, _disable_options)
        if print_repro:
            print(self.repro_script_for(inputs))
        if profile:
            from fuser.profiler import profiled

            chosen = []
            outputs, self._last_profile = profiled(
                lambda: self._execute(inputs, backend, _disable_options, device, chosen, autotune), self,
                lambda: chosen[0].name)
            return outputs
        if self._last_profile is not None:
            self._last_profile = None
        return self._execute(inputs, backend, _disable_options, device, autotune=autotune)

    def _execute(self, inputs, backend, _disable_options, device, chosen_out: list | None = None,
                 autotune: bool | str | None = None) -> list:
        torch_outputs = False
        if device is not None or self._without_tensor_inputs():
            backend, torch_outputs = self._placement(device, backend)
        chosen = _named_backends.get(backend) if type(backend) is str else None
        if chosen is None:
            chosen = _backend_named(backend)
        if chosen_out is not None:
            chosen_out.append(chosen)
        disable = _disable_options if type(_disable_options) is tuple else tuple(_disable_options)
        if self.vector_inputs:
            inputs = self._flat_inputs(inputs)
        if self.aliases:
            self._check_alias_targets(inputs)
        outputs = self._get_executor().execute(inputs, chosen, disable, torch_outputs, autotune)
        if not chosen.compiles:
            outputs = self._zero_dim_as_arrays(outputs)
        if chosen.returns_numpy:
            outputs = as_torch(outputs) if torch_outputs else like_inputs(outputs, inputs)
        return self._write_aliases(outputs, inputs) if self.aliases else outputs

    def profile(self):
        """The FusionProfile of the last `execute(..., profile=True)` (fuser/profiler.py)."""
        if self._last_profile is None:
            raise ValueError("The execute() method was not previously called with profiling enabled!")
        return self._last_profile

    def _without_tensor_inputs(self) -> bool:
        found = self.__dict__.get("_no_tensor_inputs")
        if found is None:
            found = self._no_tensor_inputs = not any(isinstance(a.type, TensorType)
                                                     for a in self.fusion.body.block.args)
        return found

    def _placement(self, device, backend) -> tuple[object, bool]:
        """(the backend to run on, whether outputs must be torch tensors) for `device`."""
        kind = _device_kind(device)
        if kind is not None:
            name = getattr(backend, "name", backend)
            if name is None:
                backend = kind if kind == "cuda" else "cpu"
            elif (kind == "cuda") != (name == "cuda"):
                raise ValueError(f"execute: device {device!r} and backend {name!r} disagree (the cuda backend runs on "
                                 "a GPU, the cpu and reference backends on the host)")
        import importlib.util

        return backend, self._without_tensor_inputs() and importlib.util.find_spec("torch") is not None

    def compile_for(self, inputs: Sequence[object], backend: str | None = None, _disable_options: Sequence[str] = (),
                    *, device=None) -> None:
        """Compiles the kernels `execute(inputs, ...)` would run, without running them: the
        inputs' shapes, strides and dtypes count, their values do not (index ranges are not
        checked). Raises what that `execute` would raise before launching; later executes of
        inputs of the same signature find the kernels cached."""
        if device is not None or self._without_tensor_inputs():
            backend, _ = self._placement(device, backend)
        if self.vector_inputs:
            inputs = self._flat_inputs(inputs)
        disable = tuple(_disable_options)
        self._get_executor().prepare(inputs, _backend_named(backend), disable)

    def validate(self, inputs: Sequence[object], reference_outputs: Sequence[object] | None = None,
                 backend: str | None = None, rtol: float | None = None, atol: float | None = None) -> list:
        """Executes the fusion and checks each output against `reference_outputs` (default: the
        reference interpreter's outputs for these inputs), with nvFuser's kind of tolerance: by
        dtype, grown with the reductions behind the output (fuser/validate.py). Raises
        ValidationError (an AssertionError) naming the output and its worst element; returns
        the outputs."""
        from fuser.validate import validate

        return validate(self, inputs, reference_outputs, backend, rtol, atol)

    def segment(self, inputs: Sequence[object], backend: str | None = None):
        """The kernels (segments) this fusion runs as for these inputs: per segment its
        scheduler, its ops as fusion text and where its inputs and outputs come from and go
        (positions in this fusion, or another segment's outputs). Nothing is compiled or run.
        `print(fd.segment(inputs))` shows them all."""
        from fuser.lowering.execution.segments_view import segment_fusion

        if self.vector_inputs:
            inputs = self._flat_inputs(inputs)
        return segment_fusion(self.module, inputs, _get_backend()(backend))

    # -- frontend conveniences around the executor ------------------------------------
    def _flat_inputs(self, inputs: Sequence[object]) -> list[object]:
        """One input per argument. A `define_vector(size)` input takes its `size` ints as that
        many separate inputs, as in nvFuser; one list (or tuple) of `size` ints in their place
        is spread over them too (a list is never a scalar input, so the two cannot be confused)."""
        flat: list[object] = []
        it = iter(inputs)
        n_args = len(self.fusion.body.block.args)
        while len(flat) < n_args:
            position = len(flat)
            value = next(it, _MISSING)
            if value is _MISSING:
                break
            size = self.vector_inputs.get(position)
            if size is None or not isinstance(value, (list, tuple)):
                flat.append(value)
                continue
            if len(value) != size:
                raise TypeError(f"input {position} (a define_vector of size {size}): expected {size} ints, as "
                                f"{size} separate inputs or one list, got a list of {len(value)}: {value!r}")
            flat += value
        flat += list(it)  # too many inputs: check_inputs reports the count
        return flat

    def _zero_dim_as_arrays(self, outputs: list) -> list:
        """0-d tensor outputs as 0-d arrays (numpy hands back scalars from 0-d ops)."""
        types = self.fusion.function_type.outputs.data
        return [np.asarray(o) if isinstance(o, np.generic) and isinstance(t, TensorType) else o
                for o, t in zip(outputs, types)]

    def _check_alias_targets(self, inputs: Sequence[object]) -> None:
        """Refuses, before any kernel runs, an alias_input whose input cannot take the output's
        values (numpy or torch would refuse the copy only after the kernels ran)."""
        for k, arg in self.aliases.items():
            why = unwritable(inputs[arg]) if arg < len(inputs) else None  # a missing input: check_inputs says so
            if why is not None:
                raise ValueError(f"output {k} (alias_input of {arg_label(self.fusion, arg)}) cannot be written into "
                                 f"input {arg}: {why}")

    def _write_aliases(self, outputs: list, inputs: Sequence[object]) -> list:
        """Writes each alias_input output into its input's buffer (`inputs`: one per argument);
        returns the other outputs, an aliased input among them being that input, updated (as in
        nvFuser: the executor returned a copy taken before the write)."""
        for k, arg in self.aliases.items():
            write_into(inputs[arg], outputs[k], f"output {k} (alias_input of input {arg})")
        updated = self._returned_alias_targets()
        return [inputs[updated[k]] if k in updated else o for k, o in enumerate(outputs) if k not in self.aliases]

    def _returned_alias_targets(self) -> dict[int, int]:
        """Output position -> argument index, for each output that is an input some alias_input
        output is written into."""
        found = self.__dict__.get("_returned_targets")
        if found is None:
            targets = set(self.aliases.values())
            returned = self.fusion.body.block.last_op.operands
            found = self._returned_targets = {k: v.index for k, v in enumerate(returned)
                                              if isinstance(v, BlockArgument) and v.index in targets}
        return found

    def cache_info(self):
        """hits, misses (compilations) and the key of each compiled entry."""
        return self._get_executor().cache_info()

    def check_index_errors(self) -> None:
        """Raises the IndexError of an index that an in-kernel check found out of range in an
        earlier call and that no call raised yet: on the cuda backend a fault is raised at the
        next execute of the same compiled fusion, or here (after waiting for the GPU); on the
        cpu backend every call raises its own (lowering/execution/index_errors.py)."""
        self._get_executor().check_index_errors()

    def override_schedule(self, kernel: int, schedule) -> None:
        """Forces the schedule of kernel number `kernel` (its position in `last_kernels()`) for
        every later call, until overridden again or reset with None: what the benchmark's sweep
        and tests use to run any variant (a `RowSchedule` or `PointwiseSchedule` from
        fuser.lowering.schedulers). A schedule that cannot run a call (a vector width its
        arrays do not allow, a row longer than a persistent schedule holds) raises a ValueError
        naming the rule at that call."""
        self._get_executor().override_schedule(kernel, schedule)

    def last_kernels(self):
        """One record per kernel launched by this thread's last `execute` (each thread sees
        its own last call; the cache and its counters are shared)."""
        return self._get_executor().last_kernels()

    def last_kernel_names(self) -> tuple[str, ...]:
        """The names of the kernels this thread's last `execute` launched: what
        `last_kernels()` names, without building the records (cheap enough to call per step)."""
        return self._get_executor().last_kernel_names()

    def last_compile_info(self) -> dict[str, float]:
        """Where compile time went for this thread's last execution: passes_s, segment_s,
        emission_s, compile_s (seconds; empty for the reference backend)."""
        return self._get_executor().last_compile_info()

    def last_cuda_code(self, intrinsic_code: bool = False) -> str:
        """The CUDA program of the last execution (empty for the reference backend): the shared
        head once, then every kernel; it is whole, so nvFuser's intrinsic_code changes nothing."""
        return program_text(self.last_kernels())

    def _get_executor(self):
        executor = self._executor
        if executor is None:
            with self._executor_lock:  # one executor (one cache) however many threads call at once
                if self._executor is None:
                    from fuser.lowering.execution.executor import FusionExecutor

                    self._executor = FusionExecutor(self.module)
                executor = self._executor
        return executor


for _name in ("execute", "compile_for", "segment", "kernels_for", "cuda_code_for", "scheduled_fusion_ir_for"):
    # Errors leave as fuser's classes, RuntimeErrors as nvFuser's (fuser_dialect/errors.py):
    # ValueError/TypeError kinds keep their class, an xDSL error never reaches the caller.
    setattr(FusionDefinition, _name, reports_errors(getattr(FusionDefinition, _name), name=""))

_get_backend_function = None


def _get_backend():
    """fuser.lowering.backends.get_backend, imported on first use (not per call)."""
    global _get_backend_function
    if _get_backend_function is None:
        from fuser.lowering.backends import get_backend

        _get_backend_function = get_backend
    return _get_backend_function


_named_backends: dict = {}
"""Backend name -> backend, as get_backend answered (a name always means the same backend)."""


def _backend_named(name):
    chosen = _get_backend()(name)
    if type(name) is str:
        _named_backends[name] = chosen
    return chosen


def _device_kind(device) -> str | None:
    """"cpu" or "cuda" for an execute(device=...) value; fuser runs on one GPU, the first."""
    if device is None:
        return None
    text = str(device) if not isinstance(device, int) or isinstance(device, bool) else f"cuda:{device}"
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()) or (kind == "cpu" and index):
        raise ValueError(f"execute: device {device!r}: expected 'cpu', 'cuda', 'cuda:N', a torch.device or a GPU index")
    if kind == "cuda" and index and int(index) != 0:
        raise ValueError(f"execute: device {device!r}: fuser's kernels run on cuda:0")
    return kind


def as_torch(outputs):
    """Host outputs (fresh numpy arrays) as torch tensors sharing their memory."""
    import torch

    return like_inputs(outputs, [torch.empty(0)])


def like_inputs(outputs, inputs):
    """Host outputs as torch tensors when an input was a torch tensor (numpy otherwise). The
    outputs are fresh arrays no one else holds (an input returned as is was already copied), so
    the tensors share their memory: no copy."""
    for x in inputs:
        if type(x) is not np.ndarray and is_torch_tensor(x):
            break
    else:
        return outputs
    torch = sys.modules["torch"]  # an input is a torch tensor: torch is imported
    result = []
    for o in outputs:
        if type(o) is not np.ndarray:
            result.append(torch.from_numpy(np.array(o)) if isinstance(o, np.ndarray) else o)
        elif o.dtype in _BITS_VIEWED:
            bits, name = _BITS_VIEWED[o.dtype]
            result.append(torch.from_numpy(o.view(bits)).view(getattr(torch, name)))
        else:
            result.append(torch.from_numpy(o))
    return result


def unwritable(target) -> str | None:
    """Why an input buffer cannot receive an output in place, or None: a read-only numpy array,
    or a view with a stride-0 dim (expand, broadcast_to), whose elements along it are one."""
    if isinstance(target, np.ndarray) and not target.flags.writeable:
        return "it is a read-only numpy array (writeable=False); pass a writeable copy (np.array(x))"
    if not (isinstance(target, np.ndarray) or is_torch_tensor(target)):
        return None
    shape = tuple(target.shape)
    if 0 in shape:  # no element to write (numpy and torch give such arrays stride 0 freely)
        return None
    strides = target.strides if isinstance(target, np.ndarray) else target.stride()
    shared = next((d for d, (n, s) in enumerate(zip(shape, strides)) if s == 0 and n > 1), None)
    if shared is None:
        return None
    copy = "np.array(x)" if isinstance(target, np.ndarray) else "x.contiguous()"
    return (f"it has stride 0 along dim {shared} (an expanded view: its {target.shape[shared]} elements there are one "
            f"in memory); pass a copy that owns its elements ({copy})")


def write_into(target, value, what: str) -> None:
    """Copies `value` (a numpy array or torch tensor) into the input buffer `target`."""
    shape = tuple(value.shape)
    if tuple(target.shape) != shape:
        raise ValueError(f"{what}: the output has shape {list(shape)} but the input buffer has {list(target.shape)}")
    if isinstance(target, np.ndarray):
        np.copyto(target, value.numpy() if is_torch_tensor(value) else value)
        return
    torch = sys.modules["torch"]  # target is a torch tensor: torch is imported
    if not is_torch_tensor(value):
        value = like_inputs([value], [target])[0]
    with torch.no_grad():
        target.copy_(value)


_MISSING = object()
_BITS_VIEWED = {
    numpy_dtype("bf16"): (np.int16, "bfloat16"),
    numpy_dtype("f8E4M3FN"): (np.uint8, "float8_e4m3fn"),
    numpy_dtype("f8E5M2"): (np.uint8, "float8_e5m2"),
}
"""numpy dtypes torch cannot take from numpy -> (integer dtype carrying the bits, torch dtype name)."""
