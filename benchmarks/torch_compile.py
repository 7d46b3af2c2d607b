"""torch.compile(backend="fuser") vs eager vs backend="inductor", on the same functions.

    python3 -m fuser.benchmarks.torch_compile [--repeat 50]

Per function and backend (forward, no grad; CPU tensors, so fuser runs its cpu backend and
inductor its C++ backend): compile time (first call, wall), cached-call time (median µs over
`repeat` calls), kernels launched per call (fuser: from its launch records; inductor: kernels
it generated, torch._inductor.metrics), and for fuser the global bytes its kernels moved over
the minimum (every input of the function read once, every output written once). A backend
that fails is reported with its error instead of stopping the run. Not part of the tests.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fuser.torch_backend import make_backend


@dataclass
class Workload:
    name: str
    fn: Callable
    make_inputs: Callable[[], list]


def _rotate_half(t):
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def workloads() -> list[Workload]:
    g = torch.Generator().manual_seed(0)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)

    labels = torch.randint(0, 8192, (64,), generator=g)
    labels[::10] = -100
    causal = torch.ones(128, 128).triu(1).bool()
    return [
        Workload("cross_entropy [64, 8192] f32", lambda x, y: F.cross_entropy(x, y), lambda: [randn(64, 8192), labels]),
        Workload("layer_norm [64, 4096] f32",
                 lambda x, w, b: F.layer_norm(x, (4096,), w, b), lambda: [randn(64, 4096), randn(4096), randn(4096)]),
        Workload("masked softmax [4, 4, 128, 128] f32",
                 lambda x, m: torch.softmax(x.masked_fill(m, float("-inf")), -1), lambda: [randn(4, 4, 128, 128), causal]),
        Workload("rope [1, 4, 256, 128] bf16",
                 lambda q, c, s: (q.float() * c.float() + _rotate_half(q.float()) * s.float()).to(q.dtype),
                 lambda: [randn(1, 4, 256, 128, dtype=torch.bfloat16), randn(256, 128, dtype=torch.bfloat16),
                          randn(256, 128, dtype=torch.bfloat16)]),
        Workload("gelu+silu epilogue [256, 1024] f32", lambda x: F.gelu(x) * F.silu(x), lambda: [randn(256, 1024)]),
    ]


def _min_bytes(inputs, outputs) -> int:
    tensors = [t for t in [*inputs, *(outputs if isinstance(outputs, (tuple, list)) else [outputs])]
               if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def _median_us(fn, inputs, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*inputs)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _fuser_row(w: Workload, repeat: int) -> dict:
    reports = []
    torch._dynamo.reset()
    compiled = torch.compile(w.fn, backend=make_backend(reports))
    inputs = w.make_inputs()
    start = time.perf_counter()
    out = compiled(*inputs)
    compile_s = time.perf_counter() - start
    torch.testing.assert_close(out, w.fn(*inputs), rtol=2e-2, atol=2e-2)
    regions = [r.region for g in reports for r in g.fusions]
    moved = sum(k.bytes_loaded + k.bytes_stored for r in regions for k in r.fd.last_kernels()
                if k.bytes_loaded is not None)
    return {"compile_s": compile_s, "us": _median_us(compiled, inputs, repeat),
            "kernels": sum(len(r.fd.last_kernels()) for r in regions),
            "fusions": len(regions), "aten_ops": sum(g.aten_ops for g in reports),
            "bytes_over_min": moved / _min_bytes(inputs, out)}


def _inductor_row(w: Workload, repeat: int) -> dict:
    from torch._inductor import metrics

    torch._dynamo.reset()
    metrics.reset()
    compiled = torch.compile(w.fn, backend="inductor")
    inputs = w.make_inputs()
    start = time.perf_counter()
    out = compiled(*inputs)
    compile_s = time.perf_counter() - start
    torch.testing.assert_close(out, w.fn(*inputs), rtol=2e-2, atol=2e-2)
    return {"compile_s": compile_s, "us": _median_us(compiled, inputs, repeat),
            "kernels": metrics.generated_kernel_count}


def _eager_row(w: Workload, repeat: int) -> dict:
    inputs = w.make_inputs()
    return {"us": _median_us(w.fn, inputs, repeat)}


def _guarded(row: Callable[[], dict]) -> dict:
    try:
        return row()
    except Exception as error:  # a backend that cannot run here is reported, not fatal
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"}


def _fmt(row: dict, key: str, spec: str) -> str:
    width = int(spec.split(".")[0].rstrip("df"))
    return format(row[key], spec) if key in row else "-".rjust(width)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="cached calls timed per row (median)")
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, CPU tensors, forward only, median of {args.repeat} cached calls")
    print(f"{'function':40} {'backend':9} {'compile s':>9} {'call µs':>9} {'kernels':>7} {'bytes/min':>9}  note")
    with torch.no_grad():
        for w in workloads():
            rows = {"eager": _guarded(lambda: _eager_row(w, args.repeat)),
                    "fuser": _guarded(lambda: _fuser_row(w, args.repeat)),
                    "inductor": _guarded(lambda: _inductor_row(w, args.repeat))}
            for name, row in rows.items():
                note = row.get("error", "")
                if name == "fuser" and "fusions" in row:
                    note = f"{row['aten_ops']} ATen ops, {row['fusions']} fusion(s)"
                print(f"{w.name:40} {name:9} {_fmt(row, 'compile_s', '9.2f')} {_fmt(row, 'us', '9.1f')} "
                      f"{_fmt(row, 'kernels', '7d')} {_fmt(row, 'bytes_over_min', '9.2f')}  {note}")


if __name__ == "__main__":
    main()
