"""PyTorch's OpInfo database through torch.compile(backend="fuser"), checked against eager.

Modelled on PyTorch's test/inductor/test_torchinductor_opinfo.py. For each OpInfo of
`common_methods_invocations.op_db` and each dtype of float32, bfloat16, int64, bool that the op
supports on CPU, two of the op's sample inputs (its first, and the first of highest rank among
the next 15: `_samples`) are called through a small function, eagerly and compiled with
`backend="fuser"` (through `make_backend(reports)`, the same backend with its graph reports
kept; Dynamo reset per sample, so every sample is traced with static shapes), and the results
must agree on

* values: torch.testing.assert_close with the dtype's default tolerances (bf16 loosened, see
  TOLERANCES), NaNs equal; inputs the op mutates are compared too;
* dtype, shape, type (torch.Tensor or not) and the strides of every dim of extent > 1;
* errors: a call that raises eagerly must raise compiled (any exception type, recorded in the
  summary below); a call that runs eagerly must run compiled;
* regions: none refused by fuser for an error (its definition or kernels failing to build),
  which the eager fallback would otherwise hide;
* gradients (float32, ops with `supports_autograd`): torch.autograd.grad of a fixed random
  cotangent, per input requiring grad (forward values of the training graph compared too).

Every ATen op of a graph that fuser translates is fused, each on its own if need be: the
backend keeps single-op regions eager (torch's `allows_single_node_partition=False`), which would
leave most one-op samples untested, so `single_op_regions` lets the partitioner keep them here.

Selection (a FIXED sample for CI): by default the ops of `DEFAULT_OPS` (common pointwise,
reduction, normalisation and shape ops); `FUSER_OPINFO=all` runs the whole database. Ops that
are random, uninitialised or library calls are skipped, each with its reason (`SKIPS`).

Known failures are listed in `EXPECTED_FAILURES`, keyed (op name, variant, dtype, "forward" |
"grad"), each with what is wrong; they are strict xfails, so an entry that passes fails the run
and the list stays honest. A wrong value, dtype or layout is never tolerated silently: it is an
entry with the exact mismatch.

Each failure's message ends with the same check run through torch's `aot_eager` backend
(AOTAutograd without fuser): "aot_eager too" marks torch's failures, "aot_eager passes" fuser's.
A bf16 value mismatch also says whether compiled or eager is nearer the float64 result.

`FUSER_OPINFO_SUMMARY=<file>` appends one JSON line per test (outcome, failure class, message,
which ATen ops were fused and which stayed eager, and why, and the errors of calls that raised
on both sides): the input of a failure survey. `FUSER_OPINFO_TIMEOUT=<seconds>` bounds a test.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import logging
import os
import random
import signal
import sys
import traceback
import types
import unittest

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map

import fuser.torch_backend.partition as fuser_partition
from fuser.torch_backend import make_backend


def _import_op_db():
    """torch's testing internals import `expecttest` (a test dependency of PyTorch itself, not of
    this project) only for their TestCase base class: a stand-in serves when it is missing.

    Every `op.sample_inputs(...)` asks `extract_test_fn` for the unittest.TestCase method it runs
    in (there is none under pytest: it finds None) through `inspect.stack()`, which reads the
    source lines of every frame of pytest's deep stack: 0.1-0.3 s a call, a fifth of this file's
    time. `_extract_test_fn` does the same walk over the frames without reading any source."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        stub.ACCEPT = False
        sys.modules["expecttest"] = stub
    from torch.testing._internal import common_utils
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.opinfo import core as opinfo_core

    for module in (common_utils, opinfo_core):
        if getattr(module, "extract_test_fn", None) is not None:
            module.extract_test_fn = _extract_test_fn
    return op_db


