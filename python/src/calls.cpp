// Modules, functions, training steps and shared variables: synk.load() / synk.compile() (the JIT
// API, synk/jit.h), Module.function() and calls with the seeds' keyword arguments (batch,
// batch_s, num_slices, output_subset), Function.as_local(), build_inputs(), output_modes,
// update_modes, Module.train_step() (synk::TrainStep, with its run-time hyper-parameters and synk.Schedule)
// and Module.shared() (one shared variable).
//
// A call converts its arguments under the GIL (numpy arrays become references, to be copied into
// temporary shared memory), then runs without the GIL and with the API lock (common.h): the
// temporaries are created, the call runs on every rank, and the temporaries are removed, all
// inside the lock, because creating and removing shared memory talks to the workers.
#include "python/src/common.h"

namespace synkpy {

namespace {

[[noreturn]] void usage(const std::string& message) { throw synk::UsageError(message); }

std::string show(py::handle h) { return py::repr(h).cast<std::string>(); }

PyObject* g_outputs_class = nullptr;   // synk.Outputs (a tuple subclass), set by the package

// --- batch and batch_s --------------------------------------------------------------------------------

bool is_int(py::handle h) { return !PyBool_Check(h.ptr()) && PyIndex_Check(h.ptr()) && !py::isinstance<py::array>(h); }

// start and stop of a slice or range with step 1 (None start: 0); nullopt for other objects.
std::optional<synk::Range> as_range(py::handle h, const std::string& what) {
  bool is_slice = PySlice_Check(h.ptr()), is_range = PyRange_Check(h.ptr());
  if (!is_slice && !is_range) return std::nullopt;
  py::object start = h.attr("start"), stop = h.attr("stop"), step = h.attr("step");
  if (!(step.is_none() || (is_int(step) && int_arg(step, what) == 1)))
    usage(what + ": a slice must have step None or 1, received " + show(h));
  if (stop.is_none() || !is_int(stop) || !(start.is_none() || is_int(start)))
    usage(what + ": a slice needs integer start and stop (start may be omitted), received " + show(h));
  int64_t a = start.is_none() ? 0 : int_arg(start, what), b = int_arg(stop, what);
  if (a < 0 || b < 0) usage(what + ": slice bounds must be >= 0 (no negative indexing), received " + show(h));
  return synk::Range{a, b};
}

// A 1-D integer index list from a list/tuple of ints or a 1-D integer numpy array.
std::optional<std::vector<int64_t>> as_indices(py::handle h, const std::string& what) {
  if (py::isinstance<py::array>(h)) {
    py::array a = py::reinterpret_borrow<py::array>(h);
    const char kind = a.dtype().kind();
    if (a.ndim() != 1 || (kind != 'i' && kind != 'u'))
      usage(what + ": an index array must be 1-D of integers, received " + std::to_string(a.ndim()) +
            "-D of dtype " + py::str(a.dtype()).cast<std::string>() +
            (kind == 'b' ? " (for a mask, pass np.flatnonzero(mask))" : ""));
    if (kind == 'u' && a.itemsize() == 8) {   // past INT64_MAX it would wrap to a negative index
      auto u64 = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
      for (ssize_t i = 0; i < u64.size(); ++i)
        if (u64.data()[i] > uint64_t(INT64_MAX))
          usage(what + ": index " + std::to_string(u64.data()[i]) + " at position " + std::to_string(i) +
                " is out of range (past 2**63 - 1)");
    }
    auto as64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    return std::vector<int64_t>(as64.data(), as64.data() + as64.size());
  }
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(size_t(py::len(h)));
  for (py::handle e : h) {
    if (!is_int(e)) usage(what + ": index lists hold integers, received " + show(e) + " in " + show(h));
    out.push_back(int_arg(e, what));
  }
  return out;
}

}  // namespace

// batch: None, an int k (rows [0, k)), a slice/range with step 1, a list/tuple or 1-D integer
// numpy array of indices, or a 1-D integer synk.Data of indices (read in place by every rank).
synk::Batch parse_batch(py::handle batch, const std::string& what) {
  if (batch.is_none()) return {};
  if (is_int(batch)) return synk::Batch(int_arg(batch, what));
  if (auto r = as_range(batch, what)) return synk::Batch(*r);
  if (py::isinstance<DataObj>(batch)) return synk::Batch(batch.cast<DataObj&>().data);
  if (auto list = as_indices(batch, what)) return synk::Batch(std::move(*list));
  usage(what + ": expected an int, a slice, a list or 1-D integer array of indices, or an index synk.Data; "
        "received " + show(batch));
}

// batch_s: one selection used by every rank (a slice/range, a list or 1-D integer array of
// indices), or a list/tuple of exactly one selection per rank.
synk::BatchS parse_batch_s(py::handle batch_s) {
  const std::string what = "batch_s";
  if (batch_s.is_none()) return {};
  if (auto r = as_range(batch_s, what)) return synk::BatchS(*r);
  if ((PyList_Check(batch_s.ptr()) || PyTuple_Check(batch_s.ptr())) && py::len(batch_s) > 0) {
    py::handle first = batch_s[py::int_(0)];
    if (!is_int(first)) {   // one selection per rank
      std::vector<synk::Rows> per_rank;
      size_t rank = 0;
      for (py::handle sel : batch_s) {
        const std::string where = what + "[" + std::to_string(rank++) + "]";
        if (auto r = as_range(sel, where)) per_rank.emplace_back(*r);
        else if (auto list = as_indices(sel, where)) per_rank.emplace_back(std::move(*list));
        else usage(where + ": expected a slice or a list/array of indices, received " + show(sel));
      }
      return synk::BatchS::per_rank(std::move(per_rank));
    }
  }
  if (auto list = as_indices(batch_s, what)) return synk::BatchS(std::move(*list));
  usage(what + ": expected a slice, a list or 1-D integer array of indices, or a list of one of those per "
        "rank; received " + show(batch_s));
}

namespace {

// --- functions -------------------------------------------------------------------------------------------

// What a call needs to know of a function's signature, read once.
struct Signature {
  std::string name;
  std::vector<std::string> input_names;
  std::vector<synk::DType> input_dtypes;
  std::vector<bool> input_minibatch;
  py::tuple output_names = py::tuple(0);
};

// Takes the API lock (the registry may grow in another thread).
Signature read_signature(const synk::Function& f) {
  ApiLock lock;
  const synk::rt::FunctionSignature& sig = f.signature();
  Signature s;
  s.name = sig.name;
  for (const synk::rt::InputSpec& in : sig.inputs) {
    s.input_names.push_back(in.name);
    s.input_dtypes.push_back(in.dtype);
    s.input_minibatch.push_back(in.role == synk::Role::Minibatch);
  }
  s.output_names = py::tuple(sig.outputs.size());
  for (size_t i = 0; i < sig.outputs.size(); ++i) s.output_names[i] = py::str(sig.outputs[i].name);
  return s;
}

// A call's arguments, converted under the GIL.
struct PreparedCall {
  std::vector<synk::Data> inputs;                  // empty where a host array goes (temps)
  std::vector<std::pair<size_t, HostArray>> temps;
  synk::CallOptions options;

