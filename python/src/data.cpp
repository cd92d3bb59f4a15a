// synk.Data and synk.data(): arrays in shared memory that every rank reads (synk::Data), seen
// from Python through a numpy array that views the shared memory itself (Data.data, no copy),
// plus the conversions between numpy arrays and synk's arrays and dtypes that every binding uses.
//
// The numpy view maps the Data's shared-memory segment a second time, on its own, instead of
// pointing into the Data's mapping: a view the user kept across a re-allocation (set_value with
// a larger array, free_memory) then still points at valid (old) memory instead of at an unmapped
// address, so no Python code can crash the interpreter through a stale view.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "python/src/common.h"

namespace synkpy {

namespace {

// numpy, imported once; the reference is never released (it must outlive static destructors).
py::handle numpy() {
  static PyObject* np = py::module_::import("numpy").release().ptr();
  return np;
}

[[noreturn]] void usage(const std::string& message) { throw synk::UsageError(message); }

}  // namespace

// Recursive: Python code can run on a thread that holds it (a finalizer the garbage collector
// runs while a binding builds its result) and may call synk again there.
std::recursive_mutex& api_mutex() {
  static std::recursive_mutex* m = new std::recursive_mutex();   // never destroyed: exit handlers may still lock it
  return *m;
}

ApiLock::ApiLock() {
  if (api_mutex().try_lock()) return;
  py::gil_scoped_release release;
  api_mutex().lock();
}

std::string path_arg(py::handle path) {
  // os.fsencode: the bytes the OS sees, for str (non-UTF-8 names included), bytes and os.PathLike.
  py::object bytes = py::module_::import("os").attr("fsencode")(path);
  return std::string(PyBytes_AS_STRING(bytes.ptr()), size_t(PyBytes_GET_SIZE(bytes.ptr())));
}

// --- scalar arguments --------------------------------------------------------------------------------

// numpy's bool scalar (numpy.bool_) has __index__ (with a DeprecationWarning) but is no integer.
bool is_numpy_bool(py::handle v) {
  const std::string_view type = Py_TYPE(v.ptr())->tp_name;
  return type == "numpy.bool_" || type == "numpy.bool";
}

int64_t int_arg(py::handle v, const std::string& what) {
  if (PyBool_Check(v.ptr()) || is_numpy_bool(v) || !PyIndex_Check(v.ptr()))
    usage(what + ": expected an integer, received " + py::repr(v).cast<std::string>());
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) usage(what + ": " + py::repr(v).cast<std::string>() + " is out of the range of a 64-bit integer");
  return x;
}

