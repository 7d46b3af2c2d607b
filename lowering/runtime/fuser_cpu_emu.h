// fuser_cpu_emu.h -- run generated CUDA C on the CPU (g++ -std=c++20 -fopenmp -DFUSER_CPU).
//
// Included by fuser_prelude.cuh when FUSER_CPU is defined; lowering/cpu_runtime.py puts this
// directory on the include path. Not meant to be included on its own by kernel sources.
//
// Execution model
//   * A launch spreads its blocks over OS threads with OpenMP; one OS thread runs one block at a
//     time, so `__shared__` can be `static thread_local` and every fiber of a block sees it.
//   * needs_sync=true: every CUDA thread of a block is a fiber (own stack, x86-64 context switch
//     in assembly, ucontext elsewhere or with -DFUSER_EMU_UCONTEXT). Fibers run round-robin,
//     each until it blocks: at __syncthreads() (block barrier) or at a warp operation (shuffle,
//     vote, __syncwarp). Running every thread to its next barrier before the next thread starts is
//     deliberately hostile to a missing barrier: reads of not-yet-written shared memory see stale
//     data instead of the lucky timing a GPU often gives.
//   * Threads that return stop counting toward barriers and warp masks. If every live thread is
//     blocked and nothing can be released, the block is a deadlock and the launch fails with a
//     message instead of hanging. Threads meeting at different __syncthreads() lines (undefined
//     behaviour in CUDA) fail the launch as "barrier divergence".
//   * needs_sync=false: the block is a plain loop over threads, no fibers; a barrier or warp
//     operation in such a launch is reported as an error.
//   * Limits: a thread spinning on a value another thread of its block will write never yields,
//     so it hangs; static __shared__ memory keeps the previous block's contents (dynamic shared
//     memory is refilled with 0xff); a fiber that overflows its stack (FUSER_FIBER_STACK_BYTES)
//     faults in a guard page and fails its launch (see SharedStacks; an overflow inside a C library
//     call that holds a lock leaves it held); CPU-mode sources must not include C++ standard headers such as
//     <cmath> (their global `using std::...` declarations clash with the CUDA overloads here).
//   * Memcheck (-DFUSER_MEMCHECK, lowering/cpu_runtime.py adds it for FUSER_MEMCHECK=1): every
//     fuser_ld*/fuser_st* must stay inside the pointer parameter it was derived from; the launcher
//     passes each pointer parameter's byte range (fuser_mem_region). A violation ends the block
//     before the access happens and fails the launch naming kernel, block, thread, parameter,
//     index and extent (compute-sanitizer's memcheck for the same source). Without the flag the
//     accessors compile exactly as before: the check costs nothing unless asked for.
//
// Deliberate departures from <atomic>/<cmath>: both headers cost 0.2-0.4 s of compile time per
// module, so atomics use the GCC __atomic builtins (what std::atomic_ref compiles to) and math
// comes from the C <math.h> plus the float overloads CUDA device code expects.
#ifndef FUSER_CPU_EMU_H
#define FUSER_CPU_EMU_H

// The plain C headers: libstdc++'s wrappers would pull in <cmath>/<cstdlib> (compile time) and
// `using std::abs` etc., which would clash with the CUDA-style overloads below.
#define _GLIBCXX_INCLUDE_NEXT_C_HEADERS
#include <math.h>
#include <stdlib.h>
#undef _GLIBCXX_INCLUDE_NEXT_C_HEADERS
#include <omp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <type_traits>
#include <utility>

#if !defined(__x86_64__) && !defined(FUSER_EMU_UCONTEXT)
#define FUSER_EMU_UCONTEXT 1
#endif
#if defined(FUSER_EMU_UCONTEXT)
#include <ucontext.h>
#endif

#ifndef FUSER_FIBER_STACK_BYTES
#define FUSER_FIBER_STACK_BYTES (128 * 1024)
#endif

// ---------------------------------------------------------------------------------------------
// ABI shared with lowering/cpu_runtime.py (mirrored there with ctypes; bump both together).
// ---------------------------------------------------------------------------------------------
#define FUSER_CPU_ABI_VERSION 3  // 3: memcheck regions; 2: guarded stack regions, the key has no destructor
#define FUSER_EXPORT __attribute__((visibility("default")))

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

FUSER_EXPORT int fuser_cpu_abi_version(void) { return FUSER_CPU_ABI_VERSION; }
#if defined(FUSER_MEMCHECK)
FUSER_EXPORT int fuser_cpu_memcheck(void) { return 1; }
#else
FUSER_EXPORT int fuser_cpu_memcheck(void) { return 0; }
#endif
}

// ---------------------------------------------------------------------------------------------
// CUDA keywords and built-in variables.
// ---------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __shared__ static thread_local
#define __constant__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __ldg(p) (*(p))
// __restrict__ is already a g++ keyword.

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

static constexpr int warpSize = 32;

// Per OS thread; the block scheduler rewrites threadIdx before resuming each fiber.
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;

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
};

// ---------------------------------------------------------------------------------------------
// Launch state and error reporting. The first error wins; later blocks are skipped.
// ---------------------------------------------------------------------------------------------
struct LaunchState {
  const char* kernel;
  int64_t stack_key;
  const fuser_mem_region* regions;
  uint32_t num_regions;
  fuser_launch_stats* stats;
  int error;  // accessed with __atomic builtins
  uint64_t bytes_loaded, bytes_stored;
};

struct Counters {
  uint64_t loaded, stored;
};

static thread_local LaunchState* tls_launch;
static thread_local Counters tls_counters;

inline bool launch_failed(const LaunchState* st) { return __atomic_load_n(&st->error, __ATOMIC_RELAXED) != 0; }

// Records an error for the current launch as "kernel 'k'[ block (x,y,z)]: <message>"; false when
// an earlier error already won.
__attribute__((cold)) inline bool vreport(int code, bool in_block, const char* fmt, va_list ap) {
  LaunchState* st = tls_launch;
  int expected = 0;
  if (!st || !__atomic_compare_exchange_n(&st->error, &expected, code, false, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED))
    return false;
  char* out = st->stats->error;
  const size_t cap = sizeof(st->stats->error);
  int n = in_block ? snprintf(out, cap, "kernel '%s' block (%u,%u,%u): ", st->kernel, blockIdx.x, blockIdx.y,
                              blockIdx.z)
                   : snprintf(out, cap, "kernel '%s': ", st->kernel);
  if (n >= 0 && (size_t)n < cap) vsnprintf(out + n, cap - n, fmt, ap);
  return true;
}
// An error inside the block this OS thread is running.
__attribute__((format(printf, 2, 3), cold)) inline bool report(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const bool first = vreport(code, true, fmt, ap);
  va_end(ap);
  return first;
}
// An error of the launch as a whole.
__attribute__((format(printf, 2, 3), cold)) inline void report_launch(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(code, false, fmt, ap);
  va_end(ap);
}

// ---------------------------------------------------------------------------------------------
// Global-memory accounting (called by fuser_ld/fuser_st in the prelude).
// ---------------------------------------------------------------------------------------------
__forceinline__ void count_load(uint64_t bytes) { tls_counters.loaded += bytes; }
__forceinline__ void count_store(uint64_t bytes) { tls_counters.stored += bytes; }

// A GPU faults on a misaligned vector access; the CPU would not, so check explicitly.
__forceinline__ void check_aligned(const void* p, unsigned bytes, const char* what) {
  if (__builtin_expect(((uintptr_t)p & (bytes - 1)) != 0, 0))
    report(kMisaligned, "thread (%u,%u,%u): %s of %u bytes at %p is not %u-byte aligned", threadIdx.x,
           threadIdx.y, threadIdx.z, what, bytes, p, bytes);
}

// ---------------------------------------------------------------------------------------------
// Execution contexts. Only callee-saved state is switched: a switch is an ordinary function
// call for the compiler. MXCSR/x87 control words are not saved because kernels never change
// rounding modes.
// ---------------------------------------------------------------------------------------------
struct Fiber;
#if !defined(FUSER_EMU_UCONTEXT)
struct Context {
  void* sp;
};
}  // namespace fuser_emu

