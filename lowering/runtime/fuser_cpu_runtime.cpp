// fuser_cpu_runtime.cpp -- the host side of the CPU emulation, compiled once per installation.
//
// lowering/backends/prebuilt.py builds this file into a shared object (g++ -O2 -fopenmp -fPIC
// -shared, plus the modules' extra flags) that every kernel module links against; the interface
// is fuser_cpu_abi.h. It owns everything a kernel does not need inline: the OpenMP grid loop,
// fibers and their context switch, the guarded fiber stacks shared by all modules of a process,
// the SIGSEGV handler that turns a guard-page fault into a launch error, barriers and warp
// operations, and error reports. Execution model and limits: fuser_cpu_emu.h.
//
// Per OS thread state the kernels read (threadIdx, blockIdx, the byte counters, ...) stays in each
// module (fuser_thread_vars); this runtime keeps its own thread_local state only.
#include "fuser_cpu_abi.h"

#include <omp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__) && !defined(FUSER_EMU_UCONTEXT)
#define FUSER_EMU_UCONTEXT 1
#endif
#if defined(FUSER_EMU_UCONTEXT)
#include <ucontext.h>
#endif

namespace fuser_emu {

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

static thread_local LaunchState* tls_launch;
static thread_local fuser_thread_vars tls_vars;  // of the module whose launch this thread runs

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
  const uint3 block = in_block ? *tls_vars.block_idx : uint3{0, 0, 0};
  int n = in_block ? snprintf(out, cap, "kernel '%s' block (%u,%u,%u): ", st->kernel, block.x, block.y, block.z)
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
  unsigned exists;   // lanes of the block (racecheck: a mask must name only lanes that reach the op)
};

struct Block {
  Fiber* fibers;
  int n, live;
  int at_barrier, barrier_pred;  // threads waiting at __syncthreads(), and those with pred != 0
  int barrier_line, other_line;  // other_line != -1: threads wait on two different lines
  bool failed;
  bool racecheck;  // the module is a racecheck build (warp masks are checked)
  Fiber* current;
  Context sched;
  void (*body)(void*);
  void* body_ctx;
  uint3* thread_idx;  // the module's threadIdx of this OS thread
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
// reached through a pthread key that lowering/backends/cpu_runtime.py creates once per process and passes
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
// Every host runtime loaded (one per set of runtime flags) installs this handler once, over the
// previous one: the chain is linear, and any runtime's handler recognises any runtime's fibers,
// since regions are found through the shared key.
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
// stack_bytes is the launching module's FUSER_FIBER_STACK_BYTES (checked there to leave room for
// the stagger, at most 32 KiB).
struct FiberPool {
  Fiber* fibers = nullptr;
  int capacity = 0;
  int64_t key = -1;                // of the region, for the thread-exit release
  SharedStacks* region = nullptr;  // region the fibers' stacks were laid out in ...
  uint64_t generation = 0;         // ... and its generation (a new region may reuse the address)
  dim3 shape{0, 0, 0};             // block shape the thread indices were computed for