def _extract_test_fn():
    """torch.testing._internal.common_utils.extract_test_fn (the innermost frame whose `self` is a
    unittest.TestCase running one of its test methods gives that method), without inspect.stack()."""
    try:
        frame = sys._getframe(1)
        while frame is not None:
            self_val = frame.f_locals.get("self")
            if isinstance(self_val, unittest.TestCase):
                test_id = self_val.id()
                *_, cls_name, test_name = test_id.rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
            frame = frame.f_back
    except Exception:
        pass
    return None


OP_DB = _import_op_db()

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int64": torch.int64, "bool": torch.bool}
SAMPLES_PER_CASE = 2  # of the first SAMPLE_POOL samples: see _samples
SAMPLE_POOL = 16
# assert_close's defaults for float32 (rtol 1.3e-6, atol 1e-5) and exact integers / bools; bf16's
# default rtol (1.6e-2) with an atol of one bf16 ulp at 1, as fusion rounds once where eager
# rounds after every op of a composite.
TOLERANCES = {torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}

# ------------------------------------------------------------------------------- selection

DEFAULT_OPS = [  # OpInfo full names: "name" is the op's default variant, "name.variant" another
    # unary pointwise
    "abs", "neg", "exp", "log", "sqrt", "sigmoid", "tanh", "erf", "floor", "round", "logical_not", "isnan",
    "nan_to_num", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    # binary / ternary pointwise
    "add", "sub", "mul", "div.no_rounding_mode", "div.trunc_rounding", "div.floor_rounding", "pow", "maximum",
    "eq", "fmod", "logical_and", "bitwise_xor", "where", "clamp", "masked_fill", "lerp", "addcmul",
    # reductions and normalisations
    "sum", "mean", "amax", "var_mean", "argmax", "any", "logsumexp", "softmax", "log_softmax",
    "nn.functional.layer_norm", "nn.functional.cross_entropy", "nn.functional.mse_loss",
    # shape, indexing, casts, factories
    "cat", "stack", "permute", "transpose", "reshape", "squeeze", "unsqueeze", "expand", "select",
    "narrow", "chunk", "split.list_args", "constant_pad_nd", "gather", "index_select", "scatter", "flip",
    "full_like", "to",
]

_RANDOM = "random values: eager and compiled draw different numbers"
_UNINIT = "uninitialised memory: the values are unspecified"
_LIBRARY = "a library call (BLAS/LAPACK/FFT/sparse kernels), never fused: nothing of fuser's to test"
# (fnmatch pattern of "name" or "name.variant", reason); the first match wins.
SKIPS = [
    ("nn.functional.*dropout*", _RANDOM), ("nn.functional.rrelu", _RANDOM), ("bernoulli", _RANDOM),
    ("normal*", _RANDOM), ("uniform", _RANDOM), ("cauchy", _RANDOM), ("exponential", _RANDOM),
    ("geometric", _RANDOM), ("log_normal", _RANDOM), ("multinomial", _RANDOM), ("rand*", _RANDOM),
    ("nn.functional.fractional_max_pool*", _RANDOM), ("svd_lowrank", _RANDOM), ("pca_lowrank", _RANDOM),
    ("empty*", _UNINIT), ("new_empty*", _UNINIT), ("resize_*", _UNINIT),
    ("linalg.*", _LIBRARY), ("fft.*", _LIBRARY), ("sparse.*", _LIBRARY), ("to_sparse", _LIBRARY),
    ("stft", _LIBRARY), ("istft", _LIBRARY),
]


def _full_name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def skip_reason(op) -> str | None:
    for pattern, reason in SKIPS:
        if fnmatch.fnmatchcase(op.name, pattern) or fnmatch.fnmatchcase(_full_name(op), pattern):
            return reason
    if op.has_nondeterministic_output:
        return "OpInfo: has_nondeterministic_output"
    return None


# ------------------------------------------------------------------------- expected failures

