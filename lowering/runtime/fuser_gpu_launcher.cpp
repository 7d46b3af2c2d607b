// fuser's native launcher: a CPython extension module, built once per installation and Python ABI
// (lowering/backends/gpu_launcher.py), that launches one prebuilt kernel launch per call: the cuda
// backend's through the driver (`launch`), the cpu backend's through a kernel module's launcher
// (`host_launch`, at the end of this file).
//
// Python hands it a *launch record* (bytes, built once per bound launch) and the call's data
// pointers; it copies the record's argument template, writes the pointers into their slots and
// calls cuLaunchKernel with the template as the kernel's parameter buffer. The Python path it
// replaces (gpu_runtime.BoundGpuLaunch's fallback) packed the same bytes with struct and built
// three ctypes objects per launch.
//
// No libcuda at link time: the record carries the driver's entry points (cuLaunchKernel,
// cuCtxGetCurrent, cuCtxPushCurrent_v2, cuCtxPopCurrent_v2), resolved by Python; the tests pass a
// recording stub's instead. The context: a record names the context its CUfunction was loaded
// into; when another (or none) is current on the calling thread, that one is pushed for the
// launch and popped after it, so no thread is left with a context pushed.
//
// Record layout (little-endian, 8-byte aligned; gpu_launcher.RECORD_HEADER must agree):
//   u64 launch_kernel, get_current, push_current, pop_current   driver entry points
//   u64 function, context                                        CUfunction, CUcontext
//   u32 grid[3], block[3], shared_bytes, param_bytes, slot_count, version
//   u32 slot_offsets[slot_count], zero-padded to 8 bytes
//   u8  params[param_bytes]                                      the argument template
// Returns the CUresult (0: launched); argument errors raise TypeError / ValueError.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <cstring>

#include "fuser_cpu_abi.h"

namespace {

constexpr uint32_t kRecordVersion = 1;
constexpr uint32_t kMaxParamBytes = 4096;  // cuLaunchKernel's classic parameter limit

using CUresult = int;
using CUcontext = void*;
using LaunchKernel = CUresult (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  void*, void**, void**);
using GetCurrent = CUresult (*)(CUcontext*);
using PushCurrent = CUresult (*)(CUcontext);
using PopCurrent = CUresult (*)(CUcontext*);

struct RecordHeader {
  uint64_t launch_kernel, get_current, push_current, pop_current;
  uint64_t function, context;
  uint32_t grid[3], block[3];
  uint32_t shared_bytes, param_bytes, slot_count, version;
};
static_assert(sizeof(RecordHeader) == 88, "gpu_launcher.RECORD_HEADER describes this layout");

size_t padded8(size_t n) { return (n + 7) & ~size_t(7); }

// The record's header, checked against its size; nullptr with a Python error set.
const RecordHeader* record_of(PyObject* obj, const uint32_t** slots, const unsigned char** params) {
  if (!PyBytes_CheckExact(obj)) {
    PyErr_SetString(PyExc_TypeError, "launch: the record must be bytes (gpu_launcher.launch_record)");
    return nullptr;
  }
  const char* data = PyBytes_AS_STRING(obj);
  size_t size = static_cast<size_t>(PyBytes_GET_SIZE(obj));
  if (size < sizeof(RecordHeader)) {
    PyErr_SetString(PyExc_ValueError, "launch: record shorter than its header");
    return nullptr;
  }
  auto* h = reinterpret_cast<const RecordHeader*>(data);
  size_t slots_end = sizeof(RecordHeader) + padded8(4 * size_t(h->slot_count));
  if (h->version != kRecordVersion || h->param_bytes > kMaxParamBytes || size != slots_end + h->param_bytes) {
    PyErr_SetString(PyExc_ValueError, "launch: malformed record (version, parameter size or length)");
    return nullptr;
  }
  *slots = reinterpret_cast<const uint32_t*>(data + sizeof(RecordHeader));
  for (uint32_t i = 0; i < h->slot_count; ++i) {
    if (size_t((*slots)[i]) + sizeof(void*) > h->param_bytes) {
      PyErr_SetString(PyExc_ValueError, "launch: malformed record (a pointer slot past the parameters)");
      return nullptr;
    }
  }
  *params = reinterpret_cast<const unsigned char*>(data + slots_end);
  return h;
}

// An address given as a Python int, or as anything with __index__ (a numpy integer), as the
// Python path's struct.pack takes it; false with a Python error set when it is neither.
bool address_of(PyObject* obj, void** address) {
  if (PyLong_Check(obj)) {
    *address = PyLong_AsVoidPtr(obj);
  } else {
    PyObject* index = PyNumber_Index(obj);
    if (index == nullptr) return false;
    *address = PyLong_AsVoidPtr(index);
    Py_DECREF(index);
  }
  return !(*address == nullptr && PyErr_Occurred());
}

// launch(record, stream, *pointers) -> CUresult
PyObject* launch(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 2) {
    PyErr_SetString(PyExc_TypeError, "launch(record, stream, *pointers)");
    return nullptr;
  }
  const uint32_t* slots;
  const unsigned char* params;
  const RecordHeader* h = record_of(args[0], &slots, &params);
  if (h == nullptr) return nullptr;
  if (nargs - 2 != Py_ssize_t(h->slot_count)) {
    PyErr_Format(PyExc_TypeError, "launch: the record has %u pointer slots, %zd pointers given", h->slot_count,
                 nargs - 2);
    return nullptr;
  }
  void* stream;
  if (!address_of(args[1], &stream)) return nullptr;

