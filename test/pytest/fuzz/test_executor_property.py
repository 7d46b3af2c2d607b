"""The compiled path end to end: random sequences of shapes and scalars through
`fd.execute(backend="cpu")` (key → concretize → preseg → segment → CUDA C → g++ → launch)
against independent numpy oracles. Resize extents stay symbolic here, so the cache compiles
only when a broadcast decision or a schedule changes and the run stays fast; the static mode
is covered by execution/test_cache.py (key + concretize) and the RoPE run in
passes/test_concretize.py and execution/test_cache.py."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from resize_fusions import CASES

from fuser.lowering.backends.cpu_runtime import cpu_compiler_available

pytestmark = pytest.mark.skipif(not cpu_compiler_available(), reason="no C++20 compiler for the cpu backend")

EXECUTIONS_PER_CASE = 60

log = logging.getLogger(__name__)  # summaries: shown with --log-cli-level=INFO or on failure


def _close(got, expected) -> bool:
    return all(np.asarray(g).shape == np.asarray(e).shape and np.allclose(g, e, rtol=1e-5, atol=1e-5)
               for g, e in zip(got, expected))


def test_random_executions_match_numpy_and_count_hits(capsys):
    rng = np.random.default_rng(2026)
    total = mismatches = hits = misses = 0
    for case in CASES:
        fd = case.build()
        for _ in range(EXECUTIONS_PER_CASE):
            inputs = case.sample(rng)
            got = fd.execute(inputs, backend="cpu", _disable_options=["concretize_resize_extents"])
            total += 1
            mismatches += not _close(got, case.oracle(inputs))
        info = fd.cache_info()
        hits, misses = hits + info.hits, misses + info.misses
        assert info.hits + info.misses == EXECUTIONS_PER_CASE
    log.info("compiled path: %d executions, %d mismatches, %d hits, %d compilations", total, mismatches, hits, misses)
    assert total >= 200 and mismatches == 0
    assert misses < total / 4  # the cache does its job: most executions reuse kernels