  // Under the API lock: the host arrays copied into shared memory.
  std::vector<synk::Data> materialise(const Signature& sig) {
    std::vector<synk::Data> in = inputs;
    for (auto& [i, h] : temps)
      in[i] = synk::data(h.ref, sig.input_dtypes[i], {.name = sig.input_names[i], .minibatch = sig.input_minibatch[i]});
    return in;
  }
};

void set_input(PreparedCall& p, const Signature& sig, size_t i, py::handle value, std::vector<bool>& given) {
  if (given[i]) usage(sig.name + ": input '" + sig.input_names[i] + "' given twice");
  given[i] = true;
  if (py::isinstance<DataObj>(value)) {
    p.inputs[i] = value.cast<DataObj&>().data;
  } else {
    p.temps.emplace_back(i, host_array(value, sig.input_dtypes[i], false,
                                       sig.name + ": input '" + sig.input_names[i] + "'", false));
  }
}

void set_option(PreparedCall& p, const Signature& sig, const std::string& key, py::handle value) {
  if (key == "batch") {
    p.options.batch = parse_batch(value, "batch");
  } else if (key == "batch_s") {
    p.options.batch_s = parse_batch_s(value);
  } else if (key == "num_slices") {
    if (!is_int(value)) usage("num_slices: expected an integer >= 1, received " + show(value));
    p.options.num_slices = int_arg(value, "num_slices");
  } else if (key == "output_subset") {
    if (value.is_none()) return;
    if (py::isinstance<py::str>(value)) usage("output_subset: expected a list of output names, received the string " +
                                              show(value) + " (write [" + show(value) + "])");
    if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr()))
      usage("output_subset: expected a list of output names, received " + show(value));
    if (py::len(value) == 0)
      usage("output_subset: the list is empty, which selects no output; leave it out (or pass None) for every output");
    for (py::handle n : value) {
      if (!py::isinstance<py::str>(n)) usage("output_subset: expected output names (str), received " + show(n));
      p.options.output_subset.push_back(n.cast<std::string>());
    }
  } else {
    std::string names;
    for (const std::string& n : sig.input_names) names += (names.empty() ? "" : ", ") + n;
    usage(sig.name + ": unknown keyword argument '" + key + "' (inputs: " + (names.empty() ? "none" : names) +
          "; options: batch, batch_s, num_slices, output_subset)");
  }
}