  alignas(16) unsigned char buffer[kMaxParamBytes];
  std::memcpy(buffer, params, h->param_bytes);
  for (uint32_t i = 0; i < h->slot_count; ++i) {
    void* pointer;
    if (!address_of(args[2 + i], &pointer)) return nullptr;
    std::memcpy(buffer + slots[i], &pointer, sizeof(void*));
  }
  size_t param_bytes = h->param_bytes;
  void* extra[] = {reinterpret_cast<void*>(1), buffer,        // CU_LAUNCH_PARAM_BUFFER_POINTER
                   reinterpret_cast<void*>(2), &param_bytes,  // CU_LAUNCH_PARAM_BUFFER_SIZE
                   nullptr};                                  // CU_LAUNCH_PARAM_END

  auto context = reinterpret_cast<CUcontext>(h->context);
  CUcontext current = nullptr;
  CUresult code = reinterpret_cast<GetCurrent>(h->get_current)(&current);
  bool pushed = false;
  if (code == 0 && current != context) {
    code = reinterpret_cast<PushCurrent>(h->push_current)(context);
    pushed = code == 0;
  }
  if (code == 0) {
    code = reinterpret_cast<LaunchKernel>(h->launch_kernel)(
        reinterpret_cast<void*>(h->function), h->grid[0], h->grid[1], h->grid[2], h->block[0], h->block[1],
        h->block[2], h->shared_bytes, stream, nullptr, extra);
  }
  if (pushed) {
    CUcontext popped;
    CUresult pop_code = reinterpret_cast<PopCurrent>(h->pop_current)(&popped);
    if (code == 0) code = pop_code;
  }
  return PyLong_FromLong(code);
}