# (op name, variant, dtype, "forward" | "grad") -> what is wrong. Strict xfails.
_CHANNELS_LAST_GRAD = ("wrong gradient layout, AOTAutograd's (aot_eager too): x.{}(memory_format=channels_last) of "
                       "a contiguous [2, 3, 2, 3] x, its gradient has strides {}, eager {}")
EXPECTED_FAILURES: dict[tuple[str, str, str, str], str] = {
    # --- bf16 precision: compiled is nearer the float64 result than eager (f32 intermediates)
    ("cross", "", "bfloat16", "forward"):
        "bf16 precision, not an error: 1 of 75 elements of a [5, 3, 5] cross product differs by 0.0625 (rel 3.3%, "
        "cancellation); max error vs float64 0.225 compiled, 0.275 eager (eager rounds each product to bf16)",
    ("nn.functional.instance_norm", "", "bfloat16", "forward"):
        "bf16 precision, not an error: 1 of 72 elements of a [3, 2, 3, 4] instance_norm differs by 0.024 (near 0, "
        "rel 82%); max error vs float64 0.0485 compiled, 0.0942 eager",
    # --- wrong layouts (fuser's: aot_eager passes)
    ("matrix_exp", "", "float32", "grad"):
        "wrong gradient layout: matrix_exp of a [5, 5, 5] x, its gradient has strides [50, 10, 1], eager "
        "[100, 10, 1] (both slices of a wider buffer)",
    # --- wrong gradient layouts that are AOTAutograd's (aot_eager has them too)
    ("to", "", "float32", "grad"):
        "wrong gradient layout, AOTAutograd's (aot_eager too): x.to(float64, memory_format=channels_last) of a "
        "contiguous [5, 5, 5, 5] x, its gradient has strides [125, 1, 25, 5], eager [125, 25, 5, 1]",
    **{(name, "", "float32", "grad"): _CHANNELS_LAST_GRAD.format(name, "[18, 1, 9, 3]", "[18, 6, 3, 1]")
       for name in ("float", "double", "half", "bfloat16", "cdouble", "chalf")},
    ("cfloat", "", "float32", "grad"): _CHANNELS_LAST_GRAD.format("cfloat", "[36, 2, 18, 6]", "[36, 12, 6, 2]"),
    ("ormqr", "", "float32", "grad"):
        "wrong gradient layout, AOTAutograd's (aot_eager too): ormqr(a [5, 5], tau, c [5, 5], left=True, "
        "transpose=True), the gradient of a has strides [5, 1], eager [1, 5]",
    ("rot90", "", "float32", "grad"):
        "wrong gradient layout, AOTAutograd's (aot_eager too): rot90 of a [5, 5, 5] x, its gradient has strides "
        "[25, 5, 1], eager [5, 25, 1]",
}


def _selected_ops():
    if os.environ.get("FUSER_OPINFO", "").strip().lower() == "all":
        return list(OP_DB)
    wanted = set(DEFAULT_OPS)
    ops = [op for op in OP_DB if _full_name(op) in wanted]
    missing = wanted - {_full_name(op) for op in ops}
    assert not missing, f"DEFAULT_OPS names ops that op_db lacks: {sorted(missing)}"
    return ops


def _cases(kind: str):
    cases = []
    for op in _selected_ops():
        supported = op.supported_dtypes("cpu")
        for dname, dtype in DTYPES.items():
            if dtype not in supported:
                continue
            if kind == "grad" and (dtype != torch.float32 or not op.supports_autograd):
                continue
            test_id = f"{_full_name(op)}-{dname}"
            marks = []
            reason = skip_reason(op)
            if reason is not None:
                marks.append(pytest.mark.skip(reason=reason))
            else:
                why = EXPECTED_FAILURES.get((op.name, op.variant_test_name, dname, kind))
                if why is not None:
                    marks.append(pytest.mark.xfail(strict=True, reason=why))
            cases.append(pytest.param(op, dtype, id=test_id, marks=marks))
    return cases


# ------------------------------------------------------------------------------- harness