  // Prepares n fibers for blocks of shape bd; false (g_region_error set) if out of memory.
  bool prepare(int64_t shared_key, int n, dim3 bd, size_t stack_bytes) {
    static const bool handler_installed = install_segv_handler();
    (void)handler_installed;
    key = region_key(shared_key);
    __atomic_store_n(&g_region_key, key, __ATOMIC_RELAXED);
    SharedStacks* s = thread_stacks(key, n, stack_bytes);
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
  *b->thread_idx = to->tid;
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
  if (b->racecheck && (leader->mask & ~W.live)) {  // a lane it names returned, or does not exist
    const int lane = __builtin_ctz(leader->mask & ~W.live);
    report(kRace, "race: a warp operation of warp %d names lane %d in its mask 0x%08x, which %s; every lane "
           "named must reach it (the result is undefined on a GPU)", w, lane, leader->mask,
           (W.exists >> lane) & 1 ? "returned without reaching it" : "the block does not have");
    fail_block(b, b->current);
  }
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
inline bool run_block_fibers(const fuser_kernel_body& body) {
  const dim3 bd = *tls_vars.block_dim;
  const int n = (int)(bd.x * bd.y * bd.z);
  if (!tls_pool.prepare(tls_launch->stack_key, n, bd, body.fiber_stack_bytes)) {
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
  b.body = body.thread;
  b.body_ctx = body.ctx;
  b.racecheck = body.racecheck != 0;
  b.thread_idx = tls_vars.thread_idx;
  for (int w = 0; w < 32; ++w) {
    int lanes = n - 32 * w;
    b.warps[w].live = b.warps[w].exists = lanes >= 32 ? ~0u : lanes > 0 ? (1u << lanes) - 1 : 0u;
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

// ---------------------------------------------------------------------------------------------
// Memcheck: a module built with -DFUSER_MEMCHECK checks every access inline (fuser_cpu_emu.h)
// and calls fuser_rt_out_of_bounds on a violation, which reports it and ends the block.
// ---------------------------------------------------------------------------------------------
// Loop mode runs a block on the OS thread's own stack: a violation jumps back to the block's start.
static thread_local jmp_buf* tls_loop_abort;

// Ends the current thread's block without performing the bad access (as a GPU kernel dies on it).
[[noreturn]] inline void abort_block() {
  if (tls_block) fail_block(tls_block, tls_block->current);
  longjmp(*tls_loop_abort, 1);
}

__attribute__((cold)) inline void report_out_of_bounds(uint64_t p, long long idx, unsigned elem_bytes, int n,
                                                       const char* what, int r, uint3 t) {
  LaunchState* st = tls_launch;
  const unsigned bytes = elem_bytes * (unsigned)n;
  if (r < 0) {
    if (report(kOutOfBounds, "thread (%u,%u,%u): %s of %u bytes at %p + %lld elements: the pointer lies in no "
               "pointer parameter", t.x, t.y, t.z, what, bytes, (void*)p, idx))
      st->stats->bad_region = -1, st->stats->bad_index = idx, st->stats->bad_extent = 0;
    return;
  }
  const fuser_mem_region& reg = st->regions[r];
  // Index and extent in elements of the access's type, counted from the parameter's base.
  const long long index = (long long)((__int128)(p - reg.base) / elem_bytes + idx);
  const unsigned long long extent = reg.bytes / elem_bytes;
  if (report(kOutOfBounds, "thread (%u,%u,%u): out-of-bounds %s of %u bytes: %s[%lld]%s, but %s has %llu elements "
             "(%llu bytes)", t.x, t.y, t.z, what, bytes, reg.name, index,
             n > 1 ? " (vector)" : "", reg.name, extent, (unsigned long long)reg.bytes))
    st->stats->bad_region = r, st->stats->bad_index = index, st->stats->bad_extent = extent;
}

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

// Per OS thread: join the launch (find the module's variables of this thread and set them up),
// then hand the byte counts back.
inline void worker_begin(LaunchState* st, const fuser_launch_config* cfg, const fuser_kernel_body& body) {
  tls_launch = st;
  body.thread_vars(&tls_vars);
  const fuser_thread_vars& v = tls_vars;
  v.counters[0] = v.counters[1] = 0;
  *v.block_dim = dim3(cfg->block[0], cfg->block[1], cfg->block[2]);
  *v.grid_dim = dim3(cfg->grid[0], cfg->grid[1], cfg->grid[2]);
  *v.config = cfg;
  if (!dynamic_smem_begin(cfg->dynamic_smem_bytes))
    report_launch(kOutOfMemory, "cannot allocate %llu bytes of dynamic shared memory",
                  (unsigned long long)cfg->dynamic_smem_bytes);
  *v.dynamic_smem = tls_dyn_smem.data;
}
inline void worker_end(LaunchState* st) {
  __atomic_fetch_add(&st->bytes_loaded, tls_vars.counters[0], __ATOMIC_RELAXED);
  __atomic_fetch_add(&st->bytes_stored, tls_vars.counters[1], __ATOMIC_RELAXED);
  tls_launch = nullptr;
}

inline void run_block_as_loop(const fuser_kernel_body& body) {
  if (body.memcheck || body.racecheck) {
    jmp_buf recover;  // a memcheck violation in this block continues here (see abort_block)
    tls_loop_abort = &recover;
    if (setjmp(recover) != 0) return;
    body.loop_block(body.ctx);
    return;
  }
  body.loop_block(body.ctx);
}

// Ctrl-C during a long launch: for its span, SIGINT only sets a flag that the workers read
// between blocks; the launch stops with kInterrupted. When the launch ends the watch hands a
// SIGINT it held back to the handler it had (Python's, which raises KeyboardInterrupt as the
// ctypes call returns), also one that came after every block had started and stopped nothing.
// A SIGINT that is ignored or kills the process (SIG_IGN, SIG_DFL) keeps doing so.
static volatile sig_atomic_t g_sigint_seen = 0;
static void note_sigint(int) { g_sigint_seen = 1; }

class SigintWatch {
 public:
  explicit SigintWatch(bool wanted) {
    if (!wanted) return;
    struct sigaction mine {};
    mine.sa_handler = note_sigint;
    sigemptyset(&mine.sa_mask);
    mine.sa_flags = SA_RESTART;
    g_sigint_seen = 0;
    if (sigaction(SIGINT, &mine, &previous_) != 0) return;
    active_ = true;
    if (previous_.sa_handler == SIG_IGN || previous_.sa_handler == SIG_DFL) release();
  }
  ~SigintWatch() { release(); }
  bool seen() const { return active_ && g_sigint_seen; }

 private:
  void release() {
    if (!active_) return;
    sigaction(SIGINT, &previous_, nullptr);
    active_ = false;
    if (g_sigint_seen) raise(SIGINT);  // never dropped with our handler
  }
  struct sigaction previous_ {};
  bool active_ = false;
};

inline int run_grid(const char* kernel, const fuser_launch_config* cfg, fuser_launch_stats* stats,
                    const fuser_kernel_body& body) {
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
  SigintWatch sigint(cfg->interruptible != 0 && nblocks > 1);
  auto run_block = [&](long long i) {
    if (launch_failed(&st)) return;
    if (sigint.seen()) {
      report_launch(kInterrupted, "interrupted (SIGINT) before block %lld of %lld", i, nblocks);
      return;
    }
    *tls_vars.block_idx = {(unsigned)(i % gx), (unsigned)((i / gx) % gy), (unsigned)(i / (gx * gy))};
    ++*tls_vars.block_serial;
    if (tls_dyn_smem.size) memset(tls_dyn_smem.data, 0xff, tls_dyn_smem.size);
    if (fibers)
      run_block_fibers(body);
    else
      run_block_as_loop(body);
  };
  if (nthreads <= 1) {
    // One worker: the calling thread runs the blocks itself. An OpenMP region of one thread
    // costs about a microsecond, which is most of a small launch.
    worker_begin(&st, cfg, body);
    for (long long i = 0; i < nblocks; ++i) run_block(i);
    worker_end(&st);
  } else {
#pragma omp parallel num_threads(nthreads)
    {
      worker_begin(&st, cfg, body);
#pragma omp for schedule(dynamic, chunk)
      for (long long i = 0; i < nblocks; ++i) run_block(i);
      worker_end(&st);
    }
  }
  stats->bytes_loaded = st.bytes_loaded;
  stats->bytes_stored = st.bytes_stored;
  stats->error_code = __atomic_load_n(&st.error, __ATOMIC_ACQUIRE);
  return stats->error_code;
}

}  // namespace fuser_emu

// ---------------------------------------------------------------------------------------------
// The interface of fuser_cpu_abi.h.
// ---------------------------------------------------------------------------------------------
namespace fuser_emu {
// Unsigned compares: a negative index wraps above any extent it can index (the caller caps extent
// at the type's largest value + 1), so one compare finds both ends.
// The loop has no early exit so it vectorises; the arrays it sees are index tensors.
template <class T>
int index_out_of_range(const T* values, int64_t n, bool has_ignore, T ignore, bool fill_bad, uint64_t extent) {
  using U = std::make_unsigned_t<T>;
  unsigned bad = 0;
  if (!has_ignore) {
    for (int64_t i = 0; i < n; ++i) bad |= (U)values[i] >= extent;
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const bool ignored = values[i] == ignore;
      bad |= ignored ? fill_bad : (U)values[i] >= extent;
    }
  }
  return bad != 0;
}
}  // namespace fuser_emu

extern "C" {
int fuser_rt_abi_version(void) { return FUSER_CPU_ABI_VERSION; }

int fuser_rt_run_grid(const char* kernel, const fuser_launch_config* cfg, fuser_launch_stats* stats,
                      const fuser_kernel_body* body) {
  return ::fuser_emu::run_grid(kernel, cfg, stats, *body);
}

int fuser_rt_index_out_of_range(const int64_t* a) {
  const void* data = (const void*)a[0];
  const int64_t n = a[1], elem_bytes = a[2], has_ignore = a[3], ignore = a[4], fill = a[5], extent = a[6];
  if (extent <= 0) return n > 0;
  const bool fill_bad = fill < 0 || fill >= extent;
  if (elem_bytes == 8)
    return ::fuser_emu::index_out_of_range((const int64_t*)data, n, has_ignore != 0, ignore, fill_bad, (uint64_t)extent);
  if (elem_bytes == 4) {
    // An ignore value no int32 can hold matches no element.
    const bool can_match = has_ignore && ignore >= INT32_MIN && ignore <= INT32_MAX;
    return ::fuser_emu::index_out_of_range((const int32_t*)data, n, can_match, (int32_t)ignore, fill_bad,
                                           (uint64_t)extent);
  }
  return -1;
}

uint64_t fuser_rt_sync_block(int line, int pred) { return ::fuser_emu::sync_block(line, pred); }

uint64_t fuser_rt_warp_op(uint8_t op, unsigned mask, uint64_t in, int b_operand, int c_operand) {
  return ::fuser_emu::warp_op(op, mask, in, b_operand, c_operand);
}

void fuser_rt_report_misaligned(const void* p, unsigned bytes, const char* what, uint3 t) {
  ::fuser_emu::report(::fuser_emu::kMisaligned, "thread (%u,%u,%u): %s of %u bytes at %p is not %u-byte aligned",
                      t.x, t.y, t.z, what, bytes, p, bytes);
}

void fuser_rt_race(const char* message) {
  ::fuser_emu::report(::fuser_emu::kRace, "%s", message);
  ::fuser_emu::abort_block();
}

void fuser_rt_out_of_bounds(uint64_t p, long long idx, unsigned elem_bytes, int n, const char* what, int region,
                            uint3 t) {
  ::fuser_emu::report_out_of_bounds(p, idx, elem_bytes, n, what, region, t);
  ::fuser_emu::abort_block();
}
}