// ---------------------------------------------------------------------------------------------
// The cpu backend's launches (lowering/backends/cpu_runtime.py, BoundLaunch): a kernel module's
// `k__launch(cfg, args, stats)` (fuser_cpu_emu.h) called with the argument slots, config, stats
// and (memcheck and racecheck modules) pointer regions on this function's stack. The GIL is
// released while the kernel runs (as ctypes releases it), except for a launch its record marks
// small (kHoldGil: one block over a few KiB, which runs in microseconds; taking the GIL back
// costs more than such a launch's arguments). The Python path it replaces wrote the pointers
// into per-thread ctypes buffers and called the launcher through ctypes.
//
// Host record layout (cpu_runtime.host_record must agree):
//   u64 launcher, main_thread      k__launch; PyThread ident of Python's main thread
//   fuser_launch_config config     as launched (interruptible set per call: on the main thread;
//                                  regions set per call)
//   u32 arg_count, slot_count, version, flags    flags: kHoldGil, kRegions
//   u32 slots[slot_count], zero-padded to 8 bytes   the arguments filled with the call's pointers
//   u64 values[arg_count]          every argument's 8-byte value slot, the constants in place
//   kRegions: u64 bytes[slot_count], u64 name_offsets[slot_count], then the NUL-terminated names
//                                  the k-th pointer's region: its extent and its parameter's name
//                                  (an offset into the record), its base the k-th pointer
// Returns (bytes loaded, bytes stored); a failed launch calls on_error(code, message bytes,
// bad region, bad index, bad extent) (fuser_launch_stats' fields), which raises its error.
// ---------------------------------------------------------------------------------------------

constexpr uint32_t kMaxHostArgs = 512;  // more arguments take the Python path
constexpr uint32_t kHoldGil = 1;        // a small launch: run with the GIL held
constexpr uint32_t kRegions = 2;        // pass each pointer's region (memcheck, racecheck modules)

struct HostRecordHeader {
  uint64_t launcher, main_thread;
  fuser_launch_config config;
  uint32_t arg_count, slot_count, version, flags;
};
static_assert(sizeof(fuser_launch_config) == 64, "cpu_runtime._LaunchConfig describes this layout");
static_assert(sizeof(HostRecordHeader) == 96, "cpu_runtime.HOST_RECORD_HEADER describes this layout");

using HostLauncher = int (*)(const fuser_launch_config*, void**, fuser_launch_stats*);

bool malformed(const char* what) {
  PyErr_Format(PyExc_ValueError, "host_launch: malformed record (%s)", what);
  return false;
}

// The record's header, pointer slots, argument values and region table, checked against its size;
// false with a Python error set.
bool host_record_of(PyObject* obj, HostRecordHeader* h, const uint32_t** slots, const uint64_t** values,
                    const uint64_t** region_bytes, const uint64_t** name_offsets) {
  if (!PyBytes_CheckExact(obj)) {
    PyErr_SetString(PyExc_TypeError, "host_launch: the record must be bytes (cpu_runtime.host_record)");
    return false;
  }
  const char* data = PyBytes_AS_STRING(obj);
  const size_t size = static_cast<size_t>(PyBytes_GET_SIZE(obj));
  if (size < sizeof *h) return malformed("shorter than its header");
  std::memcpy(h, data, sizeof *h);
  if (h->version != kRecordVersion || h->arg_count > kMaxHostArgs || h->slot_count > h->arg_count)
    return malformed("version or argument count");
  const size_t values_at = sizeof *h + padded8(4 * size_t(h->slot_count));
  const size_t regions_at = values_at + 8 * size_t(h->arg_count);
  const size_t names_at = regions_at + ((h->flags & kRegions) ? 16 * size_t(h->slot_count) : 0);
  if (size < names_at || (!(h->flags & kRegions) && size != names_at)) return malformed("length");
  *slots = reinterpret_cast<const uint32_t*>(data + sizeof *h);
  *values = reinterpret_cast<const uint64_t*>(data + values_at);
  *region_bytes = reinterpret_cast<const uint64_t*>(data + regions_at);
  *name_offsets = *region_bytes + h->slot_count;
  for (uint32_t i = 0; i < h->slot_count; ++i) {
    if ((*slots)[i] >= h->arg_count) return malformed("a pointer slot past the arguments");
    if ((h->flags & kRegions) && ((*name_offsets)[i] < names_at || (*name_offsets)[i] >= size ||
                                  std::memchr(data + (*name_offsets)[i], 0, size - (*name_offsets)[i]) == nullptr))
      return malformed("a region's name");
  }
  return true;
}

