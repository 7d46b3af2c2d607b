// fuser_cpu_abi.h -- what kernel modules (fuser_cpu_emu.h), the host runtime they link against
// (fuser_cpu_runtime.cpp) and lowering/backends/cpu_runtime.py (ctypes mirrors) agree on.
//
// The host runtime -- OpenMP grid loop, fibers and their context switch, guarded fiber stacks,
// the SIGSEGV handler, barriers and warp operations, error reports -- is compiled once per
// installation into a shared object; a module compiles only its kernels, the inline device
// emulation (types, intrinsics, accessors) and a small launcher, and calls the runtime through
// the fuser_rt_* functions below. Bump FUSER_CPU_ABI_VERSION with any change to this file.
#ifndef FUSER_CPU_ABI_H
#define FUSER_CPU_ABI_H

#include <stdint.h>

// 5: fuser_rt_index_out_of_range; 4: host runtime in its own shared object; 3: memcheck regions; 2: guarded stack regions.
#define FUSER_CPU_ABI_VERSION 7
#define FUSER_EXPORT __attribute__((visibility("default")))

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

namespace fuser_emu {
enum Error : int {
  kOk = 0,
  kDeadlock = 1,
  kBarrierDivergence = 2,
  kSyncInLoopMode = 3,  // barrier/warp op in a launch with needs_sync=false
  kMisaligned = 4,
  kBadConfig = 5,
  kWarpMaskMismatch = 6,
  kStackOverflow = 7,
  kOutOfMemory = 8,
  kOutOfBounds = 9,  // memcheck
  kRace = 10,        // racecheck
  kInterrupted = 11,  // SIGINT arrived during an interruptible launch (stopped between blocks)
};
// Warp operations (fuser_rt_warp_op).
enum : uint8_t { kShflIdx, kShflUp, kShflDown, kShflXor, kVote, kSyncWarp };
}  // namespace fuser_emu

extern "C" {
// A pointer parameter's accessible bytes, for memcheck.
struct fuser_mem_region {
  uint64_t base;     // the address passed for the parameter
  uint64_t bytes;    // accessible bytes from base (the whole array)
  const char* name;  // for reports, e.g. "in3"
};

struct fuser_launch_config {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t needs_sync;          // 0: plain loop over threads; barriers/shuffles are errors
  int32_t num_threads;          // OS threads; <= 0 means OpenMP's default
  uint64_t dynamic_smem_bytes;  // size of FUSER_DYNAMIC_SHARED storage per block
  int64_t stack_key;            // pthread key of the per-thread fiber stacks shared by all modules; -1: none
  const fuser_mem_region* regions;  // memcheck builds: one per pointer parameter (others ignore it)
  uint32_t num_regions;
  uint32_t interruptible;  // 1: a SIGINT stops the launch between blocks (kInterrupted); the caller
                           // is the thread that handles SIGINT (Python's main thread)
};

struct fuser_launch_stats {
  uint64_t bytes_loaded;  // sum of fuser_ld* bytes over all threads
  uint64_t bytes_stored;  // sum of fuser_st* bytes over all threads
  int32_t error_code;     // one of fuser_emu::Error; 0 on success
  char error[500];        // NUL-terminated message when error_code != 0
  // error_code == kOutOfBounds: the failed access (element index, not bytes).
  int32_t bad_region;    // index into fuser_launch_config::regions; -1: no parameter contains the pointer
  int64_t bad_index;     // element index relative to the region's base
  uint64_t bad_extent;   // the region's extent in elements
};

// The per-OS-thread variables a module's kernels read inline (threadIdx, ...) live in the module,
// where an access costs what a local thread_local costs; the runtime finds the calling thread's
// copies once per launch and writes them through these pointers.
struct fuser_thread_vars {
  uint3* thread_idx;
  uint3* block_idx;
  dim3* block_dim;
  dim3* grid_dim;
  uint64_t* counters;  // [bytes loaded, bytes stored] by this thread, reset per launch
  unsigned char** dynamic_smem;
  const fuser_launch_config** config;  // memcheck: the regions of the launch
  uint64_t* block_serial;              // racecheck: bumped by the runtime before every block it runs
};

// What a kernel contributes to a launch: one thread's body (fiber mode), or a whole block as a
// loop over its threads with the kernel inlined into it (loop mode).
struct fuser_kernel_body {
  void (*thread)(void* ctx);
  void (*loop_block)(void* ctx);
  void* ctx;
  void (*thread_vars)(fuser_thread_vars* out);  // the calling OS thread's variables of the module
  uint64_t fiber_stack_bytes;  // the module's FUSER_FIBER_STACK_BYTES
  int32_t memcheck;            // the module checks accesses: a violation may end a loop-mode block
  int32_t racecheck;           // the module checks races: warp masks must name lanes that reach the op
};

#pragma GCC visibility push(default)
int fuser_rt_abi_version(void);
// Runs the grid; 0 or a fuser_emu::Error, the message in stats->error.
int fuser_rt_run_grid(const char* kernel, const fuser_launch_config* cfg, fuser_launch_stats* stats,
                      const fuser_kernel_body* body);
// __syncthreads() and its _count/_and/_or forms: (threads with pred != 0) | (threads arriving) << 32.
uint64_t fuser_rt_sync_block(int line, int pred);
// Shuffle, vote or __syncwarp: blocks until all live lanes of `mask` arrive; the lane's result.
uint64_t fuser_rt_warp_op(uint8_t op, unsigned mask, uint64_t in, int b_operand, int c_operand);
// Error reports of inline checks (cold paths of the module's accessors).
void fuser_rt_report_misaligned(const void* p, unsigned bytes, const char* what, uint3 tid);
[[noreturn]] void fuser_rt_out_of_bounds(uint64_t p, long long idx, unsigned elem_bytes, int n, const char* what,
                                         int region, uint3 tid);
// Host side, for launch plans (lowering/execution/gather_checks.py): 1 when an element of the contiguous
// signed integer array `data` (n elements of elem_bytes 4 or 8) lies outside [0, extent); with
// has_ignore, elements equal to `ignore` stand for `fill` instead. One pass, no allocation.
// The arguments come packed, in this order, as 7 int64 (one pointer: ctypes converts each
// argument of a call, and seven conversions cost more than the pass over a label vector).
[[noreturn]] void fuser_rt_race(const char* message);
int fuser_rt_index_out_of_range(const int64_t* data_n_bytes_hasignore_ignore_fill_extent);
#pragma GCC visibility pop
}

#endif  // FUSER_CPU_ABI_H
