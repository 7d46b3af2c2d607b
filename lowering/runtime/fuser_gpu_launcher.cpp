// The cuda backend's native launcher: a CPython extension module, built once per installation and
// Python ABI (lowering/backends/gpu_launcher.py), that launches one prebuilt kernel launch per call.
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

PyObject* record_version(PyObject*, PyObject*) { return PyLong_FromUnsignedLong(kRecordVersion); }

PyMethodDef methods[] = {
    {"launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch)), METH_FASTCALL,
     "launch(record, stream, *pointers) -> CUresult: one kernel launch from a launch record"},
    {"record_version", record_version, METH_NOARGS, "the launch record layout this module reads"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "fuser_gpu_launcher", "fuser's native kernel launcher", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_fuser_gpu_launcher() { return PyModule_Create(&module); }
