"""How faults are reported: an out-of-range index fails under torch.compile as it fails eagerly
(same exception type), names the op its author wrote and says when an extent has no valid index;
an alias_input into an input that cannot be written is refused before anything runs, naming the
input and the output; the suite's example budgets refuse values that are not counts.

(The cpu backend's compiler named in its failures: execution/test_settings.py; caches deleted under
a running process: backends/test_compile_latency.py; FUSER_TEST_BACKENDS=",":
api/test_machine_check.py.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from fuser.lowering.errors import IndexRangeError
from fuser.lowering.execution.index_errors import WrittenAs, as_written
from lowering_checks import requires_cpu_backend
from torch_checks import fresh_dynamo  # noqa: F401

SUITE = Path(__file__).parents[1]  # test/pytest
X = np.arange(12, dtype=np.float32).reshape(3, 4)


# --------------------------------------------------------------------------- index errors: the op as written


def _computed_gather() -> FusionDefinition:
    """A gather with exact extents (the passes make it a take_along_axis) of a computed index."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        i = fd.define_tensor([-1, -1], dtype=DataType.Int)
        fd.add_output(fd.ops.gather(x, fd.ops.add(i, fd.define_scalar(1, DataType.Int)), 1))
    return fd


@requires_cpu_backend
def test_a_computed_gather_index_is_reported_as_the_gather():
    fd = _computed_gather()
    bad = np.full((3, 4), 5, np.int64)
    for _ in range(2):  # the full path, then a launch plan's call
        with pytest.raises(IndexRangeError, match=r"index 6 is out of range for fuser.gather along dim 1 of extent 4 "
                                                  r"\(valid: 0..3; found by the in-kernel check\)") as caught:
            fd.execute([X, bad], backend="cpu")
        assert (caught.value.op, caught.value.site, caught.value.index) == ("fuser.gather", 0, 6)
    assert "fuser.take_along_axis" in str(fd.segment([X, bad]))  # what the kernel checked


def _named(*names):
    return [SimpleNamespace(name=f"fuser.{n}") for n in names]


@pytest.mark.parametrize("author, compiled, expected", [
    # gathers become take_along_axis in place: each is known
    (("gather", "take_along_axis", "gather"), ("take_along_axis",) * 3,
     [(0, "gather"), (1, "take_along_axis"), (2, "gather")]),
    # a dead index op erased: the others are still known where only one matching exists
    (("gather", "index_select", "gather"), ("take_along_axis", "gather"), [(0, "gather"), (2, "gather")]),
    # which of two was erased cannot be told: the position is unknown, and the name is both
    (("gather", "take_along_axis"), ("take_along_axis",), [(None, "gather or fuser.take_along_axis")]),
    (("gather", "gather"), ("take_along_axis",), [(None, "gather")]),
], ids=["replaced", "one-erased", "ambiguous", "ambiguous-same-name"])
def test_compiled_index_ops_are_matched_to_the_ops_written(author, compiled, expected):
    found = as_written(_named(*author), _named(*compiled))
    assert found == tuple(WrittenAs(site, f"fuser.{name}") for site, name in expected)


def test_index_ops_the_passes_could_not_have_made_keep_their_compiled_names():
    assert as_written(_named("take_along_axis"), _named("gather")) == (WrittenAs(None, "fuser.gather"),)


# --------------------------------------------------------------------------- index errors: an empty extent


@requires_cpu_backend
@pytest.mark.parametrize("computed", [False, True], ids=["input-index", "computed-index"])
def test_an_empty_extent_says_no_index_is_valid(computed):
    """Every index of an empty extent is out of range: the host says so before launching (the
    kernel's stand-in index 0 would be out of bounds too: memcheck caught that read)."""
    fd = _computed_gather() if computed else _input_gather()
    with pytest.raises(IndexError, match=r"of extent 0 \(the extent is empty: no index is valid") as caught:
        fd.execute([np.zeros((3, 0), np.float32), np.zeros((3, 2), np.int64)], backend="cpu")
    assert "0..-1" not in str(caught.value)


def _input_gather() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        i = fd.define_tensor([-1, -1], dtype=DataType.Int)
        fd.add_output(fd.ops.gather(x, i, 1))
    return fd


# --------------------------------------------------------------------------- index errors under torch.compile


def _gather(x, i):
    return torch.gather(x * 2, 1, i) + 1


def _computed_gather_index(x, i):
    return torch.gather(x * 2, 1, i + 1) + 1


def _scatter_(x, i):
    return (x * 2).scatter_(1, i, 3.0) + 1


def _scatter_one_per_row(x, i):
    """One index a row (nll_loss's backward form): translated as a one-hot select, whose index is
    checked all the same (compared bare it would match no position: the row silently unchanged)."""
    return (x * 2).scatter(1, i[:, :1], 3.0) + 1


