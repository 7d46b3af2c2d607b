"""The results table (markdown), benchmarks/results.md (appended), benchmarks/results.json (a list of
runs, appended) and, on request, the benchmark section of docs/benchmarks.md (replaced between markers)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import subprocess
from pathlib import Path

from fuser.benchmarks.measure import REPO_ROOT, SCHEDULER_ABBREV
from fuser.lowering import settings
from fuser.lowering.backends import get_backend

RESULTS_MD = Path(__file__).resolve().parent / "results.md"
RESULTS_JSON = Path(__file__).resolve().parent / "results.json"
BENCHMARKS_DOC = REPO_ROOT / "docs" / "benchmarks.md"
"""The page whose `<!-- fuser-bench:BACKEND:begin/end -->` section --update-readme rewrites (the README
links to it; it used to hold the section itself, hence the flag's name)."""


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=REPO_ROOT).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def git_commit() -> str:
    sha = _run(["git", "rev-parse", "--short", "HEAD"]) or "unknown"
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    return sha + ("+dirty" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    import numpy

    info = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "commit": git_commit(),
    }
    try:
        info["loadavg_start"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    try:
        import xdsl

        info["xdsl"] = getattr(xdsl, "__version__", "?")
    except ImportError:
        pass
    cxx = _run([settings.cxx(), "--version"]).splitlines()
    info["cxx"] = cxx[0] if cxx else "none"
    try:
        from fuser.lowering.backends.compile import available_compilers

        info["cuda_compilers"] = available_compilers()
    except Exception:
        info["cuda_compilers"] = {}
    try:
        info["mem_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return info


# --------------------------------------------------------------------------- formatting


def _f(x, fmt: str = "{:.0f}", none: str = "—") -> str:
    return none if x is None else fmt.format(x)


def _ms(s) -> str:
    if s is None:
        return "—"
    ms = s * 1e3
    return f"{ms:.1f}" if ms < 10 else f"{ms:.0f}"


def _kernels(row: dict) -> str:
    if row.get("kernels") is None:
        return "—"
    scheds = [SCHEDULER_ABBREV.get(s, s) for s in row.get("schedulers", [])]
    return f"{row['kernels']} ({'+'.join(scheds)})" if scheds else str(row["kernels"])


def _check(row: dict) -> str:
    if row.get("check_ok") is None:
        return "—"
    err = row.get("check_err")
    return ("ok" if row["check_ok"] else "**FAIL**") + (f" {err:.0e}" if err is not None and err > 0 else "")


def _load(avg) -> str:
    return "/".join(f"{x:.1f}" for x in avg) if avg else "?"


def _shape(shape) -> str:
    return "×".join(map(str, shape))


def table(rows: list[dict], gpu: bool) -> str:
    head = ["case", "dtype", "shape", "kernels", "bytes / min", "DRAM / min", "cold ms", "define", "passes", "segment",
            "emission",
            "cubin", "g++", "warm ms", "host µs", "+ launches µs", "check"]
    if gpu:
        head += ["kernel µs", "model µs", "GB/s", "% copy", "exec µs", "eager µs", "compile µs", "× eager", "× compile"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for row in rows:
        cold = (row.get("compile") or {}).get("cold") or {}
        bytes_cell = _f(row.get("bytes_ratio"), "{:.2f}")
        if row.get("bytes_shape") and row.get("bytes_ratio") is not None and row["bytes_shape"] != row["shape"]:
            bytes_cell += f" @{_shape(row['bytes_shape'])}"
        gxx = None if get_backend(row["backend"]).on_gpu else cold.get("compile_s")  # else NVRTC + load
        cells = [row["kind"], row["dtype"], _shape(row["shape"]), _kernels(row), bytes_cell, _f(row.get("dram_ratio"), "{:.2f}"),
                 _ms(row.get("cold_total_s")), _ms(cold.get("define_s")), _ms(cold.get("passes_s")), _ms(cold.get("segment_s")),
                 _ms(cold.get("emission_s")), _ms(cold.get("cubin_s")), _ms(gxx), _ms(row.get("warm_total_s")),
                 _f((row.get("host") or {}).get("host_us")), _f((row.get("host") or {}).get("with_empty_kernels_us")),
                 _check(row)]
        if gpu:
            g = row.get("gpu") or {}
            copy = row.get("copy_gbps")
            pct = g["achieved_gbps"] / copy * 100 if g.get("achieved_gbps") and copy else None
            cells += [_f(g.get("kernel_us"), "{:.1f}"), _f(g.get("predicted_us"), "{:.1f}"), _f(g.get("achieved_gbps")),
                      _f(pct), _f(g.get("exec_us"), "{:.1f}"),
                      _f(g.get("eager_us"), "{:.1f}"), _f(g.get("compile_us"), "{:.1f}"),
                      _f(g.get("vs_eager"), "{:.2f}"), _f(g.get("vs_compile"), "{:.2f}")]
        if row.get("errors"):
            cells[0] += " †"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


LEGEND = """\
kernels: launched per `execute` (pers = inner_persistent, red = reduction, pw = pointwise). \
bytes / min: global bytes loaded + stored, counted by the cpu backend, over the minimum (each input \
read once, each output written once; `@shape`: counted at that shape, same row length); DRAM / min: the \
performance model's DRAM traffic on an H100 over the minimum (loads that other rows or threads repeat and \
L2 serves, a weight re-read per row, count once). \
cold ms: definition → cubin in a fresh process with empty caches (the total) = define + passes (concretize + \
pre-segmentation) + segment + emission + cubin (NVRTC, sm_90 without a GPU); g++: the cpu backend's \
compiler on the same sources; warm ms: the same in a second process with the disk caches. \
host µs: fuser's own share of a cached `execute` of the row's fusion (median of wall time minus the \
time inside the launch calls) while each kernel is swapped for an empty one; a launch-plan call's "launch \
call" is the bare C launcher of the empty kernel only (writing the pointers counts as fuser's share); \
+ launches µs: the median wall time of such a call = a cached `execute` with kernel time excluded (cuda: \
empty kernels of the same grid/block; cpu: the emulation's fixed dispatch cost, 1 block of 1 thread). check: worst error relative to the reference's largest \
magnitude."""

GPU_LEGEND = """\
kernel µs: CUDA events, median, a replay of the fusion's launches, inputs rotated beyond 2× L2; \
model µs: the performance model's prediction for this GPU (lowering/schedulers/performance.py; each \
kernel's own time, schedule and prediction are in the JSON's kernel_detail); \
GB/s = minimum bytes / kernel time; % copy: of the measured device-to-device copy; exec µs: the whole \
`fd.execute` timed the same way (host overhead included where it dominates); eager / compile: torch \
on the same inputs; × = torch time / fuser kernel time (> 1: fuser faster)."""


def render_markdown(run: dict) -> str:
    m = run["machine"]
    gpu = run.get("gpu_info")
    where = f"{m['cpu']} ({m['nproc']} cpus), {m['platform']}"
    if gpu:
        where += f"; GPU: {gpu['name']} ({gpu['capability']}, L2 {gpu['l2_bytes'] >> 20} MiB)"
    out = [f"### {m['date']} — backend `{run['backend']}`, {run['mode']} mode, commit `{m['commit']}`", "",
           f"Machine: {where}. Python {m['python']}, numpy {m['numpy']}, {m.get('cxx', '')}, "
           f"CUDA compilers: {', '.join(m.get('cuda_compilers', {}).values()) or 'none'}"
           + (f", torch {gpu['torch']}" if gpu and gpu.get("torch") else "") + ".", "",
           f"Command: `{run['command']}` ({run['wall_s']:.0f} s; load average "
           f"{_load(m.get('loadavg_start'))} at the start, {_load(run.get('loadavg_end'))} at the end).", "",
           table(run["rows"], gpu is not None), ""]
    tiny = run.get("tiny_overhead")
    if tiny and "error" not in tiny:
        out.append(f"Host overhead of a cached `execute` of {tiny['fusion']} (medians of {tiny['calls']} calls): "
                   f"{tiny['real_kernel_us']:.1f} µs with its real kernel; {tiny['with_empty_kernels_us']:.1f} µs with "
                   f"the kernel swapped for an empty one, of which {tiny['host_us']:.1f} µs is fuser's own share and "
                   f"{tiny['in_launch_us']:.1f} µs the launch call with the real arguments' marshalling (the empty "
                   f"kernel's launch alone, grid {tiny['empty_grid'][0]}, block {tiny['empty_block'][0]}: "
                   f"{tiny['empty_launch_us']:.1f} µs).")
    elif tiny:
        out.append(f"Host overhead: failed ({tiny['error']}).")
    region = run.get("region_overhead")
    if region and "error" not in region:
        out.append(f"A fused region under torch.compile ({region['program']}, medians of {region['calls']} calls): "
                   f"{region['host_us']:.1f} µs fuser's own share per region call (kernel swapped for an empty one; "
                   f"eager `torch.add` of the same tensors, interleaved: {region['eager_add_us']:.1f} µs); the whole "
                   f"compiled call, Dynamo's guards and AOTAutograd's wrapper included: "
                   f"{region['compiled_call_us']:.1f} µs.")
    elif region:
        out.append(f"Region host overhead: failed ({region['error']}).")
    if run.get("memcheck"):
        out.append(memcheck_line(run["memcheck"]))
    if run.get("index_checks"):
        out.append(index_check_line(run["index_checks"], run.get("backend", "")))
    if run.get("copy"):
        c = run["copy"]
        out.append(f"Device-to-device copy of {c['bytes'] >> 20} MiB: {c['gbps']:.0f} GB/s (read + write).")
    out += ["", LEGEND + (" " + GPU_LEGEND if gpu else "")]
    if run.get("not_run"):
        out += ["", f"Not run (--budget spent): {', '.join(run['not_run'])}."]
    errors = [(r, e) for r in run["rows"] for e in r.get("errors", [])]
    if errors:
        out += ["", "Failures (†):"]
        out += [f"- {r['kind']} {r['dtype']} {_shape(r['shape'])}: {e}" for r, e in errors]
    return "\n".join(out) + "\n"


def memcheck_line(records: list[dict]) -> str:
    """One sentence: warm execute times without and with FUSER_MEMCHECK=1."""
    parts = []
    for r in records:
        if "error" in r:
            parts.append(f"{r['case']}: failed ({r['error']})")
        else:
            parts.append(f"{r['case']} {r['off_ms']:.2f} → {r['on_ms']:.2f} ms (×{r['on_ms'] / r['off_ms']:.2f})")
    return ("Memcheck overhead (`FUSER_MEMCHECK=1`: every global access bounds-checked; cpu backend, median of "
            f"warm `execute` calls, off → on): {'; '.join(parts)}.")


def index_check_line(records: list[dict], backend: str) -> str:
    """One sentence: warm execute times without and with the in-kernel index checks."""
    parts = []
    for r in records:
        if "error" in r:
            parts.append(f"{r['case']}: failed ({r['error']})")
        else:
            parts.append(f"{r['case']} {r['unchecked_ms']:.3f} → {r['checked_ms']:.3f} ms "
                         f"(×{r['checked_ms'] / r['unchecked_ms']:.2f})")
    return (f"In-kernel index checks ({backend or 'this backend'}, median of warm `execute` calls, "
            f"`FUSER_DISABLE=kernel_index_checks` → default): {'; '.join(parts)}.")


def default_out_dir() -> Path:
    """Where a run's results go unless --save: untracked (.gitignore), so a run leaves the checkout clean."""
    return Path.cwd() / "benchmarks-out"


def append_results(run: dict, markdown: str, results_md: Path = RESULTS_MD, results_json: Path = RESULTS_JSON) -> None:
    """Appends the run to results_md (one markdown section per run) and results_json (a list of runs)."""
    results_md.parent.mkdir(parents=True, exist_ok=True)
    with open(results_md, "a") as f:
        if f.tell() == 0:
            f.write("# fuser benchmark results\n\nAppended by `python -m benchmarks` (one section per run).\n\n")
        f.write(markdown + "\n")
    runs = []
    if results_json.exists():
        try:
            runs = json.loads(results_json.read_text())
        except json.JSONDecodeError:
            runs = []
    runs.append(run)
    results_json.write_text(json.dumps(runs, indent=1, default=str) + "\n")


PLACEHOLDER = "<!-- BENCHMARK TABLE -->"


def update_readme(markdown: str, backend: str, readme: Path = BENCHMARKS_DOC) -> str:
    """Put this run's markdown in docs/benchmarks.md between `<!-- fuser-bench:BACKEND:begin -->` and
    `<!-- fuser-bench:BACKEND:end -->` (replacing what a previous run put there); the first time,
    those markers replace the `<!-- BENCHMARK TABLE -->` placeholder (the cpu section first, a gpu
    section after it). Returns what happened."""
    begin, end = f"<!-- fuser-bench:{backend}:begin -->", f"<!-- fuser-bench:{backend}:end -->"
    section = f"{begin}\n{markdown.rstrip()}\n{end}"
    if not readme.exists():
        return f"{readme} does not exist; not changed"
    text = readme.read_text()
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    elif PLACEHOLDER in text:
        gpu_last = f"{PLACEHOLDER}\n\n{section}" if get_backend(backend).on_gpu else f"{section}\n\n{PLACEHOLDER}"
        text = text.replace(PLACEHOLDER, gpu_last, 1)
    else:
        return f"{readme} has neither {PLACEHOLDER} nor the markers {begin} … {end}; not changed"
    readme.write_text(text)
    return f"updated the {backend} section of {readme}"
