// fuser_cpu_racecheck.h -- racecheck for the CPU emulation (-DFUSER_RACECHECK; included by
// fuser_cpu_emu.h). compute-sanitizer's racecheck, for the emulation: the emulation runs the
// threads of a block one after another between barriers, so a kernel that is racy on a GPU gives
// one deterministic answer here and hides the bug; this build reports it instead.
//
// What is a race: two threads of a block touch the same shared-memory element, or the same
// global-memory element through fuser_ld/fuser_st, in the same barrier interval (no
// __syncthreads() between them), and at least one of them writes. Threads of one warp are also
// ordered by a warp operation between them (__syncwarp, a shuffle, a vote). Atomics do not race.
// The first race of a block ends it and fails the launch with a message naming the kernel, the
// array and element, the two threads and their access kinds.
//
// How: every tracked access goes through `access` (shared arrays are declared as SharedArray,
// whose elements are Ref proxies: lowering/backends/cpu_runtime.py rewrites `__shared__ T name[N];` into
// FUSER_RC_SHARED for racecheck builds; dynamic shared memory is a SharedPtr). A per-OS-thread
// open-addressing table maps each address touched in the current block to the last writer and
// up to two readers with the barrier interval and warp-operation count they were in; a new
// block (the runtime's block serial) starts an empty table without clearing it (a generation).
// Not tracked: raw pointer accesses to global memory (kernels written by hand), races between
// blocks (the emulation runs blocks one at a time per OS thread), and blocks other than the first
// two and the last two of a launch (see begin_block_if_new).
#ifndef FUSER_CPU_RACECHECK_H
#define FUSER_CPU_RACECHECK_H

namespace fuser_emu {
namespace rc {

struct Entry {
  uint64_t addr;
  uint64_t gen;       // the block this entry belongs to; another value: empty
  uint32_t interval;  // barriers passed by the threads that made it
  int32_t writer;     // linear thread index, -1: none
  uint32_t writer_warp_ops;
  int32_t readers[2];
  uint32_t reader_warp_ops[2];
  const char* what;  // the array or parameter, for reports
  long long element;
};

static thread_local Entry* table;
static thread_local uint64_t capacity, used, gen, seen_serial = ~0ull;
static thread_local bool tracking;  // this block is one racecheck samples (see begin_block_if_new)
static thread_local uint32_t intervals[1024], warp_ops[1024];  // per thread of the block

inline int linear_tid() { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)); }

// A race is within a block, and a kernel's blocks run the same code: the first two and the last
// two blocks of a launch are tracked (the edge blocks are where partial tiles take other paths),
// so a large grid costs a racecheck build four blocks' worth of tracking.
inline void begin_block_if_new() {
  if (__builtin_expect(seen_serial == tls_block_serial, 1)) return;
  seen_serial = tls_block_serial;
  const uint64_t n = (uint64_t)gridDim.x * gridDim.y * gridDim.z;
  const uint64_t b = blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
  tracking = b < 2 || b + 2 >= n;
  ++gen;
  used = 0;
  memset(intervals, 0, sizeof intervals);
  memset(warp_ops, 0, sizeof warp_ops);
}

inline void grow() {
  Entry* old = table;
  const uint64_t old_capacity = capacity;
  capacity = capacity ? capacity * 2 : 1u << 14;
  table = (Entry*)calloc(capacity, sizeof(Entry));
  used = 0;
  for (uint64_t i = 0; i < old_capacity; ++i) {
    if (old[i].gen != gen) continue;
    uint64_t h = (old[i].addr * 0x9E3779B97F4A7C15ull) & (capacity - 1);
    while (table[h].gen == gen) h = (h + 1) & (capacity - 1);
    table[h] = old[i];
    ++used;
  }
  free(old);
}

inline Entry* slot(uint64_t addr) {
  if ((used + 1) * 10 > capacity * 7) grow();
  uint64_t h = (addr * 0x9E3779B97F4A7C15ull) & (capacity - 1);
  for (;;) {
    Entry* e = &table[h];
    if (e->gen != gen) {
      ++used;
      *e = Entry{addr, gen, 0, -1, 0, {-1, -1}, {0, 0}, nullptr, 0};
      return e;
    }
    if (e->addr == addr) return e;
    h = (h + 1) & (capacity - 1);
  }
}

// Whether an access of thread t (warp-operation count w) is unordered with one of thread u
// (count uw) in the same barrier interval: another warp always is; the same warp unless a warp
// operation lies between them.
inline bool unordered(int t, uint32_t w, int u, uint32_t uw) {
  return u >= 0 && u != t && ((u >> 5) != (t >> 5) || uw == w);
}

[[noreturn]] __attribute__((cold, noinline)) inline void report(const Entry* e, int other, const char* other_kind,
                                                               int t, const char* kind) {
  const uint3 bd = {blockDim.x, blockDim.y, blockDim.z};
  auto tid = [&](int i) { return uint3{(unsigned)i % bd.x, (unsigned)(i / bd.x) % bd.y, (unsigned)(i / (bd.x * bd.y))}; };
  const uint3 a = tid(other), b = tid(t);
  char message[300];
  snprintf(message, sizeof message,
           "race on %s[%lld]: thread (%u,%u,%u) %s it and thread (%u,%u,%u) %s it with no __syncthreads()%s "
           "between them",
           e->what ? e->what : "global memory", e->element, a.x, a.y, a.z, other_kind, b.x, b.y, b.z, kind,
           (other >> 5) == (t >> 5) ? " or warp operation" : "");
  fuser_rt_race(message);
}