extern "C" void fuser_emu_switch(void** save_sp, void* load_sp);
extern "C" void fuser_emu_fiber_entry();
// fuser_emu_switch: push callee-saved registers, swap stack pointers, pop, continue where the
// other context called it. It leaves with pop + indirect jmp rather than `ret`: a `ret` to an
// address the return-stack predictor never saw mispredicts on every switch (17 ns vs 3 ns per
// switch measured here). fuser_emu_fiber_entry: where a new fiber starts; calls r13(r12).
asm(R"(
  .text
  .globl fuser_emu_switch
  .hidden fuser_emu_switch
  .type fuser_emu_switch, @function
  .p2align 4
fuser_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  popq %rcx
  jmpq *%rcx
  .size fuser_emu_switch, .-fuser_emu_switch

  .globl fuser_emu_fiber_entry
  .hidden fuser_emu_fiber_entry
  .type fuser_emu_fiber_entry, @function
  .p2align 4
fuser_emu_fiber_entry:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size fuser_emu_fiber_entry, .-fuser_emu_fiber_entry
)");

namespace fuser_emu {
inline void ctx_init(Context* c, char* stack_lo, size_t size, void (*fn)(Fiber*), Fiber* arg) {
  // Frame popped by fuser_emu_switch: r15 r14 r13 r12 rbx rbp, then the address to continue at.
  // After the pops rsp = top - 16, so the `call` in the entry stub leaves the ABI's alignment.
  void** top = (void**)(((uintptr_t)(stack_lo + size)) & ~(uintptr_t)15);
  void** sp = top - 9;
  sp[0] = nullptr;                                   // r15
  sp[1] = nullptr;                                   // r14
  sp[2] = (void*)fn;                                 // r13: function to call
  sp[3] = arg;                                       // r12: its argument
  sp[4] = nullptr;                                   // rbx
  sp[5] = nullptr;                                   // rbp: ends frame-pointer chains
  sp[6] = (void*)&fuser_emu_fiber_entry;             // return address
  c->sp = sp;
}
inline void ctx_switch(Context* from, Context* to) { fuser_emu_switch(&from->sp, to->sp); }
#else
struct Context {
  ucontext_t uc;
};
static thread_local Fiber* tls_starting_fiber;
static thread_local void (*tls_starting_fn)(Fiber*);
inline void ucontext_entry() { tls_starting_fn(tls_starting_fiber); }
inline void ctx_init(Context* c, char* stack_lo, size_t size, void (*fn)(Fiber*), Fiber* arg);
inline void ctx_switch(Context* from, Context* to);
#endif

// ---------------------------------------------------------------------------------------------
// Fibers and the per-block scheduler.
// ---------------------------------------------------------------------------------------------
enum : uint8_t { kRunnable, kAtBarrier, kAtWarp, kDone };
enum : uint8_t { kShflIdx, kShflUp, kShflDown, kShflXor, kVote, kSyncWarp };

struct Fiber {
  Context ctx;
  uint3 tid;
  uint16_t index;  // linear thread index in the block
  uint8_t state;
  uint8_t op;      // warp operation waited on
  unsigned mask;   // its member mask
  int b, c;        // shfl operands in PTX form (lane/delta, clamp|segmask<<8)
  int line;        // __syncthreads() line waited on
  uint64_t in, out;
  char* stack_lo;
  size_t stack_size;  // usable bytes above stack_lo (staggered, see FiberPool)
};

struct Warp {
  unsigned live;     // lanes that exist and have not returned
  unsigned waiting;  // lanes blocked in a warp operation
};

struct Block {
  Fiber* fibers;
  int n, live;
  int at_barrier, barrier_pred;  // threads waiting at __syncthreads(), and those with pred != 0
  int barrier_line, other_line;  // other_line != -1: threads wait on two different lines
  bool failed;
  Fiber* current;
  Context sched;
  void (*body)(void*);
  void* body_ctx;
  Warp warps[32];
};

static thread_local Block* tls_block;  // null in loop mode

#if defined(FUSER_EMU_UCONTEXT)
inline void ctx_init(Context* c, char* stack_lo, size_t size, void (*fn)(Fiber*), Fiber* arg) {
  // makecontext passes int arguments only; the new fiber reads its Fiber from TLS instead.
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack_lo;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = nullptr;
  tls_starting_fn = fn;
  makecontext(&c->uc, (void (*)())ucontext_entry, 0);
  (void)arg;
}
inline void ctx_switch(Context* from, Context* to) {
  tls_starting_fiber = tls_block->current;
  swapcontext(&from->uc, &to->uc);
}
#endif

// Fiber stacks. A process loads many modules, and each runs blocks on every OS thread of the
// OpenMP pool; stacks owned per module and thread would keep a few KiB per fiber resident for
// every pair (1 MiB per 256-thread pool). So all modules share ONE stack region per OS thread,
// reached through a pthread key that lowering/cpu_runtime.py creates once per process and passes
// in fuser_launch_config. Sharing is safe because an OS thread runs one block at a time. The key
// has no destructor: the FiberPool of whichever module's thread-exit destructor runs first unmaps
// the region (a C++ thread_local destructor can do what a bare pthread destructor cannot: munmap
// needs the length and the signal stack must be switched off first).
//
// One mmap per region, low to high addresses:
//   [guard][signal stack][header page][guard][stack 0][guard][stack 1] ... [guard][stack n-1]
// Every stack has a PROT_NONE guard below it, so an overflow faults at an address known to be a
// guard instead of silently writing into the stack below. Kernels are compiled with
// -fstack-clash-protection, so a frame larger than a guard touches its pages one by one and
// cannot jump over the guard into the next stack. The SIGSEGV handler below recognises such a
// fault and ends the block (see run_block_fibers); it runs on the region's signal stack because
// the overflowed stack has no room left for a signal frame.
// Cost: 2 memory mappings per stack (vm.max_map_count, 65530 by default, bounds OS threads x
// threads per block to ~32k); the pages stay untouched, so not resident, until a fiber uses them.
struct SharedStacks {
  static constexpr uint64_t kMagic = 0x66757365722d7332ull;  // "fuser-s2": layout version
  uint64_t magic;
  uint64_t generation;  // never repeats for one OS thread, even when a new region reuses the address
  char* map;
  size_t map_bytes;
  char* first_slot;  // slot i = guard then stack, slot_bytes apart
  size_t guard_bytes, stack_bytes, slot_bytes;
  int count;
  bool own_sigstack;    // the signal stack of this region is the thread's sigaltstack
  sigjmp_buf* recover;  // set while this thread runs a fiber block: where the fault handler jumps
  int overflowed;       // the stack whose guard the fault handler found touched

  char* stack_lo(int i) const { return first_slot + (size_t)i * slot_bytes + guard_bytes; }
  // Index of the stack whose guard holds `addr`, or -1.
  int guard_of(uintptr_t addr) const {
    const uintptr_t lo = (uintptr_t)first_slot;
    if (addr < lo || addr >= lo + (size_t)count * slot_bytes) return -1;
    const uintptr_t off = addr - lo;
    return off % slot_bytes < guard_bytes ? (int)(off / slot_bytes) : -1;
  }
};

inline size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }
inline size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The key every module of the process uses (set by the first fiber launch, read by the handler).
static int64_t g_region_key = -1;
static const char* g_region_error = "";  // why the last region could not be made (static text)
static struct sigaction g_previous_segv;  // the handler ours was installed over

// The pthread key of the calling thread's region: the process-wide one from cpu_runtime.py, or one
// private to this module when there is none (the fault handler reads regions through keys only).
inline int64_t region_key(int64_t shared_key) {
  if (shared_key >= 0) return shared_key;
  static const int64_t private_key = [] {
    pthread_key_t k;
    return pthread_key_create(&k, nullptr) == 0 ? (int64_t)k : (int64_t)-1;
  }();
  return private_key;
}