PreparedCall prepare(const Signature& sig, const py::args& args, const py::kwargs& kwargs) {
  PreparedCall p;
  const size_t n = sig.input_names.size();
  if (args.size() > n)
    usage(sig.name + ": takes " + std::to_string(n) + " input" + (n == 1 ? "" : "s") + ", received " +
          std::to_string(args.size()));
  p.inputs.resize(n);
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < args.size(); ++i) set_input(p, sig, i, args[i], given);
  for (auto [k, v] : kwargs) {
    const std::string key = py::str(k).cast<std::string>();
    size_t i = 0;
    while (i < n && sig.input_names[i] != key) ++i;
    if (i < n) set_input(p, sig, i, v, given);
    else set_option(p, sig, key, v);
  }
  for (size_t i = 0; i < n; ++i)
    if (!given[i]) usage(sig.name + ": input '" + sig.input_names[i] + "' is missing");
  return p;
}

// One output: its numpy array; several: a synk.Outputs (a tuple whose items are also reachable by
// name), like a Theano function of one output or of a list of outputs.
py::object wrap_outputs(synk::Outputs&& out) {
  if (out.size() == 1) return to_numpy(std::move(out[0]));
  py::tuple values(out.size()), names(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    values[i] = to_numpy(std::move(out[i]));
    names[i] = py::str(out.names()[i]);
  }
  if (!g_outputs_class) return values;
  return py::reinterpret_borrow<py::object>(g_outputs_class)(values, names);
}

// A call's arguments, checked and converted here before the C++ call: a mistake in them is
// refused on every node too (`refuse`: synk::detail::refuse_call or refuse_step), so that the
// leaders of a multi-node job stay in step, then raised as usual.
template <class Refuse>
PreparedCall prepare_or_refuse(const Signature& sig, const py::args& args, const py::kwargs& kwargs, Refuse refuse) {
  try {
    return prepare(sig, args, kwargs);
  } catch (const synk::Error& e) {
    without_gil([&] { refuse(e); });
    throw;
  } catch (const py::error_already_set& e) {   // a TypeError or ValueError from a conversion
    const synk::UsageError error(sig.name + ": " + e.what());
    without_gil([&] { refuse(error); });
    throw;
  }
}

// Under the API lock, inside the call: the host arrays into shared memory, or the refusal.
template <class Refuse>
std::vector<synk::Data> materialise_or_refuse(PreparedCall& p, const Signature& sig, Refuse refuse) {
  try {
    return p.materialise(sig);
  } catch (const synk::Error& e) {
    refuse(e);
    throw;
  }
}

struct FunctionObj {
  synk::Function fn;
  synk::jit::Module module;
  Signature sig;

  py::object call(const py::args& args, const py::kwargs& kwargs, bool local) const {
    // as_local is this process's alone: a mistake in it concerns no other leader.
    auto refuse = [local](const synk::Error& e) {
      if (!local) synk::detail::refuse_call(e);
    };
    PreparedCall p = prepare_or_refuse(sig, args, kwargs, refuse);
    synk::Outputs out = without_gil([&] {
      std::vector<synk::Data> in = materialise_or_refuse(p, sig, refuse);   // temporaries die inside the lock
      return local ? fn.run_local(in, p.options) : fn(in, p.options);
    });
    return wrap_outputs(std::move(out));
  }
};

std::vector<std::string> mode_names(const std::vector<synk::ReduceMode>& modes) {
  std::vector<std::string> out;
  out.reserve(modes.size());
  for (synk::ReduceMode m : modes) out.push_back(synk::mode_name(m));
  return out;
}