@pytest.fixture(autouse=True)
def quiet_trace_log(caplog):
    """torch's structured-trace logger writes DEBUG records of every compile: a failure's report
    would show thousands of them."""
    caplog.set_level(logging.WARNING, logger="torch.__trace")


@pytest.fixture(autouse=True)
def time_limit():
    """FUSER_OPINFO_TIMEOUT=<seconds>: a test running longer fails (a survey of the whole
    database goes on past a hang)."""
    seconds = int(os.environ.get("FUSER_OPINFO_TIMEOUT", "0") or 0)
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"test ran past FUSER_OPINFO_TIMEOUT={seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def single_op_regions(monkeypatch):
    """The backend's partitioner, keeping regions of one ATen op (see the module docstring)."""
    base = fuser_partition.CapabilityBasedPartitioner

    class SingleOpPartitioner(base):
        def __init__(self, *args, **kwargs):
            kwargs["allows_single_node_partition"] = True
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(fuser_partition, "CapabilityBasedPartitioner", SingleOpPartitioner)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Mismatch(AssertionError):
    """Compiled and eager disagree; `kind` classifies it (value, dtype, stride, crash...)."""

    def __init__(self, kind: str, message: str, leaf: int | None = None):
        super().__init__(f"[{kind}] {message}")
        self.kind = kind
        self.message = message
        self.leaf = leaf  # which output (in tree_flatten order) differs in value


def _rank_sum(sample) -> int:
    return sum(t.dim() for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]
               if isinstance(t, torch.Tensor))


def _samples(op, dtype, requires_grad: bool):
    """Two samples, deterministically: the op's first, and of the next ones (up to SAMPLE_POOL)
    the first of the highest total rank. The first samples of most ops are 0-d or 1-d (a 0-d
    reduction computes nothing); the second reaches the broadcasts and multi-dim forms."""
    torch.manual_seed(0)
    random.seed(0)
    pool = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=requires_grad), SAMPLE_POOL))
    if len(pool) <= SAMPLES_PER_CASE:
        return pool
    rest = pool[1:]
    ranks = [_rank_sum(s) for s in rest]
    return [pool[0], rest[ranks.index(max(ranks))]]


def _copy(value):
    """An exact copy of a sample argument: same sizes, strides, offset and dtype, its own memory
    (the op may mutate it), a leaf that requires grad where the original did."""
    def copy(t):
        if not isinstance(t, torch.Tensor):
            return t
        d = t.detach()
        out = torch.empty(0, dtype=d.dtype, device=d.device)
        out.set_(d.untyped_storage().clone(), d.storage_offset(), d.size(), d.stride())
        return out.requires_grad_(t.requires_grad)

    return tree_map(copy, value)


def _call_args(sample):
    return _copy((sample.input, tuple(sample.args), dict(sample.kwargs)))


def _describe(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]


_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _raised_in_fuser(e: BaseException) -> bool:
    """Whether the exception (or one it chains) passed through this project's own code."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for frame in traceback.extract_tb(e.__traceback__):
            if frame.filename.startswith(_REPO + os.sep) and os.sep + ".venv" + os.sep not in frame.filename \
                    and not frame.filename.endswith("test_opinfo.py"):
                return True
        e = e.__cause__ or getattr(e, "inner_exception", None) or e.__context__
    return False


def _innermost(e: BaseException) -> BaseException:
    """The original error under Dynamo's wrappers (BackendCompilerFailed and the like)."""
    while True:
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if inner is None or inner is e:
            return e
        e = inner


