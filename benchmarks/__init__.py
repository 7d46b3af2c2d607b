"""The benchmark harness (`python -m benchmarks --quick`): fuser against the floor and against torch.

cases.py: the fusions, inputs, numpy references, minimum bytes; measure.py: kernels, bytes,
compile latency, host overhead (method notes there); gpu.py: CUDA-event timings, copy bandwidth,
torch; report.py: the table and the results files; cli.py: the command (`benchmarks.cli:main`)."""