inline void access(const void* p, bool write, const char* what, long long element, bool same_value = false) {
  begin_block_if_new();
  if (!tracking) return;
  const int t = linear_tid();
  const uint32_t interval = intervals[t], w = warp_ops[t];
  Entry* e = slot((uint64_t)p);
  if (e->interval != interval) {  // touched before the last barrier only: ordered
    e->interval = interval;
    e->writer = e->readers[0] = e->readers[1] = -1;
  }
  e->what = what;
  e->element = element;
  if (unordered(t, w, e->writer, e->writer_warp_ops) && !same_value)
    report(e, e->writer, "wrote", t, write ? "writes" : "reads");
  if (write) {
    for (int k = 0; k < 2; ++k)
      if (unordered(t, w, e->readers[k], e->reader_warp_ops[k]) && !same_value)
        report(e, e->readers[k], "read", t, "writes");
    e->writer = t;
    e->writer_warp_ops = w;
    return;
  }
  if (e->readers[0] == t || e->readers[1] == t) return;
  const int k = e->readers[0] < 0 ? 0 : 1;  // keep two distinct readers: enough to find a race
  e->readers[k] = t;
  e->reader_warp_ops[k] = w;
}

// Barriers and warp operations order what comes after them (fuser_cpu_emu.h calls these).
inline void passed_barrier() {
  begin_block_if_new();
  ++intervals[linear_tid()];
}
inline void passed_warp_op() {
  begin_block_if_new();
  ++warp_ops[linear_tid()];
}

// An element of a shared array: reads and writes are recorded.
template <class T>
struct Ref {
  T* p;
  const char* what;
  long long i;
  operator T() const {
    access(p, false, what, i);
    return *p;
  }
  Ref& operator=(const T& v) {
    access(p, true, what, i);
    *p = v;
    return *this;
  }
  Ref& operator=(const Ref& o) { return *this = (T)o; }
  template <class U> Ref& operator+=(const U& v) { return *this = (T)((T)*this + v); }
  template <class U> Ref& operator-=(const U& v) { return *this = (T)((T)*this - v); }
  template <class U> Ref& operator*=(const U& v) { return *this = (T)((T)*this * v); }
  template <class U> Ref& operator/=(const U& v) { return *this = (T)((T)*this / v); }
  template <class U> Ref& operator|=(const U& v) { return *this = (T)((T)*this | v); }
  template <class U> Ref& operator&=(const U& v) { return *this = (T)((T)*this & v); }
  Ref& operator++() { return *this += 1; }
  Ref& operator--() { return *this -= 1; }
  T* operator&() const { return p; }  // a raw pointer: what is done through it is not tracked
};

// A shared array (`__shared__ T name[N]` of a racecheck build) and dynamic shared memory.
template <class T, long long N>
struct SharedArray {
  alignas(16) T data[N];
  const char* what;
  Ref<T> operator[](long long i) { return Ref<T>{&data[i], what, i}; }
  operator T*() { return data; }
};
// Helpers take shared memory by reference (S&&): a copy of a SharedArray would be another array.

template <class T>
struct SharedPtr {
  T* p;
  const char* what;
  long long offset;
  Ref<T> operator[](long long i) const { return Ref<T>{p + i, what, offset + i}; }
  SharedPtr operator+(long long k) const { return SharedPtr{p + k, what, offset + k}; }
  operator T*() const { return p; }
  // Elements of type U from `byte_offset` bytes on (FUSER_SHARED_VIEW), still tracked.
  template <class U>
  SharedPtr<U> view(long long byte_offset) const {
    return SharedPtr<U>{reinterpret_cast<U*>(reinterpret_cast<char*>(p) + byte_offset), what,
                        byte_offset / (long long)sizeof(U)};
  }
};

// A global access through fuser_ld/fuser_st: named by the pointer parameter it lies in. A store of
// the value the element already holds changes nothing, whoever else touches it (several threads
// writing one result, as a broadcast output of a wider kernel does): it is not reported.
template <class T>
inline void global(const T* base, long long idx, int n, const T* stored) {
  begin_block_if_new();
  if (!tracking) return;
  const fuser_launch_config* cfg = tls_config;
  const char* what = nullptr;
  for (uint32_t r = 0; r < cfg->num_regions; ++r)
    if ((uint64_t)base - cfg->regions[r].base <= cfg->regions[r].bytes) what = cfg->regions[r].name;
  for (int k = 0; k < n; ++k) {
    const T* p = base + idx + k;
    access(p, stored != nullptr, what, idx + k, stored && memcmp(p, stored + k, sizeof(T)) == 0);
  }
}

}  // namespace rc
}  // namespace fuser_emu

#define FUSER_RC_SHARED(T, name, N) static thread_local ::fuser_emu::rc::SharedArray<T, (N)> name{{}, #name}
#define FUSER_RC_DYNAMIC_SHARED(T, name) \
  ::fuser_emu::rc::SharedPtr<T> name{reinterpret_cast<T*>(::fuser_emu::dynamic_smem()), #name, 0}

#endif  // FUSER_CPU_RACECHECK_H