// Makes the region's signal stack the thread's, unless the thread already has one (Python's
// faulthandler installs one on the main thread; keep it, it serves our handler as well).
inline void adopt_sigstack(SharedStacks* s, char* lo, size_t bytes) {
  stack_t cur;
  s->own_sigstack = false;
  if (sigaltstack(nullptr, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;
  stack_t ss{};
  ss.ss_sp = lo;
  ss.ss_size = bytes;
  s->own_sigstack = sigaltstack(&ss, nullptr) == 0;
}

inline void unmap_region(SharedStacks* s) {
  if (s->own_sigstack) {  // the kernel must not deliver a signal onto unmapped memory
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  }
  munmap(s->map, s->map_bytes);
}

// A new region of `count` stacks of `stack_bytes`, guards in place; null (g_region_error set) if
// the memory or the mappings for the guards cannot be had.
inline SharedStacks* map_region(int count, size_t stack_bytes, uint64_t generation) {
  const size_t page = page_size();
  const size_t guard = round_up(16 * 1024, page);  // > GCC's probe interval (4 KiB), in case of a probe-less caller
  const size_t sigstack = round_up(64 * 1024 > SIGSTKSZ ? 64 * 1024 : SIGSTKSZ, page);
  const size_t slot = guard + stack_bytes;
  const size_t bytes = guard + sigstack + page + (size_t)count * slot;
  char* map = (char*)mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (map == MAP_FAILED) {
    g_region_error = "mmap failed";
    return nullptr;
  }
  SharedStacks* s = (SharedStacks*)(map + guard + sigstack);
  *s = SharedStacks{SharedStacks::kMagic, generation, map, bytes, (char*)s + page, guard, stack_bytes, slot,
                    count, false, nullptr, -1};
  bool ok = mprotect(map, guard, PROT_NONE) == 0;
  for (int i = 0; ok && i < count; ++i) ok = mprotect(s->first_slot + (size_t)i * slot, guard, PROT_NONE) == 0;
  if (!ok) {
    g_region_error = "mprotect of a guard page failed: too many memory mappings (each fiber stack needs 2; "
                     "raise vm.max_map_count or use fewer OS threads, FUSER_CPU_THREADS)";
    munmap(map, bytes);
    return nullptr;
  }
  adopt_sigstack(s, map + guard, sigstack);
  return s;
}

// The calling OS thread's region with at least `count` stacks of `stack_bytes`; null if it cannot
// be made. A region too small for this module is replaced by one large enough for every module
// that used it, so modules with different needs do not replace it in turn.
inline SharedStacks* thread_stacks(int64_t key, int count, size_t stack_bytes) {
  if (key < 0) {
    g_region_error = "no pthread key for the stack region";
    return nullptr;
  }
  SharedStacks* s = (SharedStacks*)pthread_getspecific((pthread_key_t)key);
  if (s && s->magic != SharedStacks::kMagic) s = nullptr;  // not ours: leave it alone (ABI checks forbid this)
  if (s && s->count >= count && s->stack_bytes >= stack_bytes) return s;
  uint64_t generation = 1;
  if (s) {
    count = count > s->count ? count : s->count;
    stack_bytes = stack_bytes > s->stack_bytes ? stack_bytes : s->stack_bytes;
    generation = s->generation + 1;
    pthread_setspecific((pthread_key_t)key, nullptr);  // the fault handler must never see it unmapped
    unmap_region(s);
  }
  s = map_region(count, stack_bytes, generation);
  pthread_setspecific((pthread_key_t)key, s);
  return s;
}

// Thread exit: the first module to get here unmaps the region, the others find the key empty.
inline void release_thread_stacks(int64_t key) {
  if (key < 0) return;
  SharedStacks* s = (SharedStacks*)pthread_getspecific((pthread_key_t)key);
  if (!s || s->magic != SharedStacks::kMagic) return;
  pthread_setspecific((pthread_key_t)key, nullptr);
  unmap_region(s);
}

// ---------------------------------------------------------------------------------------------
// Stack overflow: a SIGSEGV in a guard of the faulting thread's region while it runs a block
// jumps back to the block's scheduler (run_block_fibers), which reports the overflow. Any other
// SIGSEGV goes to the handler that was installed before ours, or gets the default action.
// Every module installs this handler once, over the previous one: the chain is linear, and any
// module's handler recognises any module's fibers, since regions are found through the shared key.
// The handler only reads the thread's region (pthread_getspecific takes no lock and allocates
// nothing) and leaves with siglongjmp, so it is async-signal-safe.
// ---------------------------------------------------------------------------------------------
inline void forward_segv(int sig, siginfo_t* info, void* uctx) {
  const struct sigaction& prev = g_previous_segv;
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) return prev.sa_sigaction(sig, info, uctx);
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN)
    return prev.sa_handler(sig);
  // Default action (an ignored SIGSEGV would fault forever): returning re-runs the faulting
  // instruction, which now kills the process as if we had never been installed.
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
}

inline void on_segv(int sig, siginfo_t* info, void* uctx) {
  const int64_t key = __atomic_load_n(&g_region_key, __ATOMIC_RELAXED);
  SharedStacks* s = key >= 0 ? (SharedStacks*)pthread_getspecific((pthread_key_t)key) : nullptr;
  if (s && s->magic == SharedStacks::kMagic && s->recover) {
    const int i = s->guard_of((uintptr_t)info->si_addr);
    if (i >= 0) {
      s->overflowed = i;
      siglongjmp(*s->recover, 1);
    }
  }
  forward_segv(sig, info, uctx);
}

inline bool install_segv_handler() {
  struct sigaction act{};
  act.sa_sigaction = on_segv;
  act.sa_flags = SA_SIGINFO | SA_ONSTACK;  // the overflowed stack cannot take a signal frame
  sigemptyset(&act.sa_mask);
  return sigaction(SIGSEGV, &act, &g_previous_segv) == 0;
}

// The fibers of one OS thread for this module, over the thread's shared stack region.
// Stack tops are staggered by a few cache lines per fiber: with equal offsets every fiber's
// frame would map to the same L1/L2 cache sets, and switching between fibers would thrash them.
struct FiberPool {
  static constexpr size_t kStackBytes = FUSER_FIBER_STACK_BYTES;
  static constexpr size_t kMaxStagger = 32 * 1024;
  static_assert(kStackBytes >= 2 * kMaxStagger && kStackBytes % 4096 == 0, "bad FUSER_FIBER_STACK_BYTES");
  Fiber* fibers = nullptr;
  int capacity = 0;
  int64_t key = -1;                // of the region, for the thread-exit release
  SharedStacks* region = nullptr;  // region the fibers' stacks were laid out in ...
  uint64_t generation = 0;         // ... and its generation (a new region may reuse the address)
  dim3 shape{0, 0, 0};             // block shape the thread indices were computed for