double float_arg(py::handle v, const std::string& what) {
  if (PyBool_Check(v.ptr()) || py::isinstance<py::str>(v) || py::isinstance<py::bytes>(v) ||
      !(PyFloat_Check(v.ptr()) || PyIndex_Check(v.ptr()) || PyObject_HasAttrString(v.ptr(), "__float__")))
    usage(what + ": expected a number, received " + py::repr(v).cast<std::string>());
  double x = PyFloat_AsDouble(v.ptr());
  if (x == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return x;
}

bool bool_arg(py::handle v, const std::string& what) {
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  if (py::isinstance(v, numpy().attr("bool_"))) return PyObject_IsTrue(v.ptr()) == 1;
  usage(what + ": expected True or False, received " + py::repr(v).cast<std::string>());
}

// --- dtypes -----------------------------------------------------------------------------------------

const char* supported_dtypes() { return "float32, float64, int32, int64, uint8, bool"; }

py::dtype numpy_dtype(synk::DType t) {
  switch (t) {
    case synk::DType::F32: return py::dtype::of<float>();
    case synk::DType::F64: return py::dtype::of<double>();
    case synk::DType::I32: return py::dtype::of<int32_t>();
    case synk::DType::I64: return py::dtype::of<int64_t>();
    case synk::DType::U8: return py::dtype::of<uint8_t>();
    case synk::DType::Bool: return py::dtype::of<bool>();
    case synk::DType::F16: return py::dtype("float16");
    case synk::DType::BF16: break;
  }
  usage(std::string("dtype ") + synk::dtype_name(t) + " has no numpy equivalent");
}

std::optional<synk::DType> synk_dtype(const py::dtype& d) {
  const char kind = d.kind();
  const ssize_t size = d.itemsize();
  if (kind == 'f' && size == 4) return synk::DType::F32;
  if (kind == 'f' && size == 8) return synk::DType::F64;
  if (kind == 'i' && size == 4) return synk::DType::I32;
  if (kind == 'i' && size == 8) return synk::DType::I64;
  if (kind == 'u' && size == 1) return synk::DType::U8;
  if (kind == 'b') return synk::DType::Bool;
  return std::nullopt;   // float16 included: the runtime does not execute it
}

synk::DType parse_dtype(py::handle spec, const std::string& what) {
  if (py::isinstance<py::str>(spec)) {
    if (auto t = synk::dtype_from_name(spec.cast<std::string>()); t && synk::is_runtime_dtype(*t)) return *t;
  }
  py::dtype d;
  try {
    d = py::reinterpret_steal<py::dtype>(numpy().attr("dtype")(spec).release());
  } catch (const py::error_already_set&) {
    usage(what + ": " + py::repr(spec).cast<std::string>() + " is not a dtype (synk supports " +
          supported_dtypes() + ")");
  }
  if (auto t = synk_dtype(d)) return *t;
  usage(what + ": dtype " + py::str(d).cast<std::string>() + " is not supported (synk supports " +
        supported_dtypes() + ")");
}

// --- host arrays ---------------------------------------------------------------------------------------

namespace {

bool is_python_scalar(py::handle v) {
  return PyFloat_CheckExact(v.ptr()) || PyLong_CheckExact(v.ptr()) || PyBool_Check(v.ptr());
}

// Whether a 0-d float array holds a finite value; read directly for f32 and f64, which every call
// with a Python float argument checks.
bool is_finite_scalar(const py::array& a, synk::DType t) {
  if (t == synk::DType::F32) return std::isfinite(*static_cast<const float*>(a.data()));
  if (t == synk::DType::F64) return std::isfinite(*static_cast<const double*>(a.data()));
  return numpy().attr("isfinite")(a).cast<bool>();
}

// A Python scalar (not a numpy scalar) is weakly typed, as in NumPy 2 (NEP 50): it takes the
// target dtype when its kind fits (bool anywhere, int into integers and floats, float into
// floats) and, for integers, its value fits.
std::optional<py::array> weak_scalar(py::handle v, synk::DType target, const std::string& what) {
  bool fits = false;
  if (PyBool_Check(v.ptr())) {
    fits = true;
  } else if (PyLong_CheckExact(v.ptr())) {
    if (synk::is_float(target)) {
      fits = true;
    } else if (synk::is_integer(target)) {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
      const long long lo = target == synk::DType::U8 ? 0 : target == synk::DType::I32 ? INT32_MIN : INT64_MIN;
      const long long hi = target == synk::DType::U8 ? 255 : target == synk::DType::I32 ? INT32_MAX : INT64_MAX;
      fits = overflow == 0 && x >= lo && x <= hi;
      if (!fits)
        usage(what + ": the integer " + py::repr(v).cast<std::string>() + " is out of range for " +
              synk::dtype_name(target) + " [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  } else if (PyFloat_CheckExact(v.ptr())) {
    fits = synk::is_float(target);
  }
  if (!fits) return std::nullopt;
  py::array arr;
  try {
    arr = py::reinterpret_steal<py::array>(numpy().attr("asarray")(v, numpy_dtype(target)).release());
  } catch (const py::error_already_set& e) {
    usage(what + ": " + py::repr(v).cast<std::string>() + " does not fit in " + synk::dtype_name(target) + " (" +
          e.what() + ")");
  }
  // A finite number that becomes inf in a narrower float is changed, not converted.
  const bool finite_before = !PyFloat_CheckExact(v.ptr()) || std::isfinite(PyFloat_AsDouble(v.ptr()));
  if (synk::is_float(target) && finite_before && !is_finite_scalar(arr, target))
    usage(what + ": " + py::repr(v).cast<std::string>() + " does not fit in " + synk::dtype_name(target) +
          " (it would become inf); pass a smaller value or use a wider dtype");
  return arr;
}

}  // namespace

HostArray host_array(py::handle value, std::optional<synk::DType> target, bool force_cast, const std::string& what,
                     bool force_cast_option) {
  py::array arr;
  std::string made_from;   // a value numpy converted (a list, a tuple...): its type, for messages
  if (py::isinstance<DataObj>(value)) {
    arr = py::reinterpret_steal<py::array>(value.cast<DataObj&>().view().release());
  } else if (py::isinstance<py::array>(value)) {
    arr = py::reinterpret_borrow<py::array>(value);
  } else if (value.is_none()) {
    usage(what + ": expected an array, received None");
  } else {
    std::optional<py::array> weak;
    if (target && is_python_scalar(value)) weak = weak_scalar(value, *target, what);
    try {
      arr = weak ? *weak : py::reinterpret_steal<py::array>(numpy().attr("asarray")(value).release());
      if (!weak) made_from = py::str(py::type::of(value).attr("__name__")).cast<std::string>();
    } catch (const py::error_already_set& e) {
      usage(what + ": cannot make an array of " + py::repr(value).cast<std::string>() + " (" + e.what() + ")");
    }
  }
  std::optional<synk::DType> t = synk_dtype(arr.dtype());
  if (!t) {
    const std::string name = py::str(arr.dtype()).cast<std::string>();
    bool convert = false;
    if (target)
      convert = force_cast || numpy().attr("can_cast")(arr.dtype(), numpy_dtype(*target), "safe").cast<bool>();
    if (!convert)
      usage(what + ": dtype " + name + " is not supported (synk supports " + supported_dtypes() + ")" +
            (target ? std::string(" and does not convert safely to ") + synk::dtype_name(*target) +
                          "; convert it with .astype(...) or pass force_cast=True"
                    : "; convert it with .astype(...)"));
    arr = py::reinterpret_steal<py::array>(arr.attr("astype")(numpy_dtype(*target)).release());
    t = target;
  }
  if (target && !force_cast && *t != *target && !synk::can_cast_safely(*t, *target)) {
    const std::string to = py::str(numpy_dtype(*target)).cast<std::string>();
    const std::string received = made_from.empty() ? "an array of " + py::str(arr.dtype()).cast<std::string>()
                                                   : "a " + made_from + ", which numpy makes an array of " +
                                                         py::str(arr.dtype()).cast<std::string>();
    usage(what + ": expected dtype " + synk::dtype_name(*target) + " (or one that converts safely to it), received " +
          received + "; convert it with " +
          (made_from.empty() ? ".astype('" + to + "')" : "numpy.asarray(value, dtype='" + to + "')") +
          (force_cast_option ? " or pass force_cast=True"
                             : " (or pass synk.data(value, dtype='" + to + "', force_cast=True))"));
  }
  // C order, aligned, native byte order (a big-endian array is converted, values unchanged).
  if (arr.dtype().attr("byteorder").cast<std::string>() == ">")
    arr = py::reinterpret_steal<py::array>(arr.attr("astype")(numpy_dtype(*t)).release());
  constexpr int kNeeded = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  if ((py::detail::array_proxy(arr.ptr())->flags & kNeeded) != kNeeded)
    arr = py::reinterpret_steal<py::array>(numpy().attr("ascontiguousarray")(arr).release());
  HostArray h;
  h.ref.data = arr.data();
  h.ref.dtype = *t;
  h.ref.shape.assign(arr.shape(), arr.shape() + arr.ndim());
  h.array = std::move(arr);
  return h;
}

py::array to_numpy(const synk::Array& a) {
  py::array out(numpy_dtype(a.dtype), std::vector<ssize_t>(a.shape.begin(), a.shape.end()));
  if (!a.bytes.empty()) std::memcpy(out.mutable_data(), a.bytes.data(), a.bytes.size());
  return out;
}

py::array to_numpy(synk::Array&& a) {
  // Small results are copied (cheaper than a capsule); large ones hand their buffer over.
  if (a.bytes.size() <= (size_t(64) << 10)) return to_numpy(static_cast<const synk::Array&>(a));
  auto* owned = new synk::Array(std::move(a));
  py::capsule base(owned, [](void* p) { delete static_cast<synk::Array*>(p); });
  return py::array(numpy_dtype(owned->dtype), std::vector<ssize_t>(owned->shape.begin(), owned->shape.end()), {},
                   owned->bytes.data(), base);
}

// --- Data -----------------------------------------------------------------------------------------

// A mapping of a Data's segment of our own (see the top of this file).
struct Mapping {
  void* addr = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (addr) munmap(addr, bytes);
  }
};

namespace {

std::shared_ptr<Mapping> map_segment(const synk::Data& d) {
  const size_t bytes = size_t(d.alloc_size()) * synk::dtype_size(d.dtype());
  const std::string name = "/" + d.segment_name();
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;   // the name is gone (only at exit): the caller falls back
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) return nullptr;
  auto m = std::make_shared<Mapping>();
  m->addr = addr;
  m->bytes = bytes;
  return m;
}

}  // namespace

DataObj::~DataObj() {
  // Dropping the last handle removes the segment and tells the workers to unmap it: API work.
  view_ = py::object();
  ApiLock lock;
  data = synk::Data();
}

py::object DataObj::view() {
  const uint64_t generation = data.generation();
  const std::vector<int64_t>& shape = data.shape();
  if (view_ && generation == view_generation_ && shape == view_shape_) return view_;
  if (!mapping_ || generation != view_generation_) {
    mapping_.reset();
    if (data.alloc_size() > 0) mapping_ = map_segment(data);
  }
  view_generation_ = generation;
  view_shape_ = shape;
  const py::dtype dt = numpy_dtype(data.dtype());
  const std::vector<ssize_t> dims(shape.begin(), shape.end());
  if (data.size() == 0) {
    view_ = py::array(dt, dims);   // nothing to share
  } else if (mapping_) {
    py::capsule base(new std::shared_ptr<Mapping>(mapping_),
                     [](void* p) { delete static_cast<std::shared_ptr<Mapping>*>(p); });
    view_ = py::array(dt, dims, {}, mapping_->addr, base);
  } else {
    // Fallback (the segment's name was already removed): view the Data's own mapping, kept
    // alive by a handle; valid until the Data re-allocates.
    py::capsule base(new synk::Data(data), [](void* p) { delete static_cast<synk::Data*>(p); });
    view_ = py::array(dt, dims, {}, data.raw(), base);
  }
  return view_;
}

namespace {

synk::DataOptions data_options(py::handle name, bool minibatch, bool force_cast, double oversize) {
  synk::DataOptions o;
  if (!name.is_none()) o.name = py::str(name).cast<std::string>();
  o.minibatch = minibatch;
  o.force_cast = force_cast;
  o.oversize = oversize;
  return o;
}

std::vector<int64_t> shape_arg(py::handle shape, const std::string& what) {
  std::vector<int64_t> out;
  if (PyIndex_Check(shape.ptr()) && !PyBool_Check(shape.ptr())) return {int_arg(shape, what + ": shape")};
  if (!PyList_Check(shape.ptr()) && !PyTuple_Check(shape.ptr()))
    usage(what + ": shape must be a sequence of integers, received " + py::repr(shape).cast<std::string>());
  for (py::handle d : shape) out.push_back(int_arg(d, what + ": shape"));
  return out;
}

// synk.data(value=None, var=None, dtype=None, ndim=None, shape=None, minibatch=False,
// force_cast=False, oversize=1, name=None), as in the seeds.
std::unique_ptr<DataObj> make_data(py::handle value, py::handle var, py::handle dtype, py::handle ndim,
                                   py::handle shape, bool minibatch, bool force_cast, double oversize,
                                   py::handle name) {
  const std::string what = "synk.data";
  std::optional<synk::DType> t;
  std::optional<int> nd;
  if (!var.is_none()) {
    if (!py::isinstance<SharedObj>(var))
      usage(what + ": var must be a shared variable (module.shared(name)), received " +
            py::repr(var).cast<std::string>());
    const SharedObj& shared = var.cast<const SharedObj&>();
    t = shared.dtype;
    nd = shared.ndim;
  }
  if (!dtype.is_none()) {
    const synk::DType given = parse_dtype(dtype, what + ": dtype");
    if (t && *t != given)   // var says one dtype and dtype another: which one was meant?
      usage(what + ": dtype " + synk::dtype_name(given) + " differs from the dtype of var '" +
            var.cast<const SharedObj&>().name + "', " + synk::dtype_name(*t) + "; give one of them");
    t = given;
  }
  if (!ndim.is_none()) {
    const int64_t n = int_arg(ndim, what + ": ndim");
    if (n < 0 || n > 16) usage(what + ": ndim must be in [0, 16], received " + std::to_string(n));
    if (nd && *nd != n)
      usage(what + ": ndim " + std::to_string(n) + " differs from var '" + var.cast<const SharedObj&>().name +
            "', which has " + std::to_string(*nd) + " dimensions; give one of them");
    nd = int(n);
  }
  std::optional<std::vector<int64_t>> dims;
  if (!shape.is_none()) dims = shape_arg(shape, what);
  synk::DataOptions o = data_options(name, minibatch, force_cast, oversize);
  if (!value.is_none()) {
    HostArray h = host_array(value, t, force_cast, what + ": value");
    if (nd && *nd != int(h.ref.shape.size()))
      usage(what + ": ndim=" + std::to_string(*nd) + " but the value has " + std::to_string(h.ref.shape.size()) +
            " dimensions");
    if (dims && *dims != h.ref.shape)
      usage(what + ": shape=" + synk::rt::shape_string(*dims) + " but the value has shape " +
            synk::rt::shape_string(h.ref.shape));
    ApiLock lock;
    return std::make_unique<DataObj>(synk::data(h.ref, t.value_or(h.ref.dtype), o));
  }
  if (!t) usage(what + ": without a value, give dtype (or var) to fix the dtype");
  ApiLock lock;
  if (dims) {
    if (nd && *nd != int(dims->size()))
      usage(what + ": ndim=" + std::to_string(*nd) + " does not match shape=" + synk::rt::shape_string(*dims));
    return std::make_unique<DataObj>(synk::data(*t, *dims, o));
  }
  if (!nd) usage(what + ": without a value, give ndim or shape (or var) to fix the number of dimensions");
  return std::make_unique<DataObj>(synk::Data(*t, *nd, o));
}

void set_value(DataObj& self, py::handle value, bool force_cast, double oversize) {
  HostArray h = host_array(value, self.data.dtype(), force_cast, self.data.name().empty()
                                                                     ? std::string("Data.set_value")
                                                                     : "Data '" + self.data.name() + "': set_value");
  ApiLock lock;
  self.data.set_value(h.ref, force_cast, oversize);
}

// What set_value would store for `value`: a numpy array of the Data's dtype (the seeds'
// condition_data). Goes through the same C++ rule by filling a private temporary Data.
py::array condition_data(DataObj& self, py::handle value, bool force_cast) {
  HostArray h = host_array(value, self.data.dtype(), force_cast, "Data.condition_data");
  ApiLock lock;
  synk::Data tmp(self.data.dtype(), self.data.ndim(), {.name = self.data.name()});
  tmp.set_value(h.ref, force_cast);
  return to_numpy(tmp.to_array());
}

std::string data_repr(DataObj& self) {
  const synk::Data& d = self.data;
  std::string s = "synk.Data(";
  if (!d.name().empty()) s += "name='" + d.name() + "', ";
  s += std::string("dtype=") + synk::dtype_name(d.dtype()) + ", shape=" + synk::rt::shape_string(d.shape());
  if (d.minibatch()) s += ", minibatch=True";
  return s + ")";
}

}  // namespace

void init_data(py::module_& m) {
  py::class_<DataObj>(m, "Data",
                      "An array in shared memory that every rank reads (synk.data() makes one). Fixed dtype "
                      "and number of dimensions; .data is a numpy array viewing the shared memory.")
      .def_property_readonly("data", &DataObj::view,
                             "The numpy array viewing the shared memory (no copy). Read and write it in place; "
                             "re-fetch it after set_value/set_shape/set_length/free_memory")
      .def_property_readonly("shape", [](DataObj& s) { return py::tuple(py::cast(s.data.shape())); })
      .def_property_readonly("size", [](DataObj& s) { return s.data.size(); })
      .def_property_readonly("ndim", [](DataObj& s) { return s.data.ndim(); })
      .def_property_readonly("dtype", [](DataObj& s) { return numpy_dtype(s.data.dtype()); })
      .def_property_readonly("alloc_size", [](DataObj& s) { return s.data.alloc_size(); },
                             "Items the shared-memory allocation holds (>= size)")
      .def_property("name", [](DataObj& s) -> py::object {
                      if (s.data.name().empty()) return py::none();
                      return py::str(s.data.name());
                    },
                    [](DataObj& s, py::handle n) { s.data.set_name(n.is_none() ? "" : py::str(n).cast<std::string>()); })
      .def_property("minibatch", [](DataObj& s) { return s.data.minibatch(); },
                    [](DataObj& s, bool b) { s.data.set_minibatch(b); })
      .def("set_value", &set_value, py::arg("value"), py::arg("force_cast") = false, py::arg("oversize") = 1.0,
           "Overwrite shape and contents (same number of dimensions; safe casts only unless force_cast)")
      .def("set_length", [](DataObj& s, int64_t n, double oversize) { ApiLock l; s.data.set_length(n, oversize); },
           py::arg("length"), py::arg("oversize") = 1.0)
      .def("set_shape", [](DataObj& s, py::handle shape, double oversize) {
             std::vector<int64_t> dims = shape_arg(shape, "Data.set_shape");
             ApiLock l;
             s.data.set_shape(dims, oversize);
           }, py::arg("shape"), py::arg("oversize") = 1.0)
      .def("free_memory", [](DataObj& s) { ApiLock l; s.data.free_memory(); },
           "Drop the allocation (the only way to shrink it); the shape becomes all zeros")
      .def("condition_data", &condition_data, py::arg("value"), py::arg("force_cast") = false)
      .def("save_npy", [](DataObj& s, py::handle path_like) {
             const std::string path = path_arg(path_like);
             ApiLock l;
             py::gil_scoped_release release;   // a slow disk or a FIFO blocks this thread only
             s.data.save_npy(path);
           }, py::arg("path"))
      .def_property_readonly("_segment_name", [](DataObj& s) { return s.data.segment_name(); },
                             "The shared-memory segment's name (tests check that none is left behind)")
      .def("__len__", [](DataObj& s) { return s.data.length(); })
      .def("__getitem__", [](DataObj& s, py::handle k) { return s.view().attr("__getitem__")(k); })
      .def("__setitem__", [](DataObj& s, py::handle k, py::handle v) { s.view().attr("__setitem__")(k, v); })
      .def("__array__", [](DataObj& s, py::handle dtype) {
             py::object v = s.view();
             return dtype.is_none() ? v : v.attr("astype")(dtype);
           }, py::arg("dtype") = py::none())
      .def("__repr__", &data_repr);

  m.def("data", &make_data, py::arg("value") = py::none(), py::arg("var") = py::none(), py::arg("dtype") = py::none(),
        py::arg("ndim") = py::none(), py::arg("shape") = py::none(), py::arg("minibatch") = false,
        py::arg("force_cast") = false, py::arg("oversize") = 1.0, py::arg("name") = py::none(),
        "A synk.Data in shared memory: from a value (copied; dtype converts under the safe-cast rule unless "
        "force_cast), or empty from dtype and ndim/shape");
  m.def("load_npy", [](py::handle path_like, py::handle dtype, bool minibatch, bool force_cast, py::handle name) {
          const std::string path = path_arg(path_like);
          synk::DataOptions o = data_options(name, minibatch, force_cast, 1.0);
          std::optional<synk::DType> t;
          if (!dtype.is_none()) t = parse_dtype(dtype, "synk.load_npy: dtype");
          ApiLock lock;
          synk::Data loaded;
          {
            py::gil_scoped_release release;   // a slow disk or a FIFO blocks this thread only
            loaded = t ? synk::load_npy(path, *t, o) : synk::load_npy(path, o);
          }
          return std::make_unique<DataObj>(std::move(loaded));
        }, py::arg("path"), py::arg("dtype") = py::none(), py::arg("minibatch") = false, py::arg("force_cast") = false,
        py::arg("name") = py::none(), "A synk.Data holding an .npy file");
}

}  // namespace synkpy
