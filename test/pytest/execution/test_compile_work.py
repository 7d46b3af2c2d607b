"""Work a compile does, counted (never timed): no garbage collection while a fusion is defined
or compiled (lowering/gc_pause.py), and `fd.segment` prints a segment's text only when asked
for it."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering import gc_pause
from fuser.lowering.execution import compiled as compiled_module
from fuser.lowering.execution import segments_view
from lowering_checks import requires_cpu_backend


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def _chain(n: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        v = x
        for i in range(n):
            v = fd.ops.neg(v) if i % 2 else fd.ops.mul(v, 0.5)
        fd.add_output(v)
        fd.add_output(fd.ops.sum(v, [1]))
    return fd


def test_paused_gc_nests_and_restores(collector_on):
    with gc_pause.paused_gc():
        assert not gc.isenabled()
        with gc_pause.paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()


def test_paused_gc_leaves_a_disabled_collector_disabled(collector_on):
    gc.disable()
    with gc_pause.paused_gc():
        pass
    assert not gc.isenabled()


def test_paused_gc_from_threads_enables_once_all_have_left(collector_on):
    inside, release = threading.Barrier(3), threading.Event()

    def compile_region():
        with gc_pause.paused_gc():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=compile_region) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert not gc.isenabled()
    release.set()
    for t in threads:
        t.join()
    assert gc.isenabled()


@requires_cpu_backend
def test_no_collection_runs_while_a_fusion_compiles(collector_on, monkeypatch):
    """Passes, segmentation, schedules and emission run with the collector off; it is on again
    for the caller."""
    from fuser.lowering.execution import executor

    states = []
    real = compiled_module.build_compiled_fusion

    def spy(*args, **kwargs):
        states.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(executor, "build_compiled_fusion", spy)
    fd = _chain(20)
    x = np.random.default_rng(0).standard_normal((3, 8), dtype=np.float32)
    y, s = fd.execute([x], backend="cpu")
    expected = x * 0.5 ** 10
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    assert states == [False] and gc.isenabled()


def test_segment_text_is_printed_when_asked_for(monkeypatch):
    printed = []
    real = segments_view._fusion_text
    monkeypatch.setattr(segments_view, "_fusion_text", lambda *a: printed.append(a[0]) or real(*a))
    with FusionDefinition() as fd:  # a sum over rows, then a kernel reading it per column
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.mul(x, fd.ops.broadcast(fd.ops.sum(x, [1]), [False, True])), [0]))
    segments = fd.segment([np.ones((2, 4), np.float32)])
    assert len(segments) >= 2 and printed == []  # segmenting prints nothing
    assert all(s.scheduler for s in segments) and printed == []
    text = str(segments)
    names = [f"segment_{s.index}" for s in segments]
    assert printed == names  # each once: the text is kept
    str(segments)
    assert printed == names
    assert all(f"func.func @{n}" in text for n in names) and "fuser.reduction sum" in segments[0].text


def test_no_collection_runs_while_a_fusion_is_defined(collector_on):
    with FusionDefinition() as fd:
        assert not gc.isenabled()
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
    assert gc.isenabled()
    with pytest.raises(KeyError):
        with FusionDefinition():
            raise KeyError("an error inside the definition")
    assert gc.isenabled()
