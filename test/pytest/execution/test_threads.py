"""Concurrent `execute` calls on one FusionDefinition (issue #11 item 4): one executor, one
cache, one compilation; every thread sees the kernels of its own last call."""

from __future__ import annotations

import threading

import numpy as np

from lowering_checks import softmax_expected as _reference, softmax_fusion as _softmax


def test_threads_on_a_fresh_definition_share_one_executor_and_one_compilation():
    fd = _softmax()
    threads, start = 8, threading.Barrier(8)
    seen: list = [None] * threads
    errors: list = []

    def run(i: int) -> None:
        x = np.random.default_rng(i).standard_normal((4 + i, 64)).astype(np.float32)
        start.wait()  # all threads race for the executor at once
        try:
            (y,) = fd.execute([x], backend="cpu")
            np.testing.assert_allclose(y, _reference(x), rtol=1e-5, atol=1e-6)
            seen[i] = [k.scheduler for k in fd.last_kernels()]
        except Exception as e:  # noqa: BLE001  (reported below, with the thread)
            errors.append((i, e))

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    assert seen == [["inner_persistent"]] * threads  # each thread's own last call
    info = fd.cache_info()
    assert info.hits + info.misses == threads  # every execution counted
    assert info.misses == 1  # one compilation for the one shape class
    assert len(info.entries) == 1
