"""`python -m fuser.benchmarks.lm_head [--tokens 8192] [--hidden 768] [--vocab 50257]
[--dtype float32] [--device cpu] [--modes eager,inductor,fuser,fuser_unfused]`: an LM head's
training step, `cross_entropy(linear(h, W), labels)` and its backward, per mode in a fresh
process: the peak memory the step adds, and its time.

Defaults are GPT-2 small's head at 8×1024 tokens (its f32 logits are 1.6 GB). Modes: eager;
torch.compile with Inductor; fuser (the head chunked: fuser/torch_backend/linear_cross_entropy.py);
fuser_unfused (FUSER_DISABLE=fused_linear_cross_entropy: the logits whole, the cross-entropy
fused). Memory: on cpu the growth of the peak resident size over the step (/proc/self/status
VmHWM, reset through /proc/self/clear_refs just before it; glibc's mmap threshold fixed at
64 KiB so that freed buffers leave the resident size); on cuda
torch.cuda.max_memory_allocated over the step. The measured step is the second (the first
compiles). Prints a markdown table; --json writes the rows. Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

MODES = ("eager", "inductor", "fuser", "fuser_unfused")

_CHILD = textwrap.dedent("""
    import json, sys, time, torch, torch.nn.functional as F
    mode, tokens, hidden, vocab, dtype, device = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5], sys.argv[6]
    dtype = getattr(torch, dtype)
    torch.manual_seed(0)
    h = torch.randn(tokens, hidden, device=device, dtype=dtype, requires_grad=True)
    w = (torch.randn(vocab, hidden, device=device) / hidden ** 0.5).to(dtype).requires_grad_()
    y = torch.randint(0, vocab, (tokens,), device=device)

    def head(h, w):
        return F.cross_entropy(F.linear(h, w).float(), y)

    if mode == "inductor":
        head = torch.compile(head)
    elif mode.startswith("fuser"):
        from fuser.torch_backend import make_backend
        head = torch.compile(head, backend=make_backend())

    def resident(field):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1]) * 1024

    def step():
        head(h, w).backward()
        h.grad = w.grad = None

    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    if device == "cuda":
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        open("/proc/self/clear_refs", "w").write("5")
        before = resident("VmRSS")
    start = time.perf_counter()
    step()
    if device == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
    else:
        peak = resident("VmHWM") - before
    print(json.dumps({"mode": mode, "first_step_s": first, "step_s": time.perf_counter() - start, "peak_bytes": peak}))
""")


def measure(mode: str, args) -> dict:
    # A fixed mmap threshold: every buffer of 64 KiB or more is mapped on allocation and unmapped
    # when freed, so the resident size follows the live buffers (glibc's default threshold rises
    # to 32 MiB after the first frees, and freed heap memory would hide later allocations).
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    if mode == "fuser_unfused":
        env["FUSER_DISABLE"] = ",".join(filter(None, [env.get("FUSER_DISABLE", ""), "fused_linear_cross_entropy"]))
    done = subprocess.run([sys.executable, "-c", _CHILD, mode, str(args.tokens), str(args.hidden), str(args.vocab),
                           args.dtype, args.device], capture_output=True, text=True, env=env, timeout=args.timeout)
    if done.returncode != 0:
        return {"mode": mode, "error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict], args) -> str:
    logits = args.tokens * args.vocab * 4
    lines = [f"LM head step, {args.tokens} tokens x {args.hidden} hidden x {args.vocab} vocab, {args.dtype} on "
             f"{args.device} (f32 logits: {logits / 2**30:.2f} GiB)", "",
             "| mode | peak memory added | × logits | step s | first step s |", "|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['mode']} | failed: {r['error']} | | | |")
            continue
        lines.append(f"| {r['mode']} | {r['peak_bytes'] / 2**30:.2f} GiB | {r['peak_bytes'] / logits:.2f} | "
                     f"{r['step_s']:.2f} | {r['first_step_s']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fuser.benchmarks.lm_head", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=8 * 1024)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode {unknown[0]!r}; modes: {', '.join(MODES)}")
    rows = []
    for mode in modes:
        rows.append(measure(mode, args))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    print(table(rows, args))


if __name__ == "__main__":
    main()