  // Prepares n fibers for blocks of shape bd; false (g_region_error set) if out of memory.
  bool prepare(int64_t shared_key, int n, dim3 bd) {
    static const bool handler_installed = install_segv_handler();
    (void)handler_installed;
    key = region_key(shared_key);
    __atomic_store_n(&g_region_key, key, __ATOMIC_RELAXED);
    SharedStacks* s = thread_stacks(key, n, kStackBytes);
    if (!s) return false;
    if (n > capacity && !grow(n)) return false;
    if (s != region || s->generation != generation) lay_out(s);
    if (bd.x != shape.x || bd.y != shape.y || bd.z != shape.z) {  // indices depend on the shape only
      for (int i = 0; i < n; ++i) {
        fibers[i].index = (uint16_t)i;
        fibers[i].tid = {i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
      }
      shape = bd;
    }
    return true;
  }
  bool grow(int n) {
    free(fibers);
    fibers = (Fiber*)calloc(n, sizeof(Fiber));
    capacity = fibers ? n : 0;
    region = nullptr;  // lay the new fibers out
    shape = dim3(0, 0, 0);
    if (!fibers) g_region_error = "out of memory";
    return fibers != nullptr;
  }
  void lay_out(SharedStacks* s) {  // capacity <= s->count: the region is never smaller than a request
    for (int i = 0; i < capacity; ++i) {
      fibers[i].stack_lo = s->stack_lo(i);
      fibers[i].stack_size = s->stack_bytes - (size_t)(i * 5 % 512) * 64;
    }
    region = s;
    generation = s->generation;
  }
  ~FiberPool() {
    free(fibers);
    release_thread_stacks(key);
  }
};

static thread_local FiberPool tls_pool;

// Makes `to` the running fiber. threadIdx is per OS thread, so it is rewritten on every resume.
inline void resume(Block* b, Context* from, Fiber* to) {
  b->current = to;
  threadIdx = to->tid;
  ctx_switch(from, &to->ctx);
}

// Blocks fiber f: continue with the next runnable fiber after it, or end the scheduler's pass.
inline void yield_from(Block* b, Fiber* f) {
  for (int i = f->index + 1; i < b->n; ++i) {
    Fiber* g = &b->fibers[i];
    if (g->state == kRunnable) {
      resume(b, &f->ctx, g);
      return;
    }
  }
  ctx_switch(&f->ctx, &b->sched);
}

// Abandons the block from inside a fiber; its stacks are re-initialised by the next block.
[[noreturn]] inline void fail_block(Block* b, Fiber* f) {
  b->failed = true;
  ctx_switch(&f->ctx, &b->sched);
  __builtin_unreachable();
}

// Releases a complete __syncthreads(): all live threads wait on it. `self` is the caller.
inline void release_barrier(Block* b, Fiber* self) {
  if (b->other_line >= 0) {
    report(kBarrierDivergence,
           "barrier divergence: threads wait at __syncthreads() on line %d and on line %d "
           "(undefined behaviour in CUDA; it would hang or corrupt on a GPU)",
           b->barrier_line, b->other_line);
    fail_block(b, self);
  }
  // Result for __syncthreads_count/and/or: threads with pred != 0, and threads that arrived.
  const uint64_t out = (uint64_t)b->barrier_pred | (uint64_t)b->at_barrier << 32;
  for (int i = 0; i < b->n; ++i) {
    Fiber* g = &b->fibers[i];
    if (g->state == kAtBarrier) {
      g->state = kRunnable;
      g->out = out;
    }
  }
  b->at_barrier = b->barrier_pred = 0;
  b->other_line = -1;
}

// __syncthreads() and its _count/_and/_or forms. Returns (threads with pred != 0) in the low
// and (threads that took part) in the high 32 bits.
inline uint64_t sync_block(int line, int pred) {
  Block* b = tls_block;
  if (!b) {
    report(kSyncInLoopMode,
           "__syncthreads() on line %d in a launch with needs_sync=false (launch it with fibers)", line);
    return (uint64_t)(pred != 0) | (uint64_t)1 << 32;
  }
  Fiber* f = b->current;
  if (b->at_barrier == 0)
    b->barrier_line = line;
  else if (line != b->barrier_line)
    b->other_line = line;
  f->state = kAtBarrier;
  f->line = line;
  b->barrier_pred += pred != 0;
  if (++b->at_barrier == b->live)
    release_barrier(b, f);
  else
    yield_from(b, f);
  return f->out;
}

// Source lane of a shfl.sync, following the PTX ISA definition (c = clamp | segmask << 8).
inline int shfl_source(int op, int lane, int b, int c) {
  int segmask = (c >> 8) & 31, cval = c & 31;
  int max_lane = (lane & segmask) | (cval & ~segmask);
  int min_lane = lane & segmask;
  b &= 31;
  int j;
  bool ok;
  switch (op) {
    case kShflUp: j = lane - b; ok = j >= max_lane; break;
    case kShflDown: j = lane + b; ok = j <= max_lane; break;
    case kShflXor: j = lane ^ b; ok = j <= max_lane; break;
    default: j = min_lane | (b & ~segmask); ok = j <= max_lane; break;
  }
  return ok ? j : lane;
}

// Completes the warp operation of `leader` if every live lane of its mask is waiting.
inline bool warp_try_release(Block* b, int w, Fiber* leader) {
  Warp& W = b->warps[w];
  unsigned group = leader->mask & W.live;
  if (group & ~W.waiting) return false;
  Fiber* lanes = b->fibers + w * 32;
  unsigned ballot = 0;
  for (unsigned g = group; g; g &= g - 1) {
    Fiber* f = &lanes[__builtin_ctz(g)];
    if (f->mask != leader->mask) {
      report(kWarpMaskMismatch, "warp %d: lanes %d and %d meet in warp operations with masks 0x%08x and 0x%08x",
             w, leader->index & 31, f->index & 31, leader->mask, f->mask);
      fail_block(b, b->current);
    }
    ballot |= (unsigned)(f->in != 0) << (f->index & 31);
  }
  for (unsigned g = group; g; g &= g - 1) {
    Fiber* f = &lanes[__builtin_ctz(g)];
    if (f->op == kVote) {
      f->out = ballot | (uint64_t)group << 32;
    } else if (f->op != kSyncWarp) {
      int src = shfl_source(f->op, f->index & 31, f->b, f->c);
      f->out = (group >> src & 1) ? lanes[src].in : f->in;  // inactive source: undefined, keep own
    }
    f->state = kRunnable;
  }
  W.waiting &= ~group;
  return true;
}

// Shuffle, vote or __syncwarp: blocks until all live lanes of `mask` arrive.
inline uint64_t warp_op(uint8_t op, unsigned mask, uint64_t in, int b_operand, int c_operand) {
  Block* b = tls_block;
  if (!b) {
    report(kSyncInLoopMode, "warp shuffle/vote/__syncwarp in a launch with needs_sync=false");
    return op == kVote ? ((uint64_t)(in != 0) | (uint64_t)1 << 32) : in;
  }
  Fiber* f = b->current;
  int w = f->index >> 5, lane = f->index & 31;
  if (!(mask >> lane & 1)) {
    report(kWarpMaskMismatch, "thread (%u,%u,%u): warp operation with mask 0x%08x excludes its own lane %d",
           f->tid.x, f->tid.y, f->tid.z, mask, lane);
    fail_block(b, f);
  }
  f->op = op;
  f->mask = mask;
  f->in = in;
  f->b = b_operand;
  f->c = c_operand;
  f->state = kAtWarp;
  b->warps[w].waiting |= 1u << lane;
  if (!warp_try_release(b, w, f)) yield_from(b, f);
  return f->out;
}

// A returning thread no longer counts toward barriers or warp masks, which may release others.
[[noreturn]] inline void thread_exit(Block* b, Fiber* f) {
  f->state = kDone;
  --b->live;
  int w = f->index >> 5;
  Warp& W = b->warps[w];
  W.live &= ~(1u << (f->index & 31));
  if (b->at_barrier > 0 && b->at_barrier == b->live) release_barrier(b, f);
  for (unsigned pending = W.waiting; pending;) {
    Fiber* leader = &b->fibers[w * 32 + __builtin_ctz(pending)];
    pending &= ~(leader->mask | (1u << (leader->index & 31)));
    warp_try_release(b, w, leader);
  }
  yield_from(b, f);
  __builtin_unreachable();
}

inline void fiber_main(Fiber* f) {
  Block* b = tls_block;
  b->body(b->body_ctx);
  thread_exit(b, f);
}

__attribute__((cold)) inline void report_deadlock(Block* b) {
  int at_barrier = 0, at_warp = 0, line = -1;
  const Fiber* warp_waiter = nullptr;
  for (int i = 0; i < b->n; ++i) {
    const Fiber* f = &b->fibers[i];
    if (f->state == kAtBarrier) ++at_barrier, line = f->line;
    if (f->state == kAtWarp && !warp_waiter) warp_waiter = f;
    at_warp += f->state == kAtWarp;
  }
  if (warp_waiter)
    report(kDeadlock,
           "deadlock: %d threads wait at __syncthreads() (line %d), %d wait in warp operations (first: "
           "thread (%u,%u,%u), mask 0x%08x); none can proceed",
           at_barrier, line, at_warp, warp_waiter->tid.x, warp_waiter->tid.y, warp_waiter->tid.z,
           warp_waiter->mask);
  else
    report(kDeadlock, "deadlock: %d threads wait at __syncthreads() (line %d); none can proceed", at_barrier,
           line);
}

// Runs the fibers of b until every one has returned or is blocked, or the block failed. Not
// inlined: a stack overflow leaves it through the fault handler's siglongjmp, so nothing of
// run_block_fibers may live in registers across it.
__attribute__((noinline)) inline void schedule_block(Block* b) {
  // Each pass resumes the first runnable fiber; control comes back here when a fiber blocks
  // with no runnable fiber after it, or the block fails.
  for (;;) {
    Fiber* next = nullptr;
    for (int i = 0; i < b->n && !next; ++i)
      if (b->fibers[i].state == kRunnable) next = &b->fibers[i];
    if (!next) break;
    resume(b, &b->sched, next);
    if (b->failed) break;
  }
}

// After the fault handler jumped out of an overflowed fiber: the handler ran with SIGSEGV blocked
// and siglongjmp (sigsetjmp(.., 0): no syscall per block) does not restore the mask, so unblock
// it, or the next fault would kill the process.
__attribute__((cold)) inline void report_overflow(Block* b, const SharedStacks* s) {
  sigset_t segv;
  sigemptyset(&segv);
  sigaddset(&segv, SIGSEGV);
  pthread_sigmask(SIG_UNBLOCK, &segv, nullptr);
  const int i = s->overflowed;
  const uint3 t = i >= 0 && i < b->n ? b->fibers[i].tid : uint3{0, 0, 0};
  report(kStackOverflow,
         "thread (%u,%u,%u) used all of its %zu-byte fiber stack (large local arrays or deep recursion; "
         "raise it with the C++ flag -DFUSER_FIBER_STACK_BYTES=<bytes>, e.g. "
         "CpuBackend(extra_flags=['-DFUSER_FIBER_STACK_BYTES=%zu']))",
         t.x, t.y, t.z, s->stack_bytes, 4 * s->stack_bytes);
  b->failed = true;
}

// Runs one block with a fiber per thread; false if the block failed.
inline bool run_block_fibers(void (*body)(void*), void* body_ctx) {
  const int n = (int)(blockDim.x * blockDim.y * blockDim.z);
  if (!tls_pool.prepare(tls_launch->stack_key, n, blockDim)) {
    report(kOutOfMemory, "cannot allocate %d fiber stacks: %s", n, g_region_error);
    return false;
  }
  SharedStacks* const stacks = tls_pool.region;
  Block b;
  b.fibers = tls_pool.fibers;
  b.n = b.live = n;
  b.at_barrier = b.barrier_pred = 0;
  b.barrier_line = b.other_line = -1;
  b.failed = false;
  b.body = body;
  b.body_ctx = body_ctx;
  for (int w = 0; w < 32; ++w) {
    int lanes = n - 32 * w;
    b.warps[w].live = lanes >= 32 ? ~0u : lanes > 0 ? (1u << lanes) - 1 : 0u;
    b.warps[w].waiting = 0;
  }
  for (int i = 0; i < n; ++i) {
    Fiber* f = &b.fibers[i];
    f->state = kRunnable;
    ctx_init(&f->ctx, f->stack_lo, f->stack_size, fiber_main, f);
  }
  tls_block = &b;
  sigjmp_buf recover;
  if (sigsetjmp(recover, 0) == 0) {
    stacks->recover = &recover;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);  // armed before any fiber runs
    schedule_block(&b);
  } else {
    report_overflow(&b, stacks);
  }
  stacks->recover = nullptr;
  if (!b.failed && b.live > 0) {
    report_deadlock(&b);
    b.failed = true;
  }
  tls_block = nullptr;
  return !b.failed;
}