// host_launch(record, on_error, *pointers) -> (bytes loaded, bytes stored)
PyObject* host_launch(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 2) {
    PyErr_SetString(PyExc_TypeError, "host_launch(record, on_error, *pointers)");
    return nullptr;
  }
  HostRecordHeader h;
  const uint32_t* slots;
  const uint64_t *template_values, *region_bytes, *name_offsets;
  if (!host_record_of(args[0], &h, &slots, &template_values, &region_bytes, &name_offsets)) return nullptr;
  if (nargs - 2 != Py_ssize_t(h.slot_count)) {
    PyErr_Format(PyExc_TypeError, "host_launch: the record has %u pointer slots, %zd pointers given", h.slot_count,
                 nargs - 2);
    return nullptr;
  }
  uint64_t values[kMaxHostArgs];
  void* argv[kMaxHostArgs];
  fuser_mem_region regions[kMaxHostArgs];
  std::memcpy(values, template_values, 8 * size_t(h.arg_count));
  const bool with_regions = (h.flags & kRegions) != 0;
  const char* data = PyBytes_AS_STRING(args[0]);
  for (uint32_t i = 0; i < h.slot_count; ++i) {
    void* pointer;
    if (!address_of(args[2 + i], &pointer)) return nullptr;
    values[slots[i]] = reinterpret_cast<uint64_t>(pointer);
    if (with_regions) regions[i] = {reinterpret_cast<uint64_t>(pointer), region_bytes[i], data + name_offsets[i]};
  }
  for (uint32_t i = 0; i < h.arg_count; ++i) argv[i] = &values[i];
  h.config.regions = with_regions ? regions : nullptr;
  h.config.num_regions = with_regions ? h.slot_count : 0;
  h.config.interruptible = PyThread_get_thread_ident() == h.main_thread ? 1 : 0;
  fuser_launch_stats stats;
  const auto launcher = reinterpret_cast<HostLauncher>(h.launcher);
  int code;
  if (h.flags & kHoldGil) {
    code = launcher(&h.config, argv, &stats);
  } else {
    Py_BEGIN_ALLOW_THREADS
    code = launcher(&h.config, argv, &stats);
    Py_END_ALLOW_THREADS
  }
  if (code != 0) {
    stats.error[sizeof stats.error - 1] = 0;
    PyObject* raised = PyObject_CallFunction(args[1], "iyiLK", code, stats.error, int(stats.bad_region),
                                             (long long)stats.bad_index, (unsigned long long)stats.bad_extent);
    if (raised == nullptr) return nullptr;
    Py_DECREF(raised);
    PyErr_Format(PyExc_RuntimeError, "host_launch: launch failed with code %d", code);
    return nullptr;
  }
  PyObject* loaded = PyLong_FromUnsignedLongLong(stats.bytes_loaded);
  PyObject* stored = loaded ? PyLong_FromUnsignedLongLong(stats.bytes_stored) : nullptr;
  if (stored == nullptr) {
    Py_XDECREF(loaded);
    return nullptr;
  }
  PyObject* counts = PyTuple_New(2);
  if (counts == nullptr) {
    Py_DECREF(loaded);
    Py_DECREF(stored);
    return nullptr;
  }
  PyTuple_SET_ITEM(counts, 0, loaded);
  PyTuple_SET_ITEM(counts, 1, stored);
  return counts;
}

PyObject* record_version(PyObject*, PyObject*) { return PyLong_FromUnsignedLong(kRecordVersion); }

PyMethodDef methods[] = {
    {"launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch)), METH_FASTCALL,
     "launch(record, stream, *pointers) -> CUresult: one kernel launch from a launch record"},
    {"host_launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(host_launch)), METH_FASTCALL,
     "host_launch(record, on_error, *pointers) -> (bytes loaded, bytes stored): one cpu-backend launch"},
    {"record_version", record_version, METH_NOARGS, "the launch record layout this module reads"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "fuser_gpu_launcher", "fuser's native kernel launcher", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_fuser_gpu_launcher() { return PyModule_Create(&module); }
