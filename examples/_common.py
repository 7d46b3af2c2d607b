"""Shared by the examples: run a fusion on the default backend, check it, show its kernels."""

from __future__ import annotations

import numpy as np

from fuser import FusionDefinition


def run_and_report(title: str, fd: FusionDefinition, inputs: list, reference: list[np.ndarray], rtol=1e-5, atol=1e-6):
    outputs = fd.execute(inputs)
    kernels = fd.last_kernels()
    backend = "reference" if not kernels else ("cpu" if kernels[0].bytes_loaded is not None else "cuda")
    print(f"== {title} on the {backend} backend")
    ok = True
    for i, (out, ref) in enumerate(zip(outputs, reference)):
        out = np.asarray(out, dtype=np.float64)
        err = float(np.max(np.abs(out - ref))) if out.size else 0.0
        good = np.allclose(out, ref, rtol=rtol, atol=atol)
        ok &= good
        print(f"output {i}: shape {list(out.shape)}, max abs error vs numpy {err:.3g}: {'OK' if good else 'MISMATCH'}")
    minimum = sum(x.nbytes for x in inputs if isinstance(x, np.ndarray)) + sum(np.asarray(o).nbytes for o in outputs)
    print(f"{len(kernels)} kernel(s):")
    for k in kernels:
        traffic = ""
        if k.bytes_loaded is not None:
            traffic = f", {k.bytes_loaded} B loaded, {k.bytes_stored} B stored"
        print(f"  {k.name}: scheduler {k.scheduler}, grid {k.grid[0]}, block {k.block[0]}{traffic}")
    if kernels and kernels[0].bytes_loaded is not None:
        moved = sum(k.bytes_loaded + k.bytes_stored for k in kernels)
        print(f"global bytes moved / minimum (inputs read once, outputs written once): {moved / minimum:.3f}")
    if not ok:
        raise SystemExit(f"{title}: results differ from numpy")
    return outputs