template <class Body>
__forceinline__ void run_block_loop(Body& body) {
  const dim3 bd = blockDim;
  for (unsigned z = 0; z < bd.z; ++z)
    for (unsigned y = 0; y < bd.y; ++y)
      for (unsigned x = 0; x < bd.x; ++x) {
        threadIdx = {x, y, z};
        body();
      }
}

// ---------------------------------------------------------------------------------------------
// Memcheck (-DFUSER_MEMCHECK): fuser_ld*/fuser_st* call check_access before touching memory.
// ---------------------------------------------------------------------------------------------
#if defined(FUSER_MEMCHECK)
// Loop mode runs a block on the OS thread's own stack: a violation jumps back to the block's start.
static thread_local jmp_buf* tls_loop_abort;

// Ends the current thread's block without performing the bad access (as a GPU kernel dies on it).
[[noreturn]] inline void abort_block() {
  if (tls_block) fail_block(tls_block, tls_block->current);
  longjmp(*tls_loop_abort, 1);
}

// The region an access through `p` belongs to: the parameter whose address p is (what generated
// code always passes), else one containing p, its one-past-the-end included (a pointer the kernel
// derived); -1: none.
inline int region_of(const LaunchState* st, uint64_t p) {
  for (uint32_t i = 0; i < st->num_regions; ++i)
    if (st->regions[i].base == p) return (int)i;
  for (uint32_t i = 0; i < st->num_regions; ++i)
    if (p - st->regions[i].base <= st->regions[i].bytes) return (int)i;
  return -1;
}

__attribute__((cold, noinline)) inline void report_out_of_bounds(uint64_t p, long long idx, unsigned elem_bytes,
                                                                  int n, const char* what, int r) {
  LaunchState* st = tls_launch;
  const unsigned bytes = elem_bytes * (unsigned)n;
  if (r < 0) {
    if (report(kOutOfBounds, "thread (%u,%u,%u): %s of %u bytes at %p + %lld elements: the pointer lies in no "
               "pointer parameter", threadIdx.x, threadIdx.y, threadIdx.z, what, bytes, (void*)p, idx))
      st->stats->bad_region = -1, st->stats->bad_index = idx, st->stats->bad_extent = 0;
    return;
  }
  const fuser_mem_region& reg = st->regions[r];
  // Index and extent in elements of the access's type, counted from the parameter's base.
  const long long index = (long long)((__int128)(p - reg.base) / elem_bytes + idx);
  const unsigned long long extent = reg.bytes / elem_bytes;
  if (report(kOutOfBounds, "thread (%u,%u,%u): out-of-bounds %s of %u bytes: %s[%lld]%s, but %s has %llu elements "
             "(%llu bytes)", threadIdx.x, threadIdx.y, threadIdx.z, what, bytes, reg.name, index,
             n > 1 ? " (vector)" : "", reg.name, extent, (unsigned long long)reg.bytes))
    st->stats->bad_region = r, st->stats->bad_index = index, st->stats->bad_extent = extent;
}

// Checks that elements [idx, idx+n) of ptr lie inside the parameter ptr came from.
template <class T, class I>
__forceinline__ void check_access(const T* ptr, I idx, int n, const char* what) {
  const LaunchState* st = tls_launch;
  const uint64_t p = (uint64_t)ptr;
  const int r = region_of(st, p);
  if (r >= 0) {
    const __int128 lo = (__int128)(p - st->regions[r].base) + (__int128)(long long)idx * (__int128)sizeof(T);
    if (__builtin_expect(lo >= 0 && lo + (__int128)(sizeof(T) * n) <= (__int128)st->regions[r].bytes, 1)) return;
  }
  report_out_of_bounds(p, (long long)idx, sizeof(T), n, what, r);
  abort_block();
}
#endif

// ---------------------------------------------------------------------------------------------
// Dynamic shared memory (FUSER_DYNAMIC_SHARED): one buffer per OS thread, refilled with 0xff
// before every block so that reads before writes produce NaN / -1 rather than stale data.
// ---------------------------------------------------------------------------------------------
struct DynamicSmem {
  unsigned char* data = nullptr;
  uint64_t capacity = 0, size = 0;
  ~DynamicSmem() { free(data); }
};
static thread_local DynamicSmem tls_dyn_smem;

