"""Ctrl-C during a long cpu launch stops it between blocks (issue 21, item 7): the runtime holds
SIGINT back for the span of a launch on Python's main thread, the workers stop at the next
block, and Python's handler gets the signal (KeyboardInterrupt). The launch's outputs are never
returned, and the next launch runs normally. A SIGINT that comes when every block has started
stops nothing, but is still handed to Python when the launch ends. Run in a child process, so
the signal reaches only it.

The kernel's blocks hold until the child releases them, after the signal: a launch cannot end
before its signal arrives however loaded the machine is (nothing is calibrated against the
clock). A helper thread sends the SIGINT to itself, so the runtime has noted it when
`pthread_kill` returns; the spin is bounded, so a broken runtime fails instead of hanging."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from lowering_checks import requires_cpu_backend

pytestmark = requires_cpu_backend

CHILD = textwrap.dedent(r'''
    import signal, sys, threading, time
    import numpy as np
    from fuser.lowering.backends import get_backend
    from fuser.lowering.runtime import with_prelude

    SOURCE = with_prelude(r"""
    extern "C" __global__ void spin(float* out, long long work) {
      float acc = 0.0f;
      for (long long k = 0; k < work; ++k) acc = acc * 0.999f + (float)(k & 7);
      if (threadIdx.x == 0) fuser_st(out, blockIdx.x, acc);
    }
    // Marks its block started, then holds until the host releases it (at most max_spins polls).
    extern "C" __global__ void hold(int* started, int* release, long long max_spins) {
      ((volatile int*)started)[blockIdx.x] = 1;
      for (long long k = 0; k < max_spins && !*(volatile int*)release; ++k) {
      }
    }
    FUSER_HOST_LAUNCHER(spin)
    FUSER_HOST_LAUNCHER(hold)
    """)
    MAX_SPINS = 1 << 36  # far beyond any test: only a broken runtime gets there
    module = get_backend("cpu").program(SOURCE)
    expected = np.zeros(64, np.float32)
    module.launch("spin", 64, 32, [expected, np.int64(1000)])

    mode, blocks, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    started = np.zeros(blocks, np.int32)
    release = np.zeros(1, np.int32)
    sent = []

    def interrupt_then_release():
        deadline = time.monotonic() + 60
        wanted = blocks if mode == "all-started" else 1
        while started.sum() < wanted and time.monotonic() < deadline:
            time.sleep(0.001)
        sent.append(time.perf_counter())
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # delivered before it returns
        release[0] = 1

    # Python's own handler, whatever disposition the child inherited: a process that spawns it
    # with SIGINT ignored (an xdist worker after some library set SIG_IGN) would make Python
    # leave it ignored, and the signal would be lost for a reason that is not the runtime's.
    signal.signal(signal.SIGINT, signal.SIG_IGN if mode == "ignored" else signal.default_int_handler)
    threading.Thread(target=interrupt_then_release, daemon=True).start()
    try:
        module.launch("hold", blocks, 1, [started, release, np.int64(MAX_SPINS)], num_threads=threads)
        outcome = "completed"
    except KeyboardInterrupt:
        outcome = "interrupted"
    print(outcome, f"{time.perf_counter() - sent[0]:.2f}", int(started.sum()))
    again = np.zeros(64, np.float32)
    module.launch("spin", 64, 32, [again, np.int64(1000)])
    print("next", "same" if np.array_equal(again, expected) else "different")
''')


def _run(mode: str, blocks: int, threads: int) -> tuple[str, float, int, str]:
    """(outcome, seconds from the SIGINT to the launch's end, blocks started, the next launch)."""
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(blocks), str(threads)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.split("\n")[:2]
    outcome, seconds, ran = first.split()
    return outcome, float(seconds), int(ran), second


def test_ctrl_c_stops_a_long_launch_between_blocks():
    outcome, seconds, ran, after = _run("python-handler", blocks=4096, threads=2)
    assert outcome == "interrupted"
    assert ran < 4096, "every block ran: the SIGINT did not stop the launch between blocks"
    assert seconds < 3.0, f"the launch took {seconds} s to stop"
    assert after == "next same"


def test_ctrl_c_after_every_block_started_is_raised_when_the_launch_ends():
    """Nothing is left to stop, so the launch completes; the SIGINT must not be lost with the
    runtime's handler (as for any ctypes call, Python raises it when the call returns)."""
    outcome, seconds, ran, after = _run("all-started", blocks=2, threads=2)
    assert (outcome, ran) == ("interrupted", 2)
    assert seconds < 3.0
    assert after == "next same"


def test_an_ignored_sigint_stays_ignored():
    outcome, _, ran, after = _run("ignored", blocks=64, threads=2)
    assert (outcome, ran) == ("completed", 64)
    assert after == "next same"
