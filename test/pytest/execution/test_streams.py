"""Streams: every launch of a call goes to the stream its memory names, read once per call.

On the GPU that stream is torch's current stream of the inputs' device (torch mode) or fuser's
own stream (numpy inputs) — lowering/backends/cuda.py. The plumbing is the same for every
backend, so it is checked here on the cpu backend with a memory that names a made-up stream
handle and programs that record the handle each launch receives; the `gpu` tests at the end
check it against real torch streams, CUDA graphs and threads.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering.backends.cpu import CpuBackend, HostMemory
from fuser.lowering.backends.gpu_runtime import gpu_available


class _Streams:
    """A stand-in for torch's current stream: tests set `current`."""

    def __init__(self):
        self.current = 0x100
        self.received: list[tuple[str, object]] = []  # (kernel, stream) per launch


class _StreamMemory(HostMemory):
    def __init__(self, streams: _Streams):
        self.streams = streams
        self.stream_of = lambda: streams.current
        self.stream = streams.current

    def detached(self):
        return _StreamMemory(self.streams)


class _RecordingBound:
    def __init__(self, bound, name, streams):
        self.bound, self.name, self.streams = bound, name, streams

    def __call__(self, pointers, stream=None):
        self.streams.received.append((self.name, stream))
        return self.bound(pointers, stream)


class _RecordingProgram:
    def __init__(self, program, streams):
        self.program, self.streams = program, streams

    def launch(self, kernel_name, grid, block, args, **options):
        self.streams.received.append((kernel_name, options.get("stream")))
        return self.program.launch(kernel_name, grid, block, args, **options)

    def bind(self, kernel_name, grid, block, args, **options):
        return _RecordingBound(self.program.bind(kernel_name, grid, block, args, **options), kernel_name,
                               self.streams)

    def __getattr__(self, name):
        return getattr(self.program, name)


class _StreamBackend(CpuBackend):
    name = "cpu"  # the cpu backend's kernels and caches, with recorded launches

    def __init__(self, streams: _Streams):
        super().__init__()
        self.streams = streams

    def load(self, binary, source):
        return _RecordingProgram(super().load(binary, source), self.streams)

    def allocator(self, inputs, torch_outputs=False):
        return _StreamMemory(self.streams)


def _two_kernels() -> FusionDefinition:
    """A softmax (one kernel) followed by a reduction of its output over the other dim."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        m = fd.ops.max(x, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(x, m))
        s = fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True))
        fd.add_output(s)
        fd.add_output(fd.ops.sum(s, dims=[0]))
    return fd


def test_every_launch_of_a_call_gets_the_stream_current_at_the_call():
    streams = _Streams()
    backend = _StreamBackend(streams)
    fd = _two_kernels()
    x = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    fd.execute([x], backend=backend)  # the full path
    first = list(streams.received)
    assert len(first) >= 2 and {s for _, s in first} == {0x100}
    for handle in (0x200, 0x300, 0x200):  # plan replays: the stream is read again per call
        streams.current = handle
        streams.received.clear()
        out = fd.execute([x], backend=backend)
        assert fd._get_executor().last_call_used_plan()
        assert [k for k, _ in streams.received] == [k for k, _ in first]
        assert {s for _, s in streams.received} == {handle}
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out[1], (e / e.sum(1, keepdims=True)).sum(0), rtol=1e-5)


def test_cpu_memory_names_no_stream():
    assert HostMemory().stream is None and HostMemory().stream_of() is None
    assert HostMemory().detached().stream_of() is None


# --------------------------------------------------------------------------- on a GPU


def gpu(test):
    return pytest.mark.gpu(pytest.mark.skipif(not gpu_available()[0], reason=gpu_available()[1])(test))


@gpu
def test_launches_go_to_torch_current_stream(monkeypatch):
    torch = pytest.importorskip("torch")
    from fuser.lowering.backends import gpu_runtime as gr

    from fuser.lowering.backends import gpu_launcher

    received = []
    real, real_native = gr.launch_kernel, gpu_launcher.native_launch()

    def recording(function, grid, block, shared, stream, params, kernel_name=""):
        received.append(stream)
        return real(function, grid, block, shared, stream, params, kernel_name)

    def recording_native(record, stream, *pointers):  # a plan's launches, where the launcher is built
        received.append(stream)
        return real_native(record, stream, *pointers)

    monkeypatch.setattr(gr, "launch_kernel", recording)
    if real_native is not None:
        monkeypatch.setattr(gpu_launcher, "native_launch", lambda: recording_native)
    fd = _two_kernels()
    x = torch.randn(64, 300, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    for _ in range(2):  # the full path, then the plan
        received.clear()
        with torch.cuda.stream(side):
            out = fd.execute([x], backend="cuda")
        assert received and set(received) == {side.cuda_stream}
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(out[0], torch.softmax(x, 1))
    received.clear()
    fd.execute([x], backend="cuda")
    assert set(received) == {torch.cuda.current_stream().cuda_stream}


@gpu
def test_a_fusion_is_captured_and_replayed_in_a_cuda_graph():
    torch = pytest.importorskip("torch")
    fd = _two_kernels()
    x = torch.randn(128, 1000, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up: compile and build the plan outside the capture
        for _ in range(2):
            fd.execute([x], backend="cuda")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = fd.execute([x], backend="cuda")
    x.copy_(torch.randn(128, 1000, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(captured[0], torch.softmax(x, 1))
    torch.testing.assert_close(captured[1], torch.softmax(x, 1).sum(0))


@gpu
def test_gpu_work_on_other_threads_leaves_no_context_pushed():
    """pycuda aborts a process whose thread ends with a context pushed (the first GPU run: torch's
    autograd thread); run such a process to its end, with compiled regions on the autograd thread
    and on a thread of the user's, and a fusion on another."""
    pytest.importorskip("torch")
    script = textwrap.dedent("""
        import threading, torch, torch.nn.functional as F
        import fuser
        x = torch.randn(64, 512, device="cuda", requires_grad=True)
        y = torch.randint(0, 512, (64,), device="cuda")
        f = torch.compile(lambda a, b: F.cross_entropy(a, b), backend="fuser")
        for _ in range(3):  # from the second step on, the regions' TensorCalls (native launches)
            f(x, y).backward()  # the backward region runs on torch's autograd thread
        def compiled():
            for _ in range(3):
                f(x, y).backward()
        t = threading.Thread(target=compiled); t.start(); t.join()
        def work():
            from fuser import FusionDefinition, DataType
            with FusionDefinition() as fd:
                t = fd.define_tensor(shape=[-1], dtype=DataType.Float)
                fd.add_output(fd.ops.exp(t))
            import numpy as np
            (out,) = fd.execute([np.ones(8, np.float32)], backend="cuda")
            assert abs(out[0] - 2.718281828) < 1e-5
        t = threading.Thread(target=work); t.start(); t.join()
        print("done", float(x.grad.abs().sum()) > 0)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done True" in done.stdout