inline void* dynamic_smem() { return tls_dyn_smem.data; }

inline bool dynamic_smem_begin(uint64_t bytes) {
  DynamicSmem& d = tls_dyn_smem;
  d.size = 0;
  if (bytes > d.capacity) {
    free(d.data);
    d.data = (unsigned char*)aligned_alloc(64, (bytes + 63) & ~(uint64_t)63);
    d.capacity = d.data ? bytes : 0;
    if (!d.data) return false;
  }
  d.size = bytes;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Grid execution.
// ---------------------------------------------------------------------------------------------
inline int validate(const fuser_launch_config* cfg, LaunchState* st) {
  const uint32_t* g = cfg->grid;
  const uint32_t* k = cfg->block;
  uint64_t threads = (uint64_t)k[0] * k[1] * k[2];
  const char* why = nullptr;
  if (!g[0] || !g[1] || !g[2] || !k[0] || !k[1] || !k[2]) why = "a grid or block dimension is 0";
  else if (threads > 1024) why = "more than 1024 threads per block";
  else if (k[2] > 64) why = "block.z > 64";
  else if (g[0] > 0x7fffffffu || g[1] > 65535 || g[2] > 65535) why = "grid exceeds (2^31-1, 65535, 65535)";
  if (!why) return kOk;
  tls_launch = st;
  report_launch(kBadConfig, "invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u): %s", g[0], g[1], g[2],
         k[0], k[1], k[2], why);
  tls_launch = nullptr;
  return kBadConfig;
}

// Per OS thread: join the launch, then hand the byte counts back.
inline void worker_begin(LaunchState* st, const fuser_launch_config* cfg) {
  tls_launch = st;
  tls_counters = {0, 0};
  blockDim = dim3(cfg->block[0], cfg->block[1], cfg->block[2]);
  gridDim = dim3(cfg->grid[0], cfg->grid[1], cfg->grid[2]);
  if (!dynamic_smem_begin(cfg->dynamic_smem_bytes))
    report_launch(kOutOfMemory, "cannot allocate %llu bytes of dynamic shared memory",
                  (unsigned long long)cfg->dynamic_smem_bytes);
}
inline void worker_end(LaunchState* st) {
  __atomic_fetch_add(&st->bytes_loaded, tls_counters.loaded, __ATOMIC_RELAXED);
  __atomic_fetch_add(&st->bytes_stored, tls_counters.stored, __ATOMIC_RELAXED);
  tls_launch = nullptr;
}

// What a kernel contributes to a launch: one thread's body, or a whole block as a loop over its
// threads (the kernel inlined into the loop). Everything else is compiled once per module rather
// than once per kernel, which keeps the compile time per kernel low.
struct KernelBody {
  void (*thread)(void* ctx);
  void (*loop_block)(void* ctx);
  void* ctx;
};

inline void run_block_as_loop(const KernelBody& body) {
#if defined(FUSER_MEMCHECK)
  jmp_buf recover;  // a memcheck violation in this block continues here (see abort_block)
  tls_loop_abort = &recover;
  if (setjmp(recover) != 0) return;
#endif
  body.loop_block(body.ctx);
}

inline int run_grid(const char* kernel, const fuser_launch_config* cfg, fuser_launch_stats* stats,
                    const KernelBody& body) {
  *stats = {};
  stats->bad_region = -1;
  LaunchState st{kernel, cfg->stack_key, cfg->regions, cfg->num_regions, stats, 0, 0, 0};
  if (int e = validate(cfg, &st)) return stats->error_code = e;
  const uint64_t gx = cfg->grid[0], gy = cfg->grid[1];
  const long long nblocks = (long long)(gx * gy * cfg->grid[2]);
  int nthreads = cfg->num_threads > 0 ? cfg->num_threads : omp_get_max_threads();
  if (nthreads > nblocks) nthreads = (int)nblocks;
  // Dynamic scheduling balances blocks of uneven cost; chunks keep the dispatch cost negligible.
  const long long chunk = nblocks / (16LL * nthreads) > 0 ? nblocks / (16LL * nthreads) : 1;
  const bool fibers = cfg->needs_sync != 0;
#pragma omp parallel num_threads(nthreads)
  {
    worker_begin(&st, cfg);
#pragma omp for schedule(dynamic, chunk)
    for (long long i = 0; i < nblocks; ++i) {
      if (launch_failed(&st)) continue;
      blockIdx = {(unsigned)(i % gx), (unsigned)((i / gx) % gy), (unsigned)(i / (gx * gy))};
      if (tls_dyn_smem.size) memset(tls_dyn_smem.data, 0xff, tls_dyn_smem.size);
      if (fibers)
        run_block_fibers(body.thread, body.ctx);
      else
        run_block_as_loop(body);
    }
    worker_end(&st);
  }
  stats->bytes_loaded = st.bytes_loaded;
  stats->bytes_stored = st.bytes_stored;
  stats->error_code = __atomic_load_n(&st.error, __ATOMIC_ACQUIRE);
  return stats->error_code;
}

// Unpacks cuLaunchKernel-style arguments (args[i] points at the i-th parameter's value) by the
// kernel's own parameter types, copying them once per launch.
template <auto Kernel, class... P, size_t... I>
int launch_unpacked(std::index_sequence<I...>, const char* name, const fuser_launch_config* cfg, void** args,
                    fuser_launch_stats* stats) {
  (void)args;
  auto call = [... a = *static_cast<std::remove_cvref_t<P>*>(args[I])]() __attribute__((always_inline)) {
    Kernel(a...);
  };
  using Call = decltype(call);
  const KernelBody body{[](void* c) { (*static_cast<Call*>(c))(); },
                        [](void* c) { run_block_loop(*static_cast<Call*>(c)); }, &call};
  return run_grid(name, cfg, stats, body);
}

template <auto Kernel, class... P>
int launch(void (*)(P...), const char* name, const fuser_launch_config* cfg, void** args,
           fuser_launch_stats* stats) {
  return launch_unpacked<Kernel, P...>(std::index_sequence_for<P...>{}, name, cfg, args, stats);
}

// ---------------------------------------------------------------------------------------------
// Kernel signatures for argument checking in Python: three characters per parameter,
//   [-|p|P] kind size   ('-' value, 'p' pointer, 'P' pointer to const)
//   kind: f float, i signed int, u unsigned int, ? bool, h __half, b __nv_bfloat16, v void, x other
//   size: sizeof the (pointed-to) type as one digit 1-9, or 'x'.
// ---------------------------------------------------------------------------------------------
template <class T>
constexpr char type_kind();

template <class T>
constexpr void describe_param(char* out) {
  using V = std::remove_cv_t<T>;
  using E = std::remove_cv_t<std::remove_pointer_t<V>>;
  constexpr bool ptr = std::is_pointer_v<V>;
  using S = std::conditional_t<ptr, E, V>;
  out[0] = !ptr ? '-' : std::is_const_v<std::remove_pointer_t<V>> ? 'P' : 'p';
  out[1] = type_kind<S>();
  if constexpr (std::is_void_v<S>)
    out[2] = '0';
  else
    out[2] = sizeof(S) <= 9 ? (char)('0' + sizeof(S)) : 'x';
}

template <class... P>
struct Signature {
  static constexpr auto text = [] {
    struct {
      char s[3 * sizeof...(P) + 1];
    } r{};
    int i = 0;
    ((describe_param<P>(r.s + 3 * i), ++i), ...);
    return r;
  }();
};

template <class... P>
const char* signature_of(void (*)(P...)) {
  return Signature<P...>::text.s;
}

}  // namespace fuser_emu