def _compare(got, want, dtype, what: str) -> None:
    got_leaves, got_spec = tree_flatten(got)
    want_leaves, want_spec = tree_flatten(want)
    if got_spec != want_spec:
        raise Mismatch("structure", f"{what}: compiled returned {got_spec}, eager {want_spec}")
    tol = TOLERANCES.get(dtype, {})
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        where = f"{what}[{i}]" if len(want_leaves) > 1 else what
        if isinstance(g, torch.Tensor) != isinstance(w, torch.Tensor):
            raise Mismatch("type", f"{where}: compiled gave {type(g).__name__}, eager {type(w).__name__}")
        if not isinstance(w, torch.Tensor):
            if type(g) is not type(w) or not (g == w or (g != g and w != w)):
                raise Mismatch("value", f"{where}: compiled {g!r}, eager {w!r}")
            continue
        if g.dtype != w.dtype:
            raise Mismatch("dtype", f"{where}: compiled dtype {g.dtype}, eager {w.dtype} (shape {list(w.shape)})")
        if g.shape != w.shape:
            raise Mismatch("shape", f"{where}: compiled shape {list(g.shape)}, eager {list(w.shape)}")
        try:
            torch.testing.assert_close(g.detach(), w.detach(), equal_nan=True, check_stride=False, **tol)
        except AssertionError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            raise Mismatch("value", f"{where} ({w.dtype}, shape {list(w.shape)}): " + "; ".join(lines[:4]),
                           leaf=i) from None
        if w.numel() > 0:
            gs = [s for s, n in zip(g.stride(), g.shape) if n > 1]
            ws = [s for s, n in zip(w.stride(), w.shape) if n > 1]
            if gs != ws:
                raise Mismatch("stride", f"{where} (shape {list(w.shape)}): compiled strides {list(g.stride())}, "
                                         f"eager {list(w.stride())}")


class Run:
    """What one test saw: the graph reports of its compiles and the errors both sides raised."""

    def __init__(self, backend: str = "fuser"):
        self.backend = backend  # "fuser", or "aot_eager" to tell torch's failures from fuser's
        self.reports = []
        self.errors = []  # (sample index, eager error, compiled error), where both raised
        self._fuser_backend = None  # one per test, made at its first compile (see `compiled`)

    def compiled(self, fn, args, kwargs):
        """`fn` compiled afresh (Dynamo reset) and called. The test's samples share one fuser
        backend: building one costs ~0.1 s (its decomposition table), and it keeps no state
        between compiles but the reports list."""
        torch._dynamo.reset()
        backend = self.backend
        if backend == "fuser":
            if self._fuser_backend is None:
                self._fuser_backend = make_backend(self.reports)
            backend = self._fuser_backend
        return torch.compile(fn, backend=backend)(*args, **kwargs)

    def check_refusals(self, start: int, index: int) -> None:
        """A region fuser refused at partition time (its ops then run eagerly, so values agree)
        for any reason but having nothing to compute: its definition or kernels failed to build,
        an error of fuser's hidden by the eager fallback."""
        for report in self.reports[start:]:
            for region in report.regions:
                if region.failed is not None and not region.failed.startswith("nothing to compute"):
                    ops = ", ".join(sorted(set(region.ops))[:6])
                    raise Mismatch("refused", f"sample {index}: {report.kind} region refused ({ops}): "
                                              f"{region.failed.splitlines()[0][:300]}")

    def both(self, fn, sample, index: int):
        """(eager result, eager args), (compiled result, compiled args), or None when both raised."""
        e_in, e_args, e_kwargs = _call_args(sample)
        c_in, c_args, c_kwargs = _call_args(sample)
        try:
            want = fn(e_in, *e_args, **e_kwargs)
            eager_error = None
        except Exception as e:
            want, eager_error = None, e
        try:
            got = self.compiled(fn, (c_in, *c_args), c_kwargs)
            compiled_error = None
        except Exception as e:
            got, compiled_error = None, e
        if eager_error is not None:
            if compiled_error is None:
                raise Mismatch("no-error", f"sample {index}: eager raised {_describe(eager_error)}, compiled "
                                           f"returned a result")
            self.errors.append((index, _describe(eager_error), _describe(_innermost(compiled_error))))
            return None
        if compiled_error is not None:
            inner = _innermost(compiled_error)
            kind = "crash-fuser" if _raised_in_fuser(compiled_error) else "crash-torch"
            raise Mismatch(kind, f"sample {index}: {_describe(inner)}") from compiled_error
        return (want, (e_in, e_args, e_kwargs)), (got, (c_in, c_args, c_kwargs))