std::string signature_text(const synk::Function& f) {
  ApiLock lock;
  const synk::rt::FunctionSignature& sig = f.signature();
  std::string s = sig.name + "(";
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    s += (i ? ", " : "") + std::string(synk::role_name(sig.inputs[i].role)) + " " + sig.inputs[i].name + ": " +
         synk::rt::spec_string(sig.inputs[i], sig.symbols);
  s += ") -> (";
  for (size_t i = 0; i < sig.outputs.size(); ++i)
    s += (i ? ", " : "") + sig.outputs[i].name + ": " + synk::mode_name(sig.outputs[i].mode);
  return s + ")";
}

// f.build_inputs(*values, force_cast=False, oversize=1.0, minibatch=False, **by_name): one
// synk.Data per input with its declared dtype (one Data when the function has one input).
py::object build_inputs(const FunctionObj& f, const py::args& args, const py::kwargs& kwargs) {
  synk::DataOptions o;
  const Signature& sig = f.sig;
  std::vector<py::handle> values(sig.input_names.size());
  if (args.size() > values.size())
    usage("build_inputs: " + sig.name + " has " + std::to_string(values.size()) + " inputs, received " +
          std::to_string(args.size()) + " values");
  for (size_t i = 0; i < args.size(); ++i) values[i] = args[i];
  for (auto [k, v] : kwargs) {
    const std::string key = py::str(k).cast<std::string>();
    if (key == "force_cast") o.force_cast = bool_arg(v, "build_inputs: force_cast");
    else if (key == "oversize") o.oversize = float_arg(v, "build_inputs: oversize");
    else if (key == "minibatch") o.minibatch = bool_arg(v, "build_inputs: minibatch");
    else {
      auto it = std::find(sig.input_names.begin(), sig.input_names.end(), key);
      if (it == sig.input_names.end()) usage("build_inputs: " + sig.name + " has no input '" + key + "'");
      values[size_t(it - sig.input_names.begin())] = v;
    }
  }
  std::vector<HostArray> hosts;
  std::vector<synk::ArrayRef> refs;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) usage("build_inputs: " + sig.name + ": no value for input '" + sig.input_names[i] + "'");
    hosts.push_back(host_array(values[i], sig.input_dtypes[i], o.force_cast, "build_inputs: input '" + sig.input_names[i] + "'"));
    refs.push_back(hosts.back().ref);
  }
  std::vector<synk::Data> made;
  {
    ApiLock lock;
    made = f.fn.build_inputs(refs, o);
  }
  if (made.size() == 1) return py::cast(std::make_unique<DataObj>(std::move(made[0])));
  py::tuple out(made.size());
  for (size_t i = 0; i < made.size(); ++i) out[i] = py::cast(std::make_unique<DataObj>(std::move(made[i])));
  return out;
}

FunctionObj make_function(const synk::jit::Module& module, synk::Function fn) {
  FunctionObj f{fn, module, Signature{}};
  f.sig = read_signature(fn);
  return f;
}

struct TrainStepObj {
  synk::TrainStep step;
  synk::jit::Module module;
  Signature sig;   // the gradient function's

  py::object call(const py::args& args, const py::kwargs& kwargs) const {
    auto refuse = [this](const synk::Error& e) { synk::detail::refuse_step(step, e); };
    PreparedCall p = prepare_or_refuse(sig, args, kwargs, refuse);
    synk::Outputs out = without_gil([&] {
      std::vector<synk::Data> in = materialise_or_refuse(p, sig, refuse);
      return step(in, p.options);
    });
    return wrap_outputs(std::move(out));
  }

  // The step's first part alone (TrainStep::gradient_call); its C++ outputs are kept for
  // reduce_gradient, which needs each rank's rows.
  py::object gradient_call(const py::args& args, const py::kwargs& kwargs) {
    auto refuse = [](const synk::Error& e) { synk::detail::refuse_call(e); };
    PreparedCall p = prepare_or_refuse(sig, args, kwargs, refuse);
    synk::Outputs out = without_gil([&] {
      std::vector<synk::Data> in = materialise_or_refuse(p, sig, refuse);
      return step.gradient_call(in, p.options);
    });
    pending = std::make_shared<synk::Outputs>(out);
    return wrap_outputs(std::move(out));
  }

