"""The executor cache: `FusionCache` (LRU, counters, thread safety, miss-reason log) and
`make_key` (what makes a hit and what a miss), end to end with a memoizing stand-in executor
(resize_fusions.ReferenceExecutor: a miss concretizes a clone, the reference interpreter runs
it) on random shape/scalar sequences and on the RoPE sequence-length sweep."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuser_dialect.extents import ExtentPlan
from fuser_dialect.fusion import the_fusion
from fuser_dialect.inputs import check_inputs
from fuser_dialect.types import DYNAMIC, TensorType
from fuser.lowering.execution.cache import FusionCache, enable_recompile_log_from_env, logger, maxsize_from_env
from fuser.lowering.execution.cache_key import InputLayout, layout_of, make_key, stride_layout
from fuser.passes.concretize import concretize
from resize_fusions import (
    CASES, ReferenceExecutor, pad_scalar_widths, pad_to_broadcast, printed, rope, rope_inputs, rope_oracle,
)

log = logging.getLogger(__name__)  # summaries: shown with --log-cli-level=INFO or on failure


def close(a, b) -> bool:
    return all(x.shape == y.shape and np.allclose(x, y, rtol=1e-5, atol=1e-5) for x, y in zip(a, b))


# --- FusionCache ---------------------------------------------------------------------------------


def test_hits_misses_and_lru_eviction_order():
    cache: FusionCache[str] = FusionCache(maxsize=2)
    built = []

    def build(k):
        return lambda: built.append(k) or f"v{k}"

    assert cache.lookup_or_build("a", build("a")) == "va"
    assert cache.lookup_or_build("b", build("b")) == "vb"
    assert cache.lookup_or_build("a", build("a")) == "va"  # hit: "a" is now the most recent
    cache.lookup_or_build("c", build("c"))  # evicts "b", the least recently used
    assert cache.info().entries == ["a", "c"]
    cache.lookup_or_build("b", build("b"))  # rebuilt: evicts "a"
    info = cache.info()
    assert (info.hits, info.misses, info.evictions, info.maxsize) == (1, 4, 2, 2)
    assert info.entries == ["c", "b"] and built == ["a", "b", "c", "b"]


def test_maxsize_from_env_and_argument(monkeypatch):
    monkeypatch.setenv("FUSER_CACHE_SIZE", "3")
    assert FusionCache().maxsize == 3
    assert FusionCache(maxsize=7).maxsize == 7
    monkeypatch.delenv("FUSER_CACHE_SIZE")
    assert maxsize_from_env() == 100
    monkeypatch.setenv("FUSER_CACHE_SIZE", "lots")
    with pytest.raises(ValueError, match="FUSER_CACHE_SIZE='lots': expected a positive integer"):
        FusionCache()
    with pytest.raises(ValueError, match="maxsize must be a positive integer, got 0"):
        FusionCache(maxsize=0)


def test_concurrent_lookups_of_one_key_build_once():
    cache: FusionCache[object] = FusionCache()
    calls = []
    gate = threading.Event()

    def build():
        calls.append(threading.get_ident())
        gate.wait(5)  # hold the build until every thread is waiting on it
        return object()

    results = [None] * 8

    def worker(i):
        results[i] = cache.lookup_or_build("k", build)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1
    assert all(r is results[0] for r in results)
    info = cache.info()
    assert (info.misses, info.hits) == (1, 7)


def test_builds_of_different_keys_run_concurrently():
    cache: FusionCache[int] = FusionCache()
    barrier = threading.Barrier(3, timeout=5)

    def build(k):
        def run():
            barrier.wait()  # only passes if all three builds are in flight at once
            return k

        return run

    results = {}
    threads = [threading.Thread(target=lambda k=k: results.setdefault(k, cache.lookup_or_build(k, build(k))))
               for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {0: 0, 1: 1, 2: 2}


def test_failed_build_reaches_waiters_and_is_not_cached():
    cache: FusionCache[str] = FusionCache()
    started, gate = threading.Event(), threading.Event()
    errors = []

    def failing():
        started.set()
        gate.wait(5)
        raise RuntimeError("nvrtc: boom")

    def call(build):
        try:
            cache.lookup_or_build("k", build)
        except RuntimeError as e:
            errors.append(str(e))

    owner = threading.Thread(target=call, args=(failing,))
    owner.start()
    started.wait(5)
    waiters = [threading.Thread(target=call, args=(lambda: "not built: the key is pending",)) for _ in range(3)]
    for t in waiters:
        t.start()
    deadline = time.monotonic() + 5
    while cache.info().hits < 3 and time.monotonic() < deadline:  # all three wait on the build
        time.sleep(0.01)
    gate.set()
    for t in [owner, *waiters]:
        t.join(5)
    assert errors == ["nvrtc: boom"] * 4
    assert "k" not in cache
    assert cache.lookup_or_build("k", lambda: "rebuilt") == "rebuilt"
    assert cache.info().misses == 2


# --- the miss log -----------------------------------------------------------------------------------


def test_miss_log_names_what_changed(caplog):
    caplog.set_level(logging.INFO, logger="fuser.recompile")
    ex = ReferenceExecutor(rope())
    rng = np.random.default_rng(0)
    ex.execute(rope_inputs(rng, 2, 3, 16, 8, 64))
    ex.execute(rope_inputs(rng, 4, 1, 16, 8, 64))  # batch and heads: a hit, no log line
    ex.execute(rope_inputs(rng, 2, 3, 24, 8, 64))
    messages = [r.getMessage() for r in caplog.records if r.name == "fuser.recompile"]
    assert len(messages) == 2
    assert messages[0].startswith("compiling: first execution (no cached entry): backend=reference")
    assert messages[1] == (
        "recompiling: resize extents of fuser.slice #0 (dim 0) changed: (64, 0, 16) -> (64, 0, 24); "
        "resize extents of fuser.slice #1 (dim 0) changed: (64, 0, 16) -> (64, 0, 24)"
    )


def test_miss_log_broadcast_decision_layout_and_eviction(caplog):
    caplog.set_level(logging.INFO, logger="fuser.recompile")
    ex = ReferenceExecutor(pad_scalar_widths(), resize_extents=False, maxsize=1)
    x = np.ones((2, 4), np.float32)
    ex.execute([x, np.ones((2, 3), np.float32), 1, -2])
    ex.execute([x, np.ones((2, 1), np.float32), 1, -4])  # extent 1: broadcast
    ex.execute([np.asfortranarray(np.ones((3, 4), np.float32)), np.ones((3, 1), np.float32), 1, -4])
    ex.execute([x, np.ones((2, 3), np.float32), 1, -2])  # evicted by the bound of 1
    messages = [r.getMessage() for r in caplog.records if r.name == "fuser.recompile"]
    assert messages[1] == "recompiling: broadcast decision of fuser.pad #0 (dim 1) changed: iteration -> broadcast"
    assert messages[2] == (
        "recompiling: layout of input 0 changed: stride order [1, 0] (dense) -> stride order [0, 1] (dense)")
    assert messages[3] == (
        "recompiling: this key was evicted earlier (LRU bound 1 reached); the nearest cached key differs: "
        "layout of input 0 changed: stride order [0, 1] (dense) -> stride order [1, 0] (dense); "
        "broadcast decision of fuser.pad #0 (dim 1) changed: broadcast -> iteration")


def test_no_miss_reason_is_computed_when_the_log_is_off(caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="fuser.recompile")
    cache: FusionCache[int] = FusionCache()
    monkeypatch.setattr(cache, "_miss_reason", lambda key: pytest.fail("reason computed with the log off"))
    cache.lookup_or_build("a", lambda: 1)
    cache.lookup_or_build("b", lambda: 2)


def test_fuser_log_env_prints_misses_to_stderr(monkeypatch, capfd):
    monkeypatch.setenv("FUSER_LOG", "recompile")
    before = list(logger.handlers)
    level = logger.level
    try:
        enable_recompile_log_from_env()
        enable_recompile_log_from_env()  # idempotent: one handler
        assert len(logger.handlers) == len(before) + 1
        cache: FusionCache[int] = FusionCache()
        cache.lookup_or_build("a", lambda: 1)
        assert "[fuser] compiling: first execution (no cached entry): 'a'" in capfd.readouterr().err
    finally:
        for h in list(logger.handlers):
            if h not in before:
                logger.removeHandler(h)
        logger.setLevel(level)


# --- make_key: what is a hit and what is a miss ----------------------------------------------------------


def _key(fd, inputs, resize_extents=True, backend="cpu", plan=None):
    return make_key(plan or ExtentPlan(fd.fusion), check_inputs(fd.fusion, inputs), backend, resize_extents)


@pytest.mark.parametrize("resize_extents", [True, False])
def test_batch_size_change_is_a_hit(resize_extents):
    fd, rng = rope(), np.random.default_rng(1)
    keys = {_key(fd, rope_inputs(rng, b, h, 12, 8, 32), resize_extents) for b, h in [(1, 1), (2, 3), (8, 4), (1, 2)]}
    assert len(keys) == 1


def test_resize_width_change_is_a_miss_only_in_static_mode():
    fd, rng = rope(), np.random.default_rng(2)
    a, b = rope_inputs(rng, 2, 3, 12, 8, 32), rope_inputs(rng, 2, 3, 13, 8, 32)
    assert _key(fd, a, True) != _key(fd, b, True)
    assert _key(fd, a, False) == _key(fd, b, False)
    # ... unless the change flips a broadcast decision: S = 1 makes the cos slice broadcast.
    one = rope_inputs(rng, 2, 3, 1, 8, 32)
    assert _key(fd, one, False) != _key(fd, a, False)


def test_input_extent_one_on_a_dynamic_dim_is_not_in_the_key():
    fd = pad_to_broadcast()
    big = [np.ones((8, 3, 2, 5, 6), np.float32), np.ones((8, 7, 4, 9, 5), np.float32)]
    one = [np.ones((1, 3, 2, 5, 6), np.float32), np.ones((1, 7, 4, 9, 5), np.float32)]
    assert _key(fd, big) == _key(fd, one)
    assert _key(fd, big, False) == _key(fd, one, False)


def test_layout_backend_and_mode_are_in_the_key():
    fd = pad_scalar_widths()
    x, y = np.ones((4, 5), np.float32), np.ones((4, 3), np.float32)
    base = _key(fd, [x, y, 1, -3])
    assert _key(fd, [np.asfortranarray(x), y, 1, -3]) != base
    assert _key(fd, [x[:, ::-1].copy(), y, 1, -3]) == base  # a copy is dense row-major again
    assert _key(fd, [x, y, 1, -3], backend="cuda") != base
    assert _key(fd, [x, y, 1, -3], resize_extents=False) != base
    assert base.differences(_key(fd, [x, y, 1, -3], resize_extents=False)) == [
        "concretize_resize_extents changed: disabled -> enabled"]


def test_alignment_is_in_the_key_only_when_asked():
    fd = pad_scalar_widths()
    buf = np.ones(4 * 5 + 1, np.float32)
    aligned, shifted = buf[:20].reshape(4, 5), buf[1:].reshape(4, 5)
    y = np.ones((4, 3), np.float32)
    plan = ExtentPlan(fd.fusion)
    key = lambda x, **kw: make_key(plan, check_inputs(fd.fusion, [x, y, 1, -3]), "cpu", True, **kw)  # noqa: E731
    assert key(aligned) == key(shifted)
    assert key(aligned, alignment=True) != key(shifted, alignment=True)
    assert key(shifted, alignment=True).alignment[0] == 4


@pytest.mark.parametrize("shape, strides, unit, expected", [
    ((2, 3), (12, 4), 4, InputLayout((1, 0), True)),
    ((2, 3), (4, 8), 4, InputLayout((0, 1), True)),  # column-major
    ((2, 3), (24, 4), 4, InputLayout((1, 0), False)),  # rows with a gap
    ((2, 1, 3), (3, 99, 1), 1, InputLayout((2, 1, 0), True)),  # an extent-1 dim's stride is ignored
    ((4, 1, 3), (1, 1, 4), 1, InputLayout((0, 2, 1), True)),
    ((2, 0, 3), (1, 1, 1), 1, InputLayout((2, 1, 0), True)),  # empty: every layout is the same
    ((2, 3, 4), (3, 1, 6), 1, InputLayout((1, 0, 2), True)),  # a permuted dense layout
    ((2, 3, 4), (4, 1, 6), 1, InputLayout((1, 0, 2), False)),
])
def test_stride_layout(shape, strides, unit, expected):
    assert stride_layout(shape, strides, unit) == expected


def test_layout_of_numpy_views():
    a = np.zeros((2, 3, 4), np.float32)
    assert layout_of(a) == InputLayout((2, 1, 0), True)
    assert layout_of(a.transpose(0, 2, 1)) == InputLayout((2, 0, 1), True)
    assert layout_of(a[:, :, ::2]) == InputLayout((2, 1, 0), False)


# --- the stand-in executor: RoPE sweep, property test, threads ------------------------------------------


def _rope_static_along_resized_dims(built) -> bool:
    f = the_fusion(built.module)
    ops = [op for op in f.body.block.ops if op.name in ("fuser.slice", "fuser.cat")]
    return all(
        all(v.type.shape[d] != DYNAMIC for d in facts.resized_dims)
        for op, facts in zip(ops, built.info.resizes)
        for v in [*op.operands, op.results[0]] if isinstance(v.type, TensorType)
    )


def test_rope_sixteen_sequence_lengths(capsys):
    """Default mode compiles once per distinct resize-extent set, each kernel with static
    extents along resized dims; with concretize_resize_extents disabled, once in total."""
    rng = np.random.default_rng(7)
    lengths = [8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128]
    counts = {}
    for resize_extents in (True, False):
        ex = ReferenceExecutor(rope(), resize_extents)
        for s in lengths + lengths[:4]:  # repeats are hits
            inputs = rope_inputs(rng, 2, 4, s, 16, 128)
            out, _, built = ex.execute(inputs)
            assert close(out, rope_oracle(inputs))
            assert _rope_static_along_resized_dims(built) == resize_extents
        info = ex.cache.info()
        counts[resize_extents] = (info.misses, info.hits)
    assert counts[True] == (16, 4)
    assert counts[False] == (1, 19)
    log.info("RoPE, 16 sequence lengths (+4 repeats): static resize extents: %d compiles, %d hits; disabled: "
             "%d compile, %d hits", *counts[True], *counts[False])


_STATS: Counter = Counter()


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), resize_extents=st.booleans(), maxsize=st.integers(1, 4),
       seeds=st.lists(st.integers(0, 2**31), min_size=4, max_size=10))
def _random_sequences(case, resize_extents, maxsize, seeds):
    ex = ReferenceExecutor(case.build(), resize_extents, maxsize=maxsize)
    text_of_key: dict = {}
    key_of_info: dict = {}
    for seed in seeds:
        # Revisit earlier inputs half the time: hits (and, with a small bound, evictions).
        rng = np.random.default_rng(seed % 7 if seed % 2 else seed)
        inputs = case.sample(rng)
        out, key, built = ex.execute(inputs)
        _STATS["executions"] += 1
        assert close(out, case.oracle(inputs)), (case.name, [getattr(x, "shape", x) for x in inputs])
        # No collision: one key, one concretization — the IR built fresh for these inputs is
        # the cached one, and equal infos never get two keys.
        fresh = ex.fd.module.clone()
        _, shapes, scalars = ex.key(inputs)
        info = concretize(fresh, shapes, scalars, resize_extents)
        assert printed(fresh) == built.text
        assert text_of_key.setdefault(key, built.text) == built.text
        assert key_of_info.setdefault(info, key) == key
    info = ex.cache.info()
    _STATS["hits"] += info.hits
    _STATS["misses"] += info.misses
    _STATS["evictions"] += info.evictions


def test_random_shape_and_scalar_sequences_match_the_oracle(capsys):
    _STATS.clear()
    _random_sequences()
    assert _STATS["executions"] >= 200
    assert _STATS["hits"] > 0 and _STATS["misses"] > 0 and _STATS["evictions"] > 0
    log.info("property test: %d executions, 0 mismatches, %d hits, %d misses, %d evictions",
             _STATS["executions"], _STATS["hits"], _STATS["misses"], _STATS["evictions"])


def test_concurrent_execute_from_threads_gives_right_results():
    ex = ReferenceExecutor(rope(), maxsize=3)
    rng = np.random.default_rng(11)
    work = [rope_inputs(rng, 2, 2, s, 8, 16) for s in [3, 5, 7, 9] * 6]
    failures = []

    def worker(chunk):
        for inputs in chunk:
            out, _, _ = ex.execute(inputs)
            if not close(out, rope_oracle(inputs)):
                failures.append([x.shape for x in inputs])

    threads = [threading.Thread(target=worker, args=(work[i::6],)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failures == []
    info = ex.cache.info()
    assert info.hits + info.misses == len(work) and info.misses >= 4
