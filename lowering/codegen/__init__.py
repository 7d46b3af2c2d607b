"""Code generation: per-kernel analysis (every global load with a typed index), the kernel
bodies the schedulers fill, CUDA C emission and the rendering of one program per fusion
(a pure function of the scheduled kernels), and `fuser-opt -t cuda`."""