  bool reduce_gradient() {
    if (!pending)
      usage("training step '" + step.name() + "': reduce_gradient() reduces what the last gradient_call() computed, "
            "and there is none to reduce (call step.gradient_call(...) first, once per reduce_gradient())");
    std::shared_ptr<synk::Outputs> out = std::move(pending);
    return without_gil([&] { return step.reduce_gradient(*out); });
  }

  std::shared_ptr<synk::Outputs> pending;   // the last gradient_call's outputs, until reduced
};

// --- shared variables ----------------------------------------------------------------------------------

void shared_set_value(const SharedObj& s, py::handle value, py::handle rank, bool force_cast) {
  HostArray a = host_array(value, s.dtype, force_cast, "shared variable '" + s.name + "': set_value");
  if (rank.is_none()) {
    ApiLock lock;
    s.handle().set_value(a.ref, force_cast);
  } else {
    const int r = int(int_arg(rank, "shared variable '" + s.name + "': set_value: rank"));
    without_gil([&] { s.handle().set_value(r, a.ref, force_cast); });
  }
}

void shared_set_value_all(const SharedObj& s, py::handle value, bool force_cast) {
  HostArray a = host_array(value, s.dtype, force_cast, "shared variable '" + s.name + "': set_value_all");
  without_gil([&] { s.handle().set_value_all(a.ref, force_cast); });
}


