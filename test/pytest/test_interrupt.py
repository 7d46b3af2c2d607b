"""Ctrl-C during a long cpu launch stops it between blocks (issue 21, item 7): the runtime holds
SIGINT back for the span of a launch on Python's main thread, the workers stop at the next
block, and Python's handler gets the signal (KeyboardInterrupt). The launch's outputs are never
returned, and the next launch runs normally. Run in a child process, so the signal reaches only it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from lowering_checks import requires_cpu_backend

pytestmark = requires_cpu_backend

CHILD = textwrap.dedent(r'''
    import os, signal, sys, threading, time
    import numpy as np
    from fuser.lowering.backends import get_backend
    from fuser.lowering.runtime import with_prelude

    SOURCE = with_prelude(r"""
    extern "C" __global__ void spin(float* out, long long work) {
      float acc = 0.0f;
      for (long long k = 0; k < work; ++k) acc = acc * 0.999f + (float)(k & 7);
      if (threadIdx.x == 0) fuser_st(out, blockIdx.x, acc);
    }
    FUSER_HOST_LAUNCHER(spin)
    """)
    module = get_backend("cpu").program(SOURCE)
    expected = np.zeros(64, np.float32)
    module.launch("spin", 64, 32, [expected, np.int64(1000)])
    blocks = 4096
    out = np.zeros(blocks, np.float32)

    start = time.perf_counter()
    module.launch("spin", blocks, 32, [out, np.int64(200)])
    per_block = (time.perf_counter() - start) / blocks
    work = int(200 * 0.004 / max(per_block, 1e-9))   # about 4 ms per block: ~16 s a launch

    mode = sys.argv[1]
    def interrupt():
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)
    if mode == "ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        work //= 8  # runs to its end: ~2 s
    threading.Thread(target=interrupt, daemon=True).start()
    start = time.perf_counter()
    try:
        module.launch("spin", blocks, 32, [out, np.int64(work)])
        print("completed", f"{time.perf_counter() - start:.2f}")
    except KeyboardInterrupt:
        print("interrupted", f"{time.perf_counter() - start:.2f}")
    again = np.zeros(64, np.float32)
    module.launch("spin", 64, 32, [again, np.int64(1000)])
    print("next", "same" if np.array_equal(again, expected) else "different")
''')


def _run(mode: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")


def test_ctrl_c_stops_a_long_launch_between_blocks():
    first, second = _run("python-handler")[:2]
    outcome, seconds = first.split()
    assert outcome == "interrupted"
    assert float(seconds) < 3.0, f"a launch of ~16 s took {seconds} s to stop"
    assert second == "next same"


def test_an_ignored_sigint_stays_ignored():
    first, second = _run("ignored")[:2]
    assert first.split()[0] == "completed"
    assert second == "next same"
