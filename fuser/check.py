"""`python -m fuser.check`: what this machine can run, and proof that it runs right.

Prints the platform and versions, then every backend with whether it is usable and, when not,
the exact reason (pycuda, CUDA driver, device, NVRTC, nvcc, g++). On every usable kernel backend
it compiles and runs a set of fusions — softmax, cross-entropy forward (with its mean: a grid
reduction) and backward, layer-norm, RoPE, a matmul with a fused epilogue, a whole-tensor sum and
a seeded random op — and compares each with the reference interpreter. On a GPU it also times
them with CUDA events, measures a device-to-device copy in the same run, and runs a
torch.compile forward and backward on CUDA tensors against eager.

Exit status 0 only if everything usable passed. Options: --backend NAME (only that one),
--quiet (the summary line only)."""

from __future__ import annotations

import argparse
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fuser import DataType, FusionDefinition


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], FusionDefinition]
    inputs: Callable[[np.random.Generator], list]
    tolerance: float = 1e-5  # of the worst error relative to the reference's largest magnitude


# --------------------------------------------------------------------------- the fusions


def _softmax() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    return fd


def _log_softmax(fd, x):
    shifted = fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True))
    return fd.ops.sub(shifted, fd.ops.log(fd.ops.sum(fd.ops.exp(shifted), dims=[1], keepdim=True)))


def _cross_entropy_forward() -> FusionDefinition:
    """mean over rows of -log_softmax(x)[label]: the mean is a grid reduction."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        label = fd.define_tensor(shape=[-1, 1], dtype=DataType.Int)
        picked = fd.ops.squeeze(fd.ops.take_along_axis(_log_softmax(fd, x), label, 1), [1])
        fd.add_output(fd.ops.neg(fd.ops.div(fd.ops.sum(picked, dims=[0]), fd.ops.size(x, 0))))
    return fd


def _cross_entropy_backward() -> FusionDefinition:
    """(softmax(x) - one_hot(label)) * grad / rows."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        label = fd.define_tensor(shape=[-1, 1], dtype=DataType.Int)
        grad = fd.define_tensor(shape=[], dtype=DataType.Float)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
        soft = fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True))
        classes = fd.ops.broadcast_in_dim(fd.ops.iota(fd.ops.size(x, 1)), [1, fd.ops.size(x, 1)], [1])
        hot = fd.ops.cast(fd.ops.eq(classes, label), DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.sub(soft, hot), fd.ops.div(grad, fd.ops.size(x, 0))))
    return fd