def _sample_runs(op, dtype, run: Run, requires_grad: bool):
    """Each sample of `op` run eagerly and compiled (samples that fail alike are skipped):
    (index, sample, eager result and inputs, compiled result and inputs); after the caller's
    checks of a sample, the refusals it caused are checked."""
    fn = _op_function(op)
    for index, sample in enumerate(_samples(op, dtype, requires_grad=requires_grad)):
        start = len(run.reports)
        pair = run.both(fn, sample, index)
        if pair is None:
            continue
        yield index, sample, pair
        run.check_refusals(start, index)


def _check_forward(op, dtype, run: Run):
    fn = _op_function(op)
    for index, sample, ((want, e_args), (got, c_args)) in _sample_runs(op, dtype, run, requires_grad=False):
        try:
            _compare(got, want, dtype, f"sample {index} output")
        except Mismatch as m:
            if m.kind != "value" or m.leaf is None or not dtype.is_floating_point:
                raise
            raise Mismatch("value", f"{m.message}; {_against_f64(fn, sample, got, want, m.leaf)}") from None
        _compare(c_args, e_args, dtype, f"sample {index} inputs after the call")


def _against_f64(fn, sample, got, want, leaf: int) -> str:
    """Which of compiled and eager is nearer the op computed in float64 (inputs upcast): a fusion
    keeps f32 intermediates where eager may round every op's result, so a bf16 difference is
    precision where compiled is the nearer, and an error where it is not."""
    def up(t):
        return t.detach().double() if isinstance(t, torch.Tensor) and t.dtype.is_floating_point else t

    try:
        ref = tree_flatten(fn(*tree_map(up, (sample.input, *sample.args)), **tree_map(up, dict(sample.kwargs))))[0]
        r = ref[leaf].double()
    except Exception as e:
        return f"no float64 reference ({_describe(e)})"
    g, w = tree_flatten(got)[0][leaf].double(), tree_flatten(want)[0][leaf].double()
    if r.shape != g.shape:
        return "no float64 reference (other shape)"
    finite = r.isfinite() & g.isfinite() & w.isfinite()
    g_err = (g - r)[finite].abs().max().item() if finite.any() else 0.0
    w_err = (w - r)[finite].abs().max().item() if finite.any() else 0.0
    verdict = "compiled nearer: precision" if g_err <= w_err else "compiled farther: an error"
    return f"vs float64: compiled max error {g_err:.3g}, eager {w_err:.3g} ({verdict})"