void bind_functions(py::module_& m) {
  py::class_<FunctionObj>(m, "Function", "A function of a compiled module, called data-parallel on every rank")
      .def("__call__", [](const FunctionObj& f, py::args a, py::kwargs k) { return f.call(a, k, false); },
           "f(*inputs, batch=None, batch_s=None, num_slices=1, output_subset=None, **inputs_by_name): run on "
           "every rank and reduce the outputs (one output: its array; several: a synk.Outputs tuple)")
      .def("as_local", [](const FunctionObj& f, py::args a, py::kwargs k) { return f.call(a, k, true); },
           "The same call on this process alone, as one device (updates change the master's copies only)")
      .def("build_inputs", &build_inputs, "One synk.Data per input, with the declared dtypes")
      .def_property_readonly("name", [](const FunctionObj& f) { return f.sig.name; })
      .def_property_readonly("input_names", [](const FunctionObj& f) { return f.sig.input_names; })
      .def_property_readonly("output_names", [](const FunctionObj& f) { return f.sig.output_names; })
      .def_property_readonly("output_modes", [](const FunctionObj& f) { ApiLock l; return mode_names(f.fn.output_modes()); })
      .def_property_readonly("update_modes", [](const FunctionObj& f) { ApiLock l; return mode_names(f.fn.update_modes()); })
      .def_property_readonly("signature", [](const FunctionObj& f) { return signature_text(f.fn); })
      .def_property("seed", [](const FunctionObj& f) { ApiLock l; return f.fn.seed(); },
                    [](const FunctionObj& f, uint64_t seed) { ApiLock l; f.fn.set_seed(seed); },
                    "The seed of its random ops (dropout, uniform, normal...): a draw depends on (seed, step, the op, "
                    "the row, the element)")
      .def_property("step", [](const FunctionObj& f) { ApiLock l; return f.fn.step(); },
                    [](const FunctionObj& f, uint64_t step) { ApiLock l; f.fn.set_step(step); },
                    "The step of its random ops: every successful call of a function with updates advances it by one")
      .def("__eq__", [](const FunctionObj& a, py::handle b) -> py::object {
             if (!py::isinstance<FunctionObj>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             return py::bool_(a.fn.id() == b.cast<const FunctionObj&>().fn.id());
           })
      .def("__hash__", [](const FunctionObj& f) { return std::hash<int64_t>()(f.fn.id()); })
      .def("__repr__", [](const FunctionObj& f) { return "<synk.Function " + signature_text(f.fn) + ">"; });

  py::class_<TrainStepObj>(m, "TrainStep",
                           "One training step as one call: gradient function, reduction of the flat gradient weighted by each "
                           "rank's rows, update function (synk::TrainStep)")
      .def("__call__", [](const TrainStepObj& s, py::args a, py::kwargs k) { return s.call(a, k); })
      .def("gradient_call", [](TrainStepObj& s, py::args a, py::kwargs k) { return s.gradient_call(a, k); },
           "The step's first part alone: the gradient function's call, as the step makes it (no schedule is applied, "
           "and the step index does not move)")
      .def("reduce_gradient", [](TrainStepObj& s) { return s.reduce_gradient(); },
           "The second part: reduces the gradient of the last gradient_call, weighted by each rank's rows; False when "
           "that call selected no rows (then skip the update, step.update())")
      .def("build_inputs", [](const TrainStepObj& s, py::args a, py::kwargs k) {
             return build_inputs(make_function(s.module, s.step.gradient()), a, k);
           })
      .def_property_readonly("name", [](const TrainStepObj& s) { return s.step.name(); })
      .def_property("num_packs", [](const TrainStepObj& s) { return s.step.num_packs(); },
                    [](TrainStepObj& s, int64_t n) { s.step.set_num_packs(n); })
      .def_property("deterministic", [](const TrainStepObj& s) { return s.step.deterministic(); },
                    [](TrainStepObj& s, py::handle rows) { s.step.set_deterministic(int_arg(rows, "deterministic")); },
                    "micro-shard rows of a deterministic step (the same bits on any number of ranks); 0: off")
      .def_property("overlap", [](const TrainStepObj& s) { return s.step.overlap(); },
                    [](TrainStepObj& s, py::handle on) {
                      s.step.set_overlap(bool_arg(on, "overlap"), s.step.bucket_bytes());
                    },
                    "average the gradient in buckets during the backward pass (docs/training.md, \"Overlap\")")
      .def_property("bucket_bytes", [](const TrainStepObj& s) { return s.step.bucket_bytes(); },
                    [](TrainStepObj& s, py::handle bytes) {
                      s.step.set_overlap(s.step.overlap(), int_arg(bytes, "bucket_bytes"));
                    },
                    "bucket size of overlap in bytes; 0: the default (1 MiB)")
      .def_property_readonly("gradient", [](const TrainStepObj& s) { return make_function(s.module, s.step.gradient()); })
      .def_property_readonly("update", [](const TrainStepObj& s) { return make_function(s.module, s.step.update()); })
      .def_property_readonly("gradient_var",
                             [](const TrainStepObj& s) { return make_shared_obj(s.module, s.step.gradient_var().name()); })
      .def("set_hyper", [](TrainStepObj& s, const std::string& keyword, double value) {
             without_gil([&] { s.step.set_hyper(keyword, value); });
           }, py::arg("keyword"), py::arg("value"),
           "Sets one hyper-parameter of the optimizer (lr, momentum, beta1, ..., clip_norm) on every rank")
      .def("set_lr", [](TrainStepObj& s, double value) { without_gil([&] { s.step.set_lr(value); }); },
           py::arg("value"), "set_hyper('lr', value)")
      .def("hyper", [](const TrainStepObj& s, const std::string& keyword) {
             return without_gil([&] { return s.step.hyper(keyword); });
           }, py::arg("keyword"), "The current value of one hyper-parameter (the master's)")
      .def_property_readonly("hyper_names", [](const TrainStepObj& s) {
             std::vector<std::string> names;
             for (const synk::HyperParameter& h : s.step.hyper_parameters()) names.push_back(h.keyword);
             return names;
           })
      .def("set_schedule", [](TrainStepObj& s, const synk::Schedule& schedule) { s.step.set_schedule(schedule); },
           py::arg("schedule"), "Every later call sets lr = schedule(step_index) first")
      .def("clear_schedule", [](TrainStepObj& s) { s.step.clear_schedule(); })
      .def_property("step_index", [](const TrainStepObj& s) { return s.step.step_index(); },
                    [](TrainStepObj& s, int64_t i) { s.step.set_step_index(i); })
      .def("__repr__", [](const TrainStepObj& s) { return "<synk.TrainStep '" + s.step.name() + "'>"; });

  py::class_<synk::Schedule>(m, "Schedule", "A learning-rate schedule for TrainStep.set_schedule (synk::Schedule)")
      .def_static("constant", &synk::Schedule::constant, py::arg("lr"))
      .def_static("step_decay", &synk::Schedule::step_decay, py::arg("lr"), py::arg("every"), py::arg("gamma"))
      .def_static("cosine", &synk::Schedule::cosine, py::arg("lr"), py::arg("steps"), py::arg("min_lr") = 0.0)
      .def("with_warmup", &synk::Schedule::with_warmup, py::arg("steps"))
      .def("__call__", &synk::Schedule::operator(), py::arg("step"))
      .def("__repr__", [](const synk::Schedule& s) { return "<synk.Schedule " + s.describe() + ">"; });

  py::class_<SharedObj>(m, "Shared", "One shared variable of a module: every rank holds its own copy")
      .def_property_readonly("name", [](const SharedObj& s) { return s.name; })
      .def_property_readonly("dtype", [](const SharedObj& s) { return numpy_dtype(s.dtype); })
      .def_property_readonly("ndim", [](const SharedObj& s) { return s.ndim; })
      .def_property_readonly("sliceable", [](const SharedObj& s) { return s.sliceable; })
      .def_property_readonly("shape", [](const SharedObj& s) {
        ApiLock lock;
        return py::tuple(py::cast(synk::get_shapes(s.var).at(0)));
      }, "The master's shape")
      .def("get_value", [](const SharedObj& s, int rank) {
             return to_numpy(without_gil([&] { return s.handle().get_value(rank); }));
           }, py::arg("rank") = 0, "A copy of the master's (or one rank's) value")
      .def("set_value", &shared_set_value, py::arg("value"), py::arg("rank") = py::none(),
           py::arg("force_cast") = false,
           "Overwrite the master's (or one rank's) copy; after fork the master's only (see set_value_all)")
      .def("set_value_all", &shared_set_value_all, py::arg("value"), py::arg("force_cast") = false,
           "Overwrite every rank's copy (the master's, then one broadcast)")
      .def("__eq__", [](const SharedObj& a, py::handle b) -> py::object {
             if (!py::isinstance<SharedObj>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             return py::bool_(a.var == b.cast<const SharedObj&>().var);
           })
      .def("__hash__", [](const SharedObj& s) {
             return std::hash<int64_t>()((int64_t(s.var.module()) << 32) | uint32_t(s.var.index()));
           })
      .def("__repr__", [](const SharedObj& s) { return "synk.Shared('" + s.name + "': " + s.spec_text + ")"; });
}

// --- modules -------------------------------------------------------------------------------------------

synk::jit::CompileOptions compile_options(py::handle base_dir, bool use_disk_cache) {
  synk::jit::CompileOptions o;
  if (!base_dir.is_none()) o.base_dir = path_arg(base_dir);
  o.use_disk_cache = use_disk_cache;
  return o;
}

void bind_modules(py::module_& m) {
  using synk::jit::Module;
  py::class_<Module>(m, "Module", "A compiled .synk module: its functions, training steps and shared variables")
      .def("function", [](Module& mod, const std::string& name) {
             synk::Function fn = without_gil([&] { return mod.function(name); });
             return make_function(mod, fn);
           }, py::arg("name"), "Function `name` (compiled on first use; UsageError for an unknown name)")
      .def("train_step", [](Module& mod, const std::string& name, int64_t num_packs) {
             synk::TrainStep step = without_gil([&] { return mod.train_step(name, num_packs); });
             TrainStepObj s{step, mod, read_signature(step.gradient())};
             s.sig.name = name;
             return s;
           }, py::arg("name"), py::arg("num_packs") = 0,
           "The training step of function `name` (one with `minimize ... using opt`)")
      .def("shared", &make_shared_obj, py::arg("name"))
      // Two handles of one module (load_library of one path twice) are equal: they share the
      // functions and shared variables.
      .def("__eq__", [](const Module& a, py::handle b) -> py::object {
             if (!py::isinstance<Module>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             return py::bool_(a.runtime_module().id() == b.cast<const Module&>().runtime_module().id());
           })
      .def("__hash__", [](const Module& mod) { return py::hash(py::int_(mod.runtime_module().id())); })
      .def("compile_all", [](Module& mod) { without_gil([&] { mod.compile_all(); }); })
      .def("save_checkpoint", [](Module& mod, py::handle dir, py::handle metadata) {
             synk::CheckpointMetadata md;
             if (!metadata.is_none() && !py::isinstance<py::dict>(metadata))
               usage("save_checkpoint: metadata must be a dict (or None), received " + show(metadata));
             if (!metadata.is_none())
               for (auto [key, value] : metadata.cast<py::dict>()) md[py::str(key)] = py::str(value);
             const std::string path = path_arg(dir);
             without_gil([&] { mod.save_checkpoint(path, md); });
           }, py::arg("dir"), py::arg("metadata") = py::none(),
           "Save every shared variable but the sliceable ones and the functions' random state into the directory "
           "`dir` (atomically); `metadata`: a dict, stored with str() of each key and value")
      .def("load_checkpoint", [](Module& mod, py::handle dir) {
             const std::string path = path_arg(dir);
             return without_gil([&] { return mod.load_checkpoint(path); });
           }, py::arg("dir"), "Restore a checkpoint on every rank; returns its metadata (a dict of str)")
      .def_property_readonly("function_names", [](const Module& mod) { ApiLock l; return mod.function_names(); })
      .def_property_readonly("shared_names", [](const Module& mod) { ApiLock l; return mod.shared_names(); })
      .def_property_readonly("train_step_names", [](const Module& mod) { ApiLock l; return mod.train_step_names(); })
      .def_property_readonly("ir_text", [](const Module& mod) { ApiLock l; return mod.ir_text(); })
      .def("__repr__", [](const Module& mod) {
        ApiLock lock;
        std::string s = "<synk.Module functions:";
        for (const std::string& n : mod.function_names()) s += " " + n;
        return s + ">";
      });

  m.def("checkpoint_metadata", [](py::handle dir) {
          const std::string path = path_arg(dir);
          return without_gil([&] { return synk::checkpoint_metadata(path); });
        }, py::arg("dir"), "The metadata a checkpoint was saved with (a dict of str), without loading it");
  m.def("load", [](py::handle path, py::handle base_dir, bool use_disk_cache) {
          std::string p = path_arg(path);
          synk::jit::CompileOptions o = compile_options(base_dir, use_disk_cache);
          return without_gil([&] { return synk::jit::load_file(p, o); });
        }, py::arg("path"), py::arg("base_dir") = py::none(), py::arg("use_disk_cache") = true,
        "Compile a .synk file (UserError with every diagnostic when it is wrong)");
  m.def("compile", [](const std::string& text, py::handle base_dir, const std::string& name, bool use_disk_cache) {
          synk::jit::CompileOptions o = compile_options(base_dir, use_disk_cache);
          return without_gil([&] { return synk::jit::compile_string(text, o, name); });
        }, py::arg("text"), py::arg("base_dir") = py::none(), py::arg("name") = "<string>",
        py::arg("use_disk_cache") = true,
        "Compile .synk source text; relative load() paths resolve against base_dir (default: the current "
        "directory); messages quote `name`");
  m.def("load_library", [](py::handle path) {
          std::string p = path_arg(path);
          return without_gil([&] { return synk::jit::load_library(p); });
        }, py::arg("path"),
        "A module compiled ahead of time by `synkc MODEL.synk -o libMODEL.so` (nothing is compiled at run time; "
        "loading it again returns the same module)");
  m.def("_set_outputs_class", [](py::handle cls) {
    Py_XINCREF(cls.ptr());   // kept for the life of the process
    g_outputs_class = cls.ptr();
  });
}

}  // namespace

SharedObj make_shared_obj(const synk::jit::Module& module, const std::string& name) {
  ApiLock lock;
  synk::jit::Shared h = module.shared(name);   // UsageError listing the names when unknown
  const synk::rt::SharedSpec& spec = h.spec();
  SharedObj s{module, name, h.var(), spec.dtype, int(spec.dims.size()), spec.sliceable, ""};
  s.spec_text = synk::rt::spec_string(spec, module.runtime_module().spec().symbols) + (spec.sliceable ? " sliceable" : "");
  return s;
}

VarList var_list(py::handle vars, const std::string& what) {
  VarList out;
  auto add = [&](py::handle h) {
    if (!py::isinstance<SharedObj>(h))
      usage(what + ": expected a shared variable (module.shared(name)) or a list of them, received " + show(h));
    const SharedObj& s = h.cast<const SharedObj&>();
    out.objs.push_back(&s);
    out.vars.push_back(s.var);
  };
  if (py::isinstance<SharedObj>(vars)) {
    out.single = true;
    add(vars);
  } else if (PyList_Check(vars.ptr()) || PyTuple_Check(vars.ptr())) {
    for (py::handle h : vars) add(h);
  } else {
    usage(what + ": expected a shared variable (module.shared(name)) or a list of them, received " + show(vars));
  }
  return out;
}

void init_calls(py::module_& m) {
  bind_functions(m);
  bind_modules(m);
}

}  // namespace synkpy