def _layer_norm() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(x, dims=[1], correction=0, keepdim=True)
        normed = fd.ops.mul(fd.ops.sub(x, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
        shape = fd.ops.shape(x)
        fd.add_output(fd.ops.add(fd.ops.mul(normed, fd.ops.broadcast_in_dim(w, shape, [1])),
                                 fd.ops.broadcast_in_dim(b, shape, [1])))
    return fd


def _rope() -> FusionDefinition:
    """q * cos + rotate_half(q) * sin, in bf16 with f32 math (a llama-style rotary embedding)."""
    with FusionDefinition() as fd:
        q = fd.define_tensor(shape=[1, -1, -1, -1], dtype=DataType.BFloat16)
        cos = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        sin = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        half = fd.ops.size(q, 3) // 2
        qf = fd.ops.cast(q, DataType.Float)
        lo = fd.ops.slice(qf, [0, 0, 0, 0], [1, fd.ops.size(q, 1), fd.ops.size(q, 2), half])
        hi = fd.ops.slice(qf, [0, 0, 0, half], [1, fd.ops.size(q, 1), fd.ops.size(q, 2), fd.ops.size(q, 3)])
        rotated = fd.ops.cat([fd.ops.neg(hi), lo], dim=3)
        shape = fd.ops.shape(q)
        cos_f, sin_f = (fd.ops.broadcast_in_dim(fd.ops.cast(t, DataType.Float), shape, [2, 3]) for t in (cos, sin))
        out = fd.ops.add(fd.ops.mul(qf, cos_f), fd.ops.mul(rotated, sin_f))
        fd.add_output(fd.ops.cast(out, DataType.BFloat16))
    return fd


def _linear_gelu() -> FusionDefinition:
    """gelu(x @ w.T + b) + residual (erf gelu): a library matmul and a fused pointwise epilogue."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        r = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        y = fd.ops.linear(x, w, b)
        gelu = fd.ops.mul(fd.ops.mul(y, 0.5), fd.ops.add(fd.ops.erf(fd.ops.mul(y, 0.7071067811865476)), 1.0))
        fd.add_output(fd.ops.add(gelu, r))
    return fd


def _sum_all() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.mul(x, x), dims=[0, 1]))
    return fd


def _seeded_uniform() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        noise = fd.ops.uniform(0.0, 1.0, [fd.ops.size(x, 0)], rng_seed=1234, rng_offset=0)
        fd.add_output(fd.ops.add(x, noise))
    return fd


def _bf16(a: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return a.astype(ml_dtypes.bfloat16)


CASES = [
    Case("softmax", _softmax, lambda r: [r.standard_normal((37, 1000), np.float32)]),
    Case("cross_entropy_fwd", _cross_entropy_forward,
         lambda r: [r.standard_normal((300, 5000), np.float32), r.integers(0, 5000, (300, 1))]),
    Case("cross_entropy_bwd", _cross_entropy_backward,
         lambda r: [r.standard_normal((64, 5000), np.float32), r.integers(0, 5000, (64, 1)), np.array(0.7, np.float32)]),
    Case("layer_norm", _layer_norm, lambda r: [r.standard_normal((33, 768), np.float32),
                                               r.standard_normal(768, np.float32), r.standard_normal(768, np.float32)]),
    Case("rope_bf16", _rope, lambda r: [_bf16(r.standard_normal((1, 4, 64, 128))), _bf16(r.random((64, 128))),
                                        _bf16(r.random((64, 128)))], tolerance=1e-2),
    Case("linear_gelu", _linear_gelu, lambda r: [r.standard_normal((64, 128), np.float32),
                                                 r.standard_normal((96, 128), np.float32) / 8,
                                                 r.standard_normal(96, np.float32),
                                                 r.standard_normal((64, 96), np.float32)], tolerance=1e-4),
    Case("grid_sum", _sum_all, lambda r: [r.standard_normal((2048, 1024), np.float32)], tolerance=1e-4),
    Case("uniform_seeded", _seeded_uniform, lambda r: [np.zeros(100_000, np.float32)]),
]


# --------------------------------------------------------------------------- the machine


def versions() -> list[tuple[str, str]]:
    import xdsl

    rows = [("platform", platform.platform()), ("python", sys.version.split()[0]), ("numpy", np.__version__),
            ("xdsl", getattr(xdsl, "__version__", "?"))]
    import fuser

    rows.append(("fuser", fuser.__version__))
    for name in ("torch", "pycuda", "cuda.bindings"):
        try:
            module = __import__(name, fromlist=["_"])
            rows.append((name, getattr(module, "__version__", "installed")))
        except Exception as e:
            rows.append((name, f"not importable ({type(e).__name__}: {e})"))
    return rows


def compilers() -> list[tuple[str, bool, str]]:
    """(name, usable, version or why not) for NVRTC, nvcc, the host C++ compiler and the native
    launcher it builds for GPU and cpu-backend launches (lowering/backends/gpu_launcher.py)."""
    from fuser.lowering.backends import compile as cc
    from fuser.lowering.backends import CPU

    rows = []
    for name in ("nvrtc", "nvcc"):
        found = cc._probe(name)
        rows.append((name, not isinstance(found, str), found if isinstance(found, str) else found.label))
    ok, why = CPU.available()
    rows.append(("c++ (cpu backend)", ok, why or "usable"))
    from fuser.lowering.backends import gpu_launcher

    launcher = gpu_launcher.status()  # built here on first use (about a second, once per installation)
    rows.append(("gpu launcher", launcher == "native",
                 "native (prebuilt launches in one C call, GPU and cpu backend)" if launcher == "native"
                 else launcher.replace("python: ", "Python path: ", 1)))
    return rows


def backends() -> list[tuple[str, bool, str]]:
    from fuser.lowering.backends import BACKENDS

    return [(name, *backend.available()) for name, backend in BACKENDS.items()]


# --------------------------------------------------------------------------- the checks


def worst_error(outputs, expected) -> float:
    worst = 0.0
    for out, ref in zip(outputs, expected, strict=True):
        out = np.asarray(_host(out), np.float64)
        ref = np.asarray(_host(ref), np.float64)
        if out.shape != ref.shape:
            return float("inf")
        if not np.array_equal(np.isfinite(out), np.isfinite(ref)):
            return float("inf")
        scale = max(float(np.abs(ref[np.isfinite(ref)]).max(initial=0.0)), 1e-30)
        diff = np.abs(np.where(np.isfinite(ref), out - ref, 0.0))
        worst = max(worst, float(diff.max(initial=0.0)) / scale)
    return worst


def _host(x):
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.numpy()
    return np.asarray(x).astype(np.float64) if np.asarray(x).dtype.kind == "V" else x


def run_case(case: Case, backend: str, timer=None) -> dict:
    rng = np.random.default_rng(0)
    inputs = case.inputs(rng)
    fd = case.build()
    expected = fd.execute(inputs, backend="reference")
    start = time.perf_counter()
    outputs = fd.execute(inputs, backend=backend)
    first_s = time.perf_counter() - start
    err = worst_error(outputs, expected)
    row = {"case": case.name, "backend": backend, "ok": err <= case.tolerance, "error": err,
           "kernels": len(fd.last_kernels()), "first_call_s": first_s}
    if case.name == "uniform_seeded":
        values = np.asarray(_host(outputs[0]), np.float64)
        row["ok"] = row["ok"] and values.min() >= 0.0 and values.max() < 1.0 and abs(values.mean() - 0.5) < 0.01
    if timer is not None:
        row["gpu_us"] = timer(fd, inputs)
    return row


def gpu_timer():
    """A function timing a cached `execute` with CUDA events (median µs, torch CUDA inputs when
    torch sees the GPU: no host copies in the figure)."""
    from fuser.lowering.backends import gpu_runtime

    torch = _torch_cuda()

    def timed(fd, inputs) -> float:
        if torch is not None:
            device_inputs = [_to_torch(torch, x) for x in inputs]
            for _ in range(3):
                fd.execute(device_inputs, backend="cuda")
            torch.cuda.synchronize()
            times = []
            for _ in range(20):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fd.execute(device_inputs, backend="cuda")
                end.record()
                times.append((start, end))
            torch.cuda.synchronize()
            return float(np.median([s.elapsed_time(e) for s, e in times])) * 1e3
        return float(np.median(gpu_runtime.time_kernel(lambda: fd.execute(inputs, backend="cuda"), 3, 20))) * 1e3

    return timed


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _to_torch(torch, x):
    if isinstance(x, np.ndarray):
        if x.dtype.name == "bfloat16":
            return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).cuda()
        return torch.from_numpy(x).cuda()
    return x


def torch_compile_on_gpu() -> list[dict]:
    """torch.compile(backend="fuser") forward and backward on CUDA tensors against eager."""
    torch = _torch_cuda()
    if torch is None:
        return []
    import torch.nn.functional as F

    torch.manual_seed(0)

    def cross_entropy(x, y):
        return F.cross_entropy(x, y)

    def layer_norm_gelu(x, w, b):
        return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b)) + x

    cases = [(cross_entropy, [torch.randn(64, 4096, device="cuda", requires_grad=True),
                              torch.randint(0, 4096, (64,), device="cuda")]),
             (layer_norm_gelu, [torch.randn(64, 1024, device="cuda", requires_grad=True),
                                torch.randn(1024, device="cuda", requires_grad=True),
                                torch.randn(1024, device="cuda", requires_grad=True)])]
    rows = []
    for fn, args in cases:
        torch._dynamo.reset()
        try:
            out = torch.compile(fn, backend="fuser")(*args)
            ref = fn(*args)
            wrt = [a for a in args if a.requires_grad]
            got = torch.autograd.grad(out.sum(), wrt)
            want = torch.autograd.grad(ref.sum(), wrt)
            err = max([float((out - ref).abs().max()) / (float(ref.abs().max()) + 1e-12)]
                      + [float((g - w).abs().max()) / (float(w.abs().max()) + 1e-12) for g, w in zip(got, want)])
            rows.append({"case": f"torch.compile {fn.__name__}", "ok": err < 1e-4 and out.is_cuda, "error": err})
        except Exception as e:
            rows.append({"case": f"torch.compile {fn.__name__}", "ok": False, "error": float("inf"),
                         "failure": f"{type(e).__name__}: {e}"})
    return rows


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuser.check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["cpu", "cuda"], help="check only this backend")
    parser.add_argument("--quiet", action="store_true", help="print the summary line only")
    args = parser.parse_args(argv)
    say = (lambda *_: None) if args.quiet else print
    start = time.perf_counter()

    say("== versions")
    for name, version in versions():
        say(f"  {name:14} {version}")
    say("== CUDA compilers and the host compiler")
    for name, ok, what in compilers():
        say(f"  {name:18} {'ok  ' if ok else 'no  '} {what}")
    say("== backends")
    usable = []
    for name, ok, why in backends():
        say(f"  {name:10} {'usable' if ok else 'UNUSABLE'}{': ' + why if why else ''}")
        if ok and name != "reference" and args.backend in (None, name):
            usable.append(name)

    failures = 0
    rows: list[dict] = []
    for backend in usable:
        say(f"== fusions on the {backend} backend, against the reference interpreter")
        timer = None
        if backend == "cuda":
            timer = gpu_timer()
            from fuser.lowering.backends import gpu_runtime

            copy = gpu_runtime.copy_bandwidth()
            say(f"  device-to-device copy: {copy['gbps']:.0f} GB/s ({copy['bytes'] >> 20} MiB, {copy['ms']:.3f} ms)")
        for case in CASES:
            try:
                row = run_case(case, backend, timer)
            except Exception as e:
                row = {"case": case.name, "backend": backend, "ok": False, "error": float("inf"),
                       "failure": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            rows.append(row)
            failures += not row["ok"]
            timing = f", {row['gpu_us']:.1f} µs a cached call (CUDA events)" if "gpu_us" in row else ""
            detail = row.get("failure") or f"worst error {row['error']:.1e}, {row['kernels']} kernel(s){timing}"
            say(f"  {'ok  ' if row['ok'] else 'FAIL'} {case.name:18} {detail}")
        if backend == "cuda":
            for row in torch_compile_on_gpu():
                rows.append(row)
                failures += not row["ok"]
                say(f"  {'ok  ' if row['ok'] else 'FAIL'} {row['case']:18} "
                    f"{row.get('failure') or 'worst error %.1e (forward and gradients)' % row['error']}")
    summary = (f"fuser.check: {len(rows) - failures} of {len(rows)} checks passed on "
               f"{', '.join(usable) or 'no kernel backend'} in {time.perf_counter() - start:.1f} s")
    if not usable:
        summary += " (no usable kernel backend: see above)"
    print(summary)
    return 1 if failures or not usable else 0


if __name__ == "__main__":
    sys.exit(main())
