// Shared pieces of the extension module synk._synk (python/src/*.cpp): the lock that serialises
// every use of synk's C++ API, the helper that runs C++ work without the GIL, conversions
// between numpy arrays and synk's arrays and dtypes, and the Python wrappers of synk::Data and
// of shared variables that several files need. The extension includes only synk's public face
// (synk/ and base/ headers); test/layering/check_layering.py enforces it.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "synk/jit.h"
#include "synk/synk.h"

namespace synkpy {

namespace py = pybind11;

// --- Locking ------------------------------------------------------------------------------------

// synk's C++ runtime is not thread-safe (one process group, one registry), and long calls run
// without the GIL so that other Python threads keep going; so every use of the C++ API holds this
// one mutex. Rule that keeps it deadlock-free: nobody ever waits for the api mutex while holding
// the GIL. The thread that holds it may take it again: Python code that runs under it (a finalizer
// run by the garbage collector while a binding builds its result) may call synk.
std::recursive_mutex& api_mutex();

// Holds api_mutex() for a scope. Taken with the GIL held: when another thread owns the mutex
// (running a call without the GIL), the GIL is released while waiting so that thread can finish.
class ApiLock {
 public:
  ApiLock();
  ~ApiLock() { api_mutex().unlock(); }
  ApiLock(const ApiLock&) = delete;
  ApiLock& operator=(const ApiLock&) = delete;
};

// Raises UsageError when this process is not the one that forked the running group: a child
// the user forked from the master with os.fork() inherits a copy of the group, which belongs to
// the master (its commands would interleave with the master's). synk.close() still works there.
void check_group_process();
// A str or os.PathLike argument, as the path it names.
std::string path_arg(py::handle path);
// The process that forked the running group (set by synk.fork).
pid_t& group_pid();

// Runs `work` with the GIL released and api_mutex() held, then (GIL back) raises a pending
// KeyboardInterrupt or other signal exception, so that Ctrl-C during a long call takes effect as
// soon as the call returns. The call always completes on every rank first: the C++ runtime has
// no way to stop a command half-way without shutting the group down.
template <class F>
auto without_gil(F&& work) -> decltype(work()) {
  using R = decltype(work());
  check_group_process();
  if constexpr (std::is_void_v<R>) {
    {
      py::gil_scoped_release release;
      std::lock_guard<std::recursive_mutex> lock(api_mutex());
      work();
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  } else {
    std::optional<R> result;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::recursive_mutex> lock(api_mutex());
      result.emplace(work());
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    return std::move(*result);
  }
}

// --- scalar arguments ----------------------------------------------------------------------------

// An argument that must be an integer (not a bool; anything with __index__) in int64's range, a
// real number (not a string), or a bool (Python's or numpy's): a UsageError naming `what` and
// the value received otherwise, where pybind11 would say "Unable to cast".
int64_t int_arg(py::handle v, const std::string& what);
double float_arg(py::handle v, const std::string& what);
bool bool_arg(py::handle v, const std::string& what);

// --- dtypes and arrays --------------------------------------------------------------------------

// The numpy dtype of a synk dtype, and back (nullopt for numpy dtypes synk has no equal of).
py::dtype numpy_dtype(synk::DType t);
std::optional<synk::DType> synk_dtype(const py::dtype& d);
// A dtype argument: a synk spelling ("f32", "i64", "u8", "bool") or anything numpy.dtype()
// accepts (np.float32, "float32", ...). UsageError naming `what` when synk has no such dtype.
synk::DType parse_dtype(py::handle spec, const std::string& what);
// "float32, float64, int32, int64, uint8, bool": for messages.
const char* supported_dtypes();

// A host array handed to C++: the numpy array kept alive, and a reference into it. Made under the
// GIL; the reference stays valid without it as long as this object lives.
struct HostArray {
  py::array array;
  synk::ArrayRef ref;
};

// Any array-like value as a C-contiguous, native-byte-order numpy array of a synk dtype. With
// `target` known, a numpy dtype synk lacks (int16, float16, ...) is converted to it when numpy's
// safe-cast rule (or force_cast) allows; a synk dtype that does not convert safely to `target`
// is refused here, naming `what` and the conversion to write (and force_cast=True where the
// caller takes it: `force_cast_option`); everything else keeps its dtype. UsageError otherwise.
HostArray host_array(py::handle value, std::optional<synk::DType> target, bool force_cast,
                     const std::string& what, bool force_cast_option = true);

// A copy of an Array as a numpy array (large arrays are moved, not copied).
py::array to_numpy(synk::Array&& a);
py::array to_numpy(const synk::Array& a);

// --- Python wrappers of C++ handles ---------------------------------------------------------------

// synk.Data: a synk::Data plus the cached numpy view of its shared memory (data.cpp).
struct Mapping;
class DataObj {
 public:
  explicit DataObj(synk::Data d) : data(std::move(d)) {}
  ~DataObj();
  DataObj(const DataObj&) = delete;
  DataObj& operator=(const DataObj&) = delete;
  // The numpy array viewing the shared memory (no copy), rebuilt when the Data re-allocates or
  // changes shape.
  py::object view();

  synk::Data data;

 private:
  py::object view_;
  std::shared_ptr<Mapping> mapping_;
  uint64_t view_generation_ = 0;
  std::vector<int64_t> view_shape_;
};

// synk.Shared: one shared variable of a compiled module, by name, with what never changes about
// it read once (make_shared_obj), so that most uses need no lock.
struct SharedObj {
  synk::jit::Module module;
  std::string name;
  synk::Var var;
  synk::DType dtype = synk::DType::F32;
  int ndim = 0;
  bool sliceable = false;
  std::string spec_text;   // "f32[m, 4] sliceable"
  synk::jit::Shared handle() const { return module.shared(name); }   // under the API lock
};
// UsageError (listing the module's names) for an unknown name. Takes the API lock.
SharedObj make_shared_obj(const synk::jit::Module& module, const std::string& name);

// The shared variables a collective acts on: one Shared, or a list/tuple of them. `single` says
// which, so results come back in the same form.
struct VarList {
  std::vector<synk::Var> vars;   // the runtime's handles, in order
  std::vector<const SharedObj*> objs;
  bool single = false;
};
VarList var_list(py::handle vars, const std::string& what);

// Batch / batch_s arguments of calls and scatter (calls.cpp documents the accepted forms).
synk::Batch parse_batch(py::handle batch, const std::string& what);
synk::BatchS parse_batch_s(py::handle batch_s);

// Registration of each file's part of the module.
void init_errors(py::module_& m);
void init_data(py::module_& m);
void init_calls(py::module_& m);
void init_collectives(py::module_& m);

}  // namespace synkpy