def _index_select(x, i):
    return torch.index_select(x * 2, 0, i[0]) + 1


def _cross_entropy(x, i):
    """nll_loss, decomposed into a gather: eager raises IndexError ("Target 5 is out of bounds.")."""
    return torch.nn.functional.cross_entropy(x * 2, i[:, 0])


@requires_cpu_backend
@pytest.mark.parametrize("fn", [_gather, _computed_gather_index, _scatter_, _scatter_one_per_row, _index_select,
                                _cross_entropy],
                         ids=lambda f: f.__name__.strip("_"))
def test_an_out_of_range_index_fails_as_it_fails_eagerly(fn):
    """The same exception type as eager torch on CPU (RuntimeError for gather and scatter_,
    IndexError for index_select and cross_entropy), raised by the fused region, with the index,
    the extent and the ATen op in the message."""
    x, i = torch.randn(4, 4), torch.full((4, 4), 5)
    with pytest.raises(Exception) as eager:
        fn(x, i)
    with pytest.raises(Exception) as compiled:
        torch.compile(fn, backend="fuser")(x, i)
    assert type(compiled.value) is type(eager.value), f"eager: {eager.value!r}\ncompiled: {compiled.value!r}"
    message = str(compiled.value)
    assert "in the fused region" in message and "of extent 4" in message
    if type(eager.value) is RuntimeError:  # eager's own words first
        assert message.startswith(str(eager.value) + " (aten.")


# --------------------------------------------------------------------------- alias_input into an unwritable input


def _in_place_add() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, fd.define_scalar(1.0)), alias_input=x)
    return fd


def _read_only():
    a = np.zeros((2, 3), np.float32)
    a.flags.writeable = False
    return a


UNWRITABLE = {
    "read-only-numpy": (_read_only, "it is a read-only numpy array"),
    "numpy-broadcast_to": (lambda: np.broadcast_to(np.zeros(3, np.float32), (2, 3)), "it is a read-only numpy array"),
    "numpy-stride-0": (lambda: np.lib.stride_tricks.as_strided(np.zeros(3, np.float32), (2, 3), (0, 4)),
                       r"it has stride 0 along dim 0 \(an expanded view"),
    "torch-expand": (lambda: torch.zeros(1, 3).expand(2, 3), r"it has stride 0 along dim 0 \(an expanded view"),
}


@pytest.mark.parametrize("make, why", UNWRITABLE.values(), ids=UNWRITABLE.keys())
@pytest.mark.parametrize("backend", ["reference", pytest.param("cpu", marks=requires_cpu_backend)])
def test_an_alias_into_an_unwritable_input_is_refused_before_running(make, why, backend):
    fd = _in_place_add()
    target = make()
    with pytest.raises(ValueError, match=r"^output 0 \(alias_input of input 0 \(f32\[\?, \?\]\)\) cannot be written "
                                         rf"into input 0: {why}"):
        fd.execute([target], backend=backend)
    assert fd.cache_info().misses == 0  # nothing compiled, nothing ran
    assert not np.asarray(target).any()


def test_an_alias_into_an_empty_expanded_input_writes_nothing():
    """Nothing to write, nothing shared: a stride-0 dim of an empty input is no reason to refuse."""
    target = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (0, 3), (4, 0))
    assert _in_place_add().execute([target], backend="reference") == []


# --------------------------------------------------------------------------- the suite's example budgets


def _import_fresh(module: str, monkeypatch) -> object:
    """`module` (a file of test/pytest, its path without .py) imported anew, as collection does, under
    another name."""
    spec = importlib.util.spec_from_file_location(f"fresh_{Path(module).name}", SUITE / f"{module}.py")
    loaded = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, loaded)  # dataclasses look their module up there
    spec.loader.exec_module(loaded)
    return loaded


BUDGETS = {"FUSER_HYPOTHESIS_EXAMPLES": ("passes/test_preseg_passes", "EXAMPLES"),
           "FUSER_FUZZ_EXAMPLES": ("family_strategies", "CAMPAIGN")}


@pytest.mark.parametrize("value", ["abc", "-5", "0", "2.5"])
@pytest.mark.parametrize("variable", BUDGETS)
def test_an_example_budget_that_is_no_count_stops_the_session(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(pytest.UsageError, match=rf"^{variable}={value!r}: expected a number of examples, a whole "
                                                r"number >= 1 \(unset for the default\)$"):
        _import_fresh(BUDGETS[variable][0], monkeypatch)


@pytest.mark.parametrize("variable", BUDGETS)
def test_an_example_budget_is_read_as_a_count(monkeypatch, variable):
    monkeypatch.setenv(variable, " 7 ")
    module, name = BUDGETS[variable]
    assert getattr(_import_fresh(module, monkeypatch), name) == 7
