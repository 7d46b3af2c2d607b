"""`python -m fuser.benchmarks.model_kernels [--models gpt2,llama,bert] [--top N]`: the kernels a
real-size model's training step compiles to, and what the performance model says of each on an
H100, without a GPU and without computing anything.

The model (benchmarks/model_zoo.py REAL_SIZES, one transformer layer: the others repeat it;
without its head, whose kernel is the LM head's chunk kernel) is built on the meta device and a
step of it (forward, a mean of squares as the loss, backward) is traced by
torch.compile(backend="fuser"); every fused region's FusionDefinition and the sizes, strides
and dtypes of its traced inputs are recorded as partitioning builds them, in place of compiling
them, and the graph runs on meta tensors (each region as its ATen ops, which on meta only
propagate shapes). Each region's kernels are then compiled for those inputs (`kernels_for`:
schedules, sources, NVRTC for sm_90, the SASS) and modelled (`KernelRecord.performance`).

test/pytest/schedulers/test_sass_in_flight.py holds the largest kernels of GPT-2, Llama and BERT,
forward and backward, to 32 KiB in flight per SM counted in their SASS.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass

import numpy as np

LAYERS = {"gpt2": "n_layer", "llama": "num_hidden_layers", "bert": "num_hidden_layers"}


@dataclass
class RegionInputs:
    """One fused region of a traced graph and the inputs it was traced with."""

    graph: str
    """"forward" or "backward"."""
    name: str
    fd: object
    inputs: list
    """numpy views (no data: shapes, strides, dtypes and 16-byte alignment only) and scalars."""

    @property
    def moved_bytes(self) -> int:
        return sum(a.size * a.itemsize for a in self.inputs if isinstance(a, np.ndarray))


def _numpy_like(t):
    """A numpy view with t's shape, strides and dtype over a one-element buffer: the compile
    reads no element (as_strided does not check bounds; nothing here reads through it)."""
    import ml_dtypes
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    dtype = ml_dtypes.bfloat16 if t.dtype == torch.bfloat16 else torch.empty((), dtype=t.dtype).numpy().dtype
    base = np.empty(max(1, 16 // np.dtype(dtype).itemsize), dtype)  # 16-byte aligned, as allocators give
    return np.lib.stride_tricks.as_strided(base, tuple(t.shape), tuple(s * base.itemsize for s in t.stride()))


@contextlib.contextmanager
def _recording(found: list[RegionInputs]):
    """Partitioning records each region in place of compiling it; regions then run as the ATen
    ops they replaced (on meta tensors: shapes only)."""
    from fuser.torch_backend import partition, support
    from fuser.torch_backend.runtime import FusedRegion

    build, compile_for, call = partition._build, FusedRegion.compile_for, FusedRegion.__call__
    devices = support.FUSER_DEVICES

    def record_build(gm, attr, name, ops, execute_options):
        region, report = build(gm, attr, name, ops, execute_options)
        if region is not None:
            region.eager = getattr(gm, attr)
        return region, report

    def record(self, args):
        found.append(RegionInputs(self.name.split(".")[0], self.name, self.fd, [_numpy_like(a) for a in args]))

    partition._build = record_build
    FusedRegion.compile_for = record
    FusedRegion.__call__ = lambda self, *args: tuple(self.eager(*args))
    support.FUSER_DEVICES = (*devices, "meta")  # the traced program's tensors are meta tensors
    try:
        yield
    finally:
        partition._build, FusedRegion.compile_for, FusedRegion.__call__ = build, compile_for, call
        support.FUSER_DEVICES = devices


def traced_regions(name: str, layers: int = 1) -> list[RegionInputs]:
    """The fused regions of one training step of the real-size model `name` (forward + loss,
    backward), `layers` transformer layers, traced on the meta device."""
    import torch

    from fuser.benchmarks.model_zoo import REAL_SIZES
    from fuser.torch_backend import make_backend

    real = REAL_SIZES[name]
    with torch.device("meta"):
        model = real.build()
    config_key = LAYERS.get(name)
    if config_key is not None and layers:
        # One layer stands for all: rebuild with fewer (the config's other sizes unchanged).
        config = model.config
        setattr(config, config_key, layers)
        with torch.device("meta"):
            model = type(model)(config)
    model.config.use_cache = False  # no KV cache in a training step
    # The layers without the head: the head's kernel is the LM head's chunk kernel
    # (linear_cross_entropy.py), whose library op has no meta implementation.
    body = model.base_model.train()
    ids = real.batch("meta")["input_ids"]

    def step(input_ids):
        return body(input_ids=input_ids).last_hidden_state.float().square().mean()

    found: list[RegionInputs] = []
    torch._dynamo.reset()
    with _recording(found):
        loss = torch.compile(step, backend=make_backend([]))(ids)
        loss.backward()
    torch._dynamo.reset()
    return found


def largest(regions: list[RegionInputs], top: int) -> list[RegionInputs]:
    """The `top` regions of each graph (forward, backward) that move the most bytes."""
    chosen = []
    for graph in ("forward", "backward"):
        of_graph = [r for r in regions if r.graph == graph]
        chosen += sorted(of_graph, key=lambda r: -r.moved_bytes)[:top]
    return chosen


def region_kernels(region: RegionInputs) -> list:
    """The region's kernels for its traced inputs, as an H100 would get them (compiled, never run)."""
    previous = os.environ.get("FUSER_GPU_PROFILE")
    os.environ["FUSER_GPU_PROFILE"] = "h100"
    try:
        return region.fd.kernels_for(region.inputs, backend="cpu")
    finally:
        if previous is None:
            del os.environ["FUSER_GPU_PROFILE"]
        else:
            os.environ["FUSER_GPU_PROFILE"] = previous


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuser.benchmarks.model_kernels", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt2,llama,bert")
    parser.add_argument("--top", type=int, default=3, help="largest regions per graph (0: all)")
    args = parser.parse_args(argv)
    print("| model | region | kernel schedule | MB moved | KiB in flight/SM: SASS | schedule | predicted µs | % copy |")
    print("|---|---|---|---|---|---|---|---|")
    for name in [m for m in args.models.split(",") if m]:
        regions = traced_regions(name)
        for region in (largest(regions, args.top) if args.top else regions):
            for k in region_kernels(region):
                p = k.performance("h100")
                if p is None:
                    continue
                if p.sass_in_flight_per_sm is not None:
                    sass = f"{p.sass_in_flight_per_sm / 1024:.1f}"
                else:  # no SASS (say why), or none of its instructions a global load
                    sass = "stores only" if p.in_flight_from.startswith("sass") else "—"
                print(f"| {name} | {region.name} | {p.schedule} | {p.min_bytes / 1e6:.0f} | {sass} | "
                      f"{p.schedule_in_flight_per_sm / 1024:.1f} | {p.predicted_s * 1e6:.1f} | "
                      f"{100 * p.fraction_of_copy:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