// ---------------------------------------------------------------------------------------------
// Synchronisation and warp intrinsics.
// ---------------------------------------------------------------------------------------------
#define __syncthreads() ((void)::fuser_emu::sync_block(__LINE__, 0))
#define __syncthreads_count(pred) ((int)(uint32_t)::fuser_emu::sync_block(__LINE__, (pred)))
#define __syncthreads_and(pred) ((int)::fuser_emu::all_of(::fuser_emu::sync_block(__LINE__, (pred))))
#define __syncthreads_or(pred) ((int)((uint32_t)::fuser_emu::sync_block(__LINE__, (pred)) != 0))

namespace fuser_emu {
inline bool all_of(uint64_t r) { return (uint32_t)r == (uint32_t)(r >> 32); }

template <class T>
inline T shfl(uint8_t op, unsigned mask, T var, int b, int c) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a type wider than 8 bytes");
  uint64_t bits = 0;
  memcpy(&bits, &var, sizeof(T));
  bits = warp_op(op, mask, bits, b, c);
  T r;
  memcpy(&r, &bits, sizeof(T));
  return r;
}
}  // namespace fuser_emu

inline void __syncwarp(unsigned mask = 0xffffffffu) { ::fuser_emu::warp_op(::fuser_emu::kSyncWarp, mask, 0, 0, 0); }

// width must be a power of two <= 32, as in CUDA; c encodes it like the CUDA headers do.
template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  return ::fuser_emu::shfl(::fuser_emu::kShflIdx, mask, var, src_lane, ((warpSize - width) << 8) | 31);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::fuser_emu::shfl(::fuser_emu::kShflUp, mask, var, (int)delta, (warpSize - width) << 8);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::fuser_emu::shfl(::fuser_emu::kShflDown, mask, var, (int)delta, ((warpSize - width) << 8) | 31);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  return ::fuser_emu::shfl(::fuser_emu::kShflXor, mask, var, lane_mask, ((warpSize - width) << 8) | 31);
}