def _check_grad(op, dtype, run: Run):
    for index, sample, ((want, e_args), (got, c_args)) in _sample_runs(op, dtype, run, requires_grad=True):
        _compare(got, want, dtype, f"sample {index} output (training graph)")
        want_outs = [t for t in tree_flatten(sample.output_process_fn_grad(want))[0]
                     if isinstance(t, torch.Tensor) and t.requires_grad]
        got_outs = [t for t in tree_flatten(sample.output_process_fn_grad(got))[0]
                    if isinstance(t, torch.Tensor) and t.requires_grad]
        if len(got_outs) != len(want_outs):
            raise Mismatch("grad-structure", f"sample {index}: {len(got_outs)} compiled outputs require grad, "
                                             f"{len(want_outs)} eager")
        want_leaves = [t for t in tree_flatten(e_args)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        got_leaves = [t for t in tree_flatten(c_args)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        if want_outs and want_leaves:
            _check_grads_of(index, want_outs, want_leaves, got_outs, got_leaves, dtype, run)


def _check_grads_of(index, want_outs, want_leaves, got_outs, got_leaves, dtype, run: Run) -> None:
    gen = torch.Generator().manual_seed(1)
    cotangents = [torch.randn(w.shape, generator=gen, dtype=torch.float32).to(w.dtype) for w in want_outs]
    try:
        want_grads, eager_error = torch.autograd.grad(want_outs, want_leaves, cotangents, allow_unused=True), None
    except Exception as e:
        want_grads, eager_error = None, e
    try:
        got_grads = torch.autograd.grad(got_outs, got_leaves, cotangents, allow_unused=True)
    except Exception as e:
        if eager_error is not None:
            run.errors.append((index, _describe(eager_error), _describe(_innermost(e))))
            return
        kind = "grad-crash-fuser" if _raised_in_fuser(e) else "grad-crash-torch"
        raise Mismatch(kind, f"sample {index} backward: {_describe(_innermost(e))}") from e
    if eager_error is not None:
        raise Mismatch("grad-no-error", f"sample {index}: eager backward raised {_describe(eager_error)}, "
                                        f"compiled returned gradients")
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        if (g is None) != (w is None):
            shown = ["None" if v is None else "a tensor" for v in (g, w)]
            raise Mismatch("grad-structure", f"sample {index} grad[{i}]: compiled {shown[0]}, eager {shown[1]}")
        if w is not None:
            try:
                _compare(g, w, dtype, f"sample {index} grad[{i}]")
            except Mismatch as m:
                raise Mismatch(f"grad-{m.kind}", m.message) from None


def _op_function(op):
    """The call under test: the OpInfo's function variant, in a function Dynamo traces."""
    target = op.get_op()

    def fn(*args, **kwargs):
        return target(*args, **kwargs)

    return fn


# ------------------------------------------------------------------------------- summary


def _record(op, dtype, kind: str, run: Run, error: BaseException | None) -> None:
    path = os.environ.get("FUSER_OPINFO_SUMMARY")
    if not path:
        return
    fused, eager, refused = [], {}, []
    for report in run.reports:
        for region in report.regions:
            if region.failed is None:
                fused += region.ops
            else:
                refused.append(f"{report.kind}: {region.failed}")
        for name in report.eager_ops:
            eager[name] = report.reasons.get(name, "")
    entry = dict(op=op.name, variant=op.variant_test_name, dtype=str(dtype).replace("torch.", ""), kind=kind,
                 outcome="pass" if error is None else "fail",
                 failure=None if error is None else getattr(error, "kind", type(error).__name__),
                 message=None if error is None else str(error)[:600],
                 fused=sorted(set(fused)), eager=eager, refused=refused, both_raised=run.errors)
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\n")


def _run_case(check, op, dtype, kind):
    run = Run()
    try:
        check(op, dtype, run)
    except Mismatch as e:
        annotated = Mismatch(e.kind, f"{e.message}; {_with_aot_eager(check, op, dtype)}")
        _record(op, dtype, kind, run, annotated)
        raise annotated from e.__cause__  # a crash keeps its traceback
    except BaseException as e:
        _record(op, dtype, kind, run, e)
        raise
    _record(op, dtype, kind, run, None)


def _with_aot_eager(check, op, dtype) -> str:
    """The same check with torch's aot_eager backend (AOTAutograd, no fuser): says whose failure
    it is."""
    try:
        check(op, dtype, Run("aot_eager"))
    except Mismatch as e:
        return f"aot_eager too: {e}"
    except Exception as e:
        return f"aot_eager: {_describe(e)}"
    return "aot_eager passes"


# ------------------------------------------------------------------------------- tests


@pytest.mark.parametrize(("op", "dtype"), _cases("forward"))
def test_forward(op, dtype):
    _run_case(_check_forward, op, dtype, "forward")


@pytest.mark.parametrize(("op", "dtype"), _cases("grad"))
def test_grad(op, dtype):
    _run_case(_check_grad, op, dtype, "grad")
