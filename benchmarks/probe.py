"""Compile-latency probe: `python -m benchmarks.probe CASE_KEY BACKEND OUT.json`.

Run by benchmarks.measure.compile_probe in a fresh process whose FUSER_CACHE_DIR the parent
chose (empty folder = cold, the same folder again = warm). Writes one JSON object to OUT.json:
import_s, define_s, first_execute_s and the executor's passes_s / segment_s / emission_s /
compile_s, plus cubin_s: on the cpu backend NVRTC compiling the fusion's one program (its kernels
in one source, exactly what the cuda backend would compile; cubin for sm_90 without a GPU), on
the cuda backend the executor's compile_s (NVRTC + module load) itself. The inputs are cheap
constant arrays (content does not affect compilation)."""

from __future__ import annotations

import json
import sys
import time

_T0 = time.perf_counter()


class ConstantRng:
    """Stands in for np.random.Generator: the probe needs shapes and dtypes, not randomness
    (building gigabytes of random numbers would dominate a full-size probe)."""

    def standard_normal(self, size, dtype=None):
        import numpy as np

        return np.full(size, 0.5, dtype or np.float64)

    def integers(self, low, high, size, dtype=None):
        import numpy as np

        return (np.arange(size) % high).astype(dtype or np.int64)

    def random(self, size):
        import numpy as np

        return np.ones(size)  # never below the ignore fraction: no ignored labels

    def uniform(self, low, high, size):
        import numpy as np

        return np.full(size, (low + high) / 2)


def probe(case_key: str, backend: str) -> dict:
    from fuser.benchmarks.cases import parse_case
    from fuser.benchmarks.measure import compile_timings

    import fuser.lowering.execution.executor  # noqa: F401  (the import is part of the cold cost, measured)

    record: dict = {"case": case_key, "backend": backend}
    t_import = time.perf_counter()
    record["import_s"] = t_import - _T0
    case = parse_case(case_key)
    fd = case.build()
    t_defined = time.perf_counter()
    record["define_s"] = t_defined - t_import
    inputs = case.spec.make_inputs(ConstantRng(), case.shape, case.dtype)
    t_inputs = time.perf_counter()
    fd.execute(inputs, backend=backend)
    record["first_execute_s"] = time.perf_counter() - t_inputs
    timings = compile_timings(fd)
    for name in ("passes_s", "segment_s", "emission_s", "compile_s"):
        record[name] = timings.get(name)
    kernels = fd.last_kernels()
    record["kernels"] = len(kernels)
    from fuser.lowering.backends import get_backend

    if get_backend(backend).on_gpu:  # the executor's own compile made the cubins
        record["cubin_s"] = record["compile_s"]
        record["cubin_compiler"] = "executor (NVRTC/nvcc + load)"
    else:
        from fuser.lowering.backends.compile import available_compilers, compile_cuda
        from fuser.lowering.execution.compiled import fusion_source

        compilers = available_compilers()
        device_kernels = [k for k in kernels if k.source]  # host segments have no source
        if compilers and device_kernels:
            t = time.perf_counter()
            compiled = compile_cuda(fusion_source(device_kernels))
            record["cubin_s"] = time.perf_counter() - t
            record["cubin_origins"] = [compiled.origin]
            record["cubin_compiler"] = next(iter(compilers.values()))
        else:
            record["cubin_s"] = None
            record["cubin_compiler"] = "none available" if not compilers else "no device kernels"
    return record


def main(argv: list[str]) -> int:
    case_key, backend, out_path = argv
    try:
        record = probe(case_key, backend)
        code = 0
    except Exception as e:  # reported to the parent, which prints it in the table's notes
        from fuser.benchmarks.measure import error_text

        record = {"case": case_key, "backend": backend, "error": error_text(e)}
        code = 1
    with open(out_path, "w") as f:
        json.dump(record, f)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