inline unsigned __ballot_sync(unsigned mask, int pred) {
  return (unsigned)::fuser_emu::warp_op(::fuser_emu::kVote, mask, pred != 0, 0, 0);
}
inline int __all_sync(unsigned mask, int pred) {
  uint64_t r = ::fuser_emu::warp_op(::fuser_emu::kVote, mask, pred != 0, 0, 0);
  return (unsigned)r == (unsigned)(r >> 32);
}
inline int __any_sync(unsigned mask, int pred) {
  return (unsigned)::fuser_emu::warp_op(::fuser_emu::kVote, mask, pred != 0, 0, 0) != 0;
}

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// ---------------------------------------------------------------------------------------------
// Atomics: relaxed, like CUDA's; return the old value.
// ---------------------------------------------------------------------------------------------
namespace fuser_emu {
template <class T, class F>
inline T atomic_update(T* p, F f) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, f(old), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T>
inline T atomic_add_float(T* p, T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  U old = __atomic_load_n((U*)p, __ATOMIC_RELAXED);
  for (;;) {
    U next = __builtin_bit_cast(U, __builtin_bit_cast(T, old) + v);
    if (__atomic_compare_exchange_n((U*)p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      return __builtin_bit_cast(T, old);
  }
}
}  // namespace fuser_emu

// Exactly CUDA's overload set, so that code compiling here also compiles for the GPU.
#define FUSER_EMU_ATOMIC(name, T, expr)                                                       \
  inline T name(T* p, T v) { return expr; }
#define FUSER_EMU_ATOMIC_RMW(T)                                                               \
  FUSER_EMU_ATOMIC(atomicAdd, T, __atomic_fetch_add(p, v, __ATOMIC_RELAXED))                  \
  FUSER_EMU_ATOMIC(atomicExch, T, __atomic_exchange_n(p, v, __ATOMIC_RELAXED))                \
  FUSER_EMU_ATOMIC(atomicAnd, T, __atomic_fetch_and(p, v, __ATOMIC_RELAXED))                  \
  FUSER_EMU_ATOMIC(atomicOr, T, __atomic_fetch_or(p, v, __ATOMIC_RELAXED))                    \
  FUSER_EMU_ATOMIC(atomicXor, T, __atomic_fetch_xor(p, v, __ATOMIC_RELAXED))                  \
  inline T atomicCAS(T* p, T expected, T desired) {                                           \
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return expected;                                                                          \
  }
#define FUSER_EMU_ATOMIC_MINMAX(T)                                                            \
  FUSER_EMU_ATOMIC(atomicMax, T, ::fuser_emu::atomic_update(p, [v](T o) { return o < v ? v : o; })) \
  FUSER_EMU_ATOMIC(atomicMin, T, ::fuser_emu::atomic_update(p, [v](T o) { return v < o ? v : o; }))
FUSER_EMU_ATOMIC_RMW(int)
FUSER_EMU_ATOMIC_RMW(unsigned int)
FUSER_EMU_ATOMIC_RMW(unsigned long long)
FUSER_EMU_ATOMIC_MINMAX(int)
FUSER_EMU_ATOMIC_MINMAX(unsigned int)
FUSER_EMU_ATOMIC_MINMAX(long long)
FUSER_EMU_ATOMIC_MINMAX(unsigned long long)
FUSER_EMU_ATOMIC(atomicSub, int, __atomic_fetch_sub(p, v, __ATOMIC_RELAXED))
FUSER_EMU_ATOMIC(atomicSub, unsigned int, __atomic_fetch_sub(p, v, __ATOMIC_RELAXED))
#undef FUSER_EMU_ATOMIC_MINMAX
#undef FUSER_EMU_ATOMIC_RMW
#undef FUSER_EMU_ATOMIC

inline float atomicAdd(float* p, float v) { return ::fuser_emu::atomic_add_float(p, v); }
inline double atomicAdd(double* p, double v) { return ::fuser_emu::atomic_add_float(p, v); }
inline float atomicExch(float* p, float v) {
  return __builtin_bit_cast(float, atomicExch((unsigned*)p, __builtin_bit_cast(unsigned, v)));
}

// ---------------------------------------------------------------------------------------------
// Bit casts and integer intrinsics.
// ---------------------------------------------------------------------------------------------
inline float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
inline int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
inline float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
inline unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
inline double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
inline long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }

// ---------------------------------------------------------------------------------------------
// Math: CUDA device code gets float overloads of the <math.h> names, fast intrinsics, min/max.
// ---------------------------------------------------------------------------------------------
#if !defined(_GLIBCXX_CMATH)  // with <cmath>, `using std::f` already provides these overloads
#define FUSER_EMU_UNARY(fn)                                                                   \
  inline float fn(float x) { return fn##f(x); }                                               \
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>                        \
  inline double fn(I x) { return fn((double)x); }
FUSER_EMU_UNARY(acos) FUSER_EMU_UNARY(acosh) FUSER_EMU_UNARY(asin) FUSER_EMU_UNARY(asinh)
FUSER_EMU_UNARY(atan) FUSER_EMU_UNARY(atanh) FUSER_EMU_UNARY(cbrt) FUSER_EMU_UNARY(ceil)
FUSER_EMU_UNARY(cos) FUSER_EMU_UNARY(cosh) FUSER_EMU_UNARY(erf) FUSER_EMU_UNARY(erfc)
FUSER_EMU_UNARY(exp) FUSER_EMU_UNARY(exp2) FUSER_EMU_UNARY(expm1) FUSER_EMU_UNARY(fabs)
FUSER_EMU_UNARY(floor) FUSER_EMU_UNARY(lgamma) FUSER_EMU_UNARY(log) FUSER_EMU_UNARY(log10)
FUSER_EMU_UNARY(log1p) FUSER_EMU_UNARY(log2) FUSER_EMU_UNARY(logb) FUSER_EMU_UNARY(nearbyint)
FUSER_EMU_UNARY(rint) FUSER_EMU_UNARY(round) FUSER_EMU_UNARY(sin) FUSER_EMU_UNARY(sinh)
FUSER_EMU_UNARY(sqrt) FUSER_EMU_UNARY(tan) FUSER_EMU_UNARY(tanh) FUSER_EMU_UNARY(tgamma)
FUSER_EMU_UNARY(trunc)
#undef FUSER_EMU_UNARY
#define FUSER_EMU_BINARY(fn) \
  inline float fn(float x, float y) { return fn##f(x, y); }
FUSER_EMU_BINARY(atan2) FUSER_EMU_BINARY(copysign) FUSER_EMU_BINARY(fdim) FUSER_EMU_BINARY(fmax)
FUSER_EMU_BINARY(fmin) FUSER_EMU_BINARY(fmod) FUSER_EMU_BINARY(hypot) FUSER_EMU_BINARY(pow)
FUSER_EMU_BINARY(remainder) FUSER_EMU_BINARY(nextafter)
#undef FUSER_EMU_BINARY
inline float fma(float x, float y, float z) { return fmaf(x, y, z); }
inline float ldexp(float x, int e) { return ldexpf(x, e); }
inline float frexp(float x, int* e) { return frexpf(x, e); }
inline float abs(float x) { return fabsf(x); }
inline double abs(double x) { return fabs(x); }
inline long abs(long x) { return x < 0 ? -x : x; }
inline long long abs(long long x) { return x < 0 ? -x : x; }
#endif

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline double rcbrt(double x) { return 1.0 / cbrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline float __int2float_rn(int x) { return (float)x; }

// CUDA's device max/min: the usual arithmetic conversions, NaN-ignoring for floating point.
template <class A, class B>
inline auto max(A a, B b) -> decltype(a + b) {
  using R = decltype(a + b);
  if constexpr (std::is_floating_point_v<R>)
    return fmax((R)a, (R)b);
  else
    return (R)a < (R)b ? (R)b : (R)a;
}
template <class A, class B>
inline auto min(A a, B b) -> decltype(a + b) {
  using R = decltype(a + b);
  if constexpr (std::is_floating_point_v<R>)
    return fmin((R)a, (R)b);
  else
    return (R)b < (R)a ? (R)b : (R)a;
}

// ---------------------------------------------------------------------------------------------
// __half and __nv_bfloat16: storage plus correctly rounded (round-to-nearest-even) conversions.
// NaN converts to the canonical 0x7fff like the CUDA headers.
// ---------------------------------------------------------------------------------------------
namespace fuser_emu {
inline unsigned short float_to_half_bits(float f) {
  uint32_t x = __builtin_bit_cast(uint32_t, f);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fff;
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {                                          // below 2^-14: subnormal
    uint32_t e = ax >> 23;
    if (e < 102) return (unsigned short)sign;  // below 2^-25 (ties at 2^-25 go to even 0)
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    q += rem > halfway || (rem == halfway && (q & 1));
    return (unsigned short)(sign | q);
  }
  uint32_t h = (ax >> 13) - (112u << 10), rem = ax & 0x1fffu;
  h += rem > 0x1000u || (rem == 0x1000u && (h & 1));
  return (unsigned short)(sign | h);
}
inline float half_bits_to_float(unsigned short h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return __builtin_bit_cast(float, sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
  }
  return __builtin_bit_cast(float, sign | ((e + 112u) << 23) | (m << 13));
}
inline unsigned short float_to_bf16_bits(float f) {
  uint32_t x = __builtin_bit_cast(uint32_t, f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_bits_to_float(unsigned short b) { return __builtin_bit_cast(float, (uint32_t)b << 16); }
}  // namespace fuser_emu

// Arithmetic on the 16-bit types rounds each result back, as the GPU's half instructions do
// (float has enough precision that rounding twice is exact for + - * /).
#define FUSER_EMU_HALF_TYPE(T, TO_BITS, TO_FLOAT)                                                     \
  struct T {                                                                                          \
    unsigned short __x;                                                                               \
    T() = default;                                                                                    \
    T(float f) : __x(::fuser_emu::TO_BITS(f)) {}                                                      \
    operator float() const { return ::fuser_emu::TO_FLOAT(__x); }                                     \
    static T from_bits(unsigned short b) {                                                            \
      T r;                                                                                            \
      r.__x = b;                                                                                      \
      return r;                                                                                       \
    }                                                                                                 \
  };                                                                                                  \
  inline T operator+(T a, T b) { return T((float)a + (float)b); }                                     \
  inline T operator-(T a, T b) { return T((float)a - (float)b); }                                     \
  inline T operator*(T a, T b) { return T((float)a * (float)b); }                                     \
  inline T operator/(T a, T b) { return T((float)a / (float)b); }                                     \
  inline T operator-(T a) { return T::from_bits((unsigned short)(a.__x ^ 0x8000u)); }                 \
  inline T& operator+=(T& a, T b) { return a = a + b; }                                               \
  inline T& operator-=(T& a, T b) { return a = a - b; }                                               \
  inline T& operator*=(T& a, T b) { return a = a * b; }                                               \
  inline T& operator/=(T& a, T b) { return a = a / b; }                                               \
  inline bool operator==(T a, T b) { return (float)a == (float)b; }                                   \
  inline bool operator!=(T a, T b) { return (float)a != (float)b; }                                   \
  inline bool operator<(T a, T b) { return (float)a < (float)b; }                                     \
  inline bool operator<=(T a, T b) { return (float)a <= (float)b; }                                   \
  inline bool operator>(T a, T b) { return (float)a > (float)b; }                                     \
  inline bool operator>=(T a, T b) { return (float)a >= (float)b; }
FUSER_EMU_HALF_TYPE(__half, float_to_half_bits, half_bits_to_float)
FUSER_EMU_HALF_TYPE(__nv_bfloat16, float_to_bf16_bits, bf16_bits_to_float)
#undef FUSER_EMU_HALF_TYPE

inline float __half2float(__half h) { return (float)h; }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short b) { return __half::from_bits(b); }
inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { return __nv_bfloat16::from_bits(b); }

#define FUSER_EMU_HALF_OPS(T)                                                                         \
  inline T __hadd(T a, T b) { return a + b; }                                                         \
  inline T __hsub(T a, T b) { return a - b; }                                                         \
  inline T __hmul(T a, T b) { return a * b; }                                                         \
  inline T __hdiv(T a, T b) { return a / b; }                                                         \
  inline T __hneg(T a) { return -a; }                                                                 \
  inline T __hfma(T a, T b, T c) { return T(fmaf((float)a, (float)b, (float)c)); }                    \
  inline T __habs(T a) { return T::from_bits((unsigned short)(a.__x & 0x7fffu)); }                    \
  inline T __hmax(T a, T b) { return T(fmaxf((float)a, (float)b)); }                                  \
  inline T __hmin(T a, T b) { return T(fminf((float)a, (float)b)); }
FUSER_EMU_HALF_OPS(__half)
FUSER_EMU_HALF_OPS(__nv_bfloat16)
#undef FUSER_EMU_HALF_OPS

namespace fuser_emu {
template <class T>
constexpr char type_kind() {
  if constexpr (std::is_same_v<T, __half>) return 'h';
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 'b';
  else if constexpr (std::is_same_v<T, bool>) return '?';
  else if constexpr (std::is_floating_point_v<T>) return 'f';
  else if constexpr (std::is_integral_v<T>) return std::is_signed_v<T> ? 'i' : 'u';
  else if constexpr (std::is_void_v<T>) return 'v';
  else return 'x';
}
}  // namespace fuser_emu

// ---------------------------------------------------------------------------------------------
// Host launcher: FUSER_HOST_LAUNCHER(k) after `extern "C" __global__ void k(...)` exports
//   int k__launch(const fuser_launch_config*, void** args, fuser_launch_stats*)
//   const char* k__signature(void)
// ---------------------------------------------------------------------------------------------
#define FUSER_HOST_LAUNCHER(name)                                                                   \
  extern "C" FUSER_EXPORT int name##__launch(const fuser_launch_config* cfg, void** args,          \
                                              fuser_launch_stats* stats) {                          \
    return ::fuser_emu::launch<&name>(&name, #name, cfg, args, stats);                              \
  }                                                                                                 \
  extern "C" FUSER_EXPORT const char* name##__signature(void) { return ::fuser_emu::signature_of(&name); }

#endif  // FUSER_CPU_EMU_H
