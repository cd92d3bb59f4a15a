// The collectives on shared variables (synk/collectives.h) as the seeds' module-level functions:
// broadcast, scatter, gather, all_gather, reduce, all_reduce, all_reduce_weighted, set_value, get_value, get_lengths,
// get_shapes, plus set_collective_defaults / collective_defaults. Each takes one shared variable
// (then results come back as one array) or a list of them (a list of arrays); values are numpy
// arrays (or anything numpy.asarray accepts) or synk.Data, one per variable. The options of
// synk::CollectiveOptions are keyword arguments: algorithm ("auto", "rsag", "hierarchical",
// "nccl"), num_packs, chunk_bytes, group_size.
#include <cctype>
#include <cstdint>

#include "python/src/common.h"

namespace synkpy {

namespace {

[[noreturn]] void usage(const std::string& message) { throw synk::UsageError(message); }

std::optional<synk::Algorithm> parse_algorithm(py::handle a, const std::string& what) {
  if (a.is_none()) return std::nullopt;
  std::string s = py::str(a).cast<std::string>();
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (s == "auto") return synk::Algorithm::Auto;
  if (s == "rsag") return synk::Algorithm::Rsag;
  if (s == "hierarchical") return synk::Algorithm::Hierarchical;
  if (s == "nccl") return synk::Algorithm::Nccl;
  usage(what + ": algorithm must be one of auto, rsag, hierarchical, nccl; received " + py::repr(a).cast<std::string>());
}

std::optional<int64_t> opt_int(py::handle v, const std::string& what) {
  if (v.is_none()) return std::nullopt;
  return int_arg(v, what);
}

synk::CollectiveOptions options(py::handle algorithm, py::handle num_packs, py::handle chunk_bytes,
                                py::handle group_size, const std::string& what) {
  synk::CollectiveOptions o;
  o.algorithm = parse_algorithm(algorithm, what);
  o.num_packs = opt_int(num_packs, what + ": num_packs");
  o.chunk_bytes = opt_int(chunk_bytes, what + ": chunk_bytes");
  o.group_size = opt_int(group_size, what + ": group_size");
  return o;
}

// Values for the variables of `vars`, kept alive (host arrays are not copied before the
// collective runs). `batch` (set_value) selects rows of every value first, through numpy.
struct ValueList {
  std::vector<HostArray> hosts;
  std::vector<synk::Value> values;
};

ValueList value_list(const VarList& vars, py::handle values, py::handle batch, const std::string& what) {
  std::vector<py::handle> items;
  if (vars.single) {
    items.push_back(values);
  } else if (PyList_Check(values.ptr()) || PyTuple_Check(values.ptr())) {
    for (py::handle v : values) items.push_back(v);
  } else {
    usage(what + ": with a list of " + std::to_string(vars.vars.size()) +
          " shared variables, give a list of as many values, received " + py::repr(values).cast<std::string>());
  }
  if (items.size() != vars.vars.size())
    usage(what + ": " + std::to_string(vars.vars.size()) + " shared variable" + (vars.vars.size() == 1 ? "" : "s") +
          " but " + std::to_string(items.size()) + " value" + (items.size() == 1 ? "" : "s"));
  ValueList out;
  out.hosts.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string where = what + ": value for '" + vars.objs[i]->name + "'";
    if (batch.is_none() && py::isinstance<DataObj>(items[i])) {
      out.values.emplace_back(items[i].cast<DataObj&>().data);
      continue;
    }
    py::object v = py::reinterpret_borrow<py::object>(items[i]);
    if (!batch.is_none()) {
      py::object rows = py::reinterpret_borrow<py::object>(batch);
      if (!PyBool_Check(batch.ptr()) && PyLong_Check(batch.ptr())) rows = py::slice(py::int_(0), batch, py::none());
      if (py::isinstance<DataObj>(batch)) rows = batch.cast<DataObj&>().view();
      py::module_ np = py::module_::import("numpy");
      // The rows as scatter takes them: no negative index (numpy would count it from the end).
      if (!py::isinstance<py::slice>(rows) &&
          np.attr("any")(np.attr("less")(np.attr("asarray")(rows), 0)).cast<bool>())
        usage(where + ": batch: negative indices are not rows (indices must be >= 0), received " +
              py::repr(batch).cast<std::string>());
      try {
        v = np.attr("asarray")(v).attr("__getitem__")(rows);
      } catch (py::error_already_set& e) {
        usage(where + ": batch: " + std::string(e.value() ? py::str(e.value()).cast<std::string>() : e.what()));
      }
    }
    out.hosts.push_back(host_array(v, vars.objs[i]->dtype, false, where, false));
    out.values.emplace_back(out.hosts.back().ref);
  }
  return out;
}

py::object arrays_out(std::vector<synk::Array>&& arrays, bool single) {
  if (single) return to_numpy(std::move(arrays.at(0)));
  py::list out;
  for (synk::Array& a : arrays) out.append(to_numpy(std::move(a)));
  return out;
}

#define SYNK_COLL_OPTION_ARGS                                                                         \
  py::kw_only(), py::arg("algorithm") = py::none(), py::arg("num_packs") = py::none(),                \
      py::arg("chunk_bytes") = py::none(), py::arg("group_size") = py::none()

// Node 0's values of a broadcast or scatter, converted by `convert`; across nodes a failure is
// sent to the other leaders first (they wait for those values), then raised here.
template <class Convert>
ValueList node_zero_values(synk::detail::ValuesFor collective, Convert&& convert) {
  const char* what = collective == synk::detail::ValuesFor::Scatter ? "scatter" : "broadcast";
  try {
    return convert();
  } catch (const synk::Error& e) {
    without_gil([&] { synk::detail::refuse_values_on_node_zero(collective, e.what()); });
    throw;
  } catch (py::error_already_set& e) {
    const std::string message = std::string(what) + ": " + e.what();
    without_gil([&] { synk::detail::refuse_values_on_node_zero(collective, message); });
    throw;
  }
}

void bind_moving(py::module_& m) {
  m.def("broadcast", [](py::handle vars, py::handle values, py::handle a, py::handle p, py::handle c, py::handle g) {
          VarList v = var_list(vars, "broadcast");
          synk::CollectiveOptions o = options(a, p, c, g, "broadcast");
          if (values.is_none()) return without_gil([&] { synk::broadcast(v.vars, o); });
          // Across nodes node 0's values alone count: the others' are not even read, so a value
          // only another node would refuse cannot put the leaders out of step.
          if (synk::node() != 0) return without_gil([&] { synk::broadcast(v.vars, synk::Values(std::vector<synk::Value>{}), o); });
          ValueList vals = node_zero_values(synk::detail::ValuesFor::Broadcast, [&] { return value_list(v, values, py::none(), "broadcast"); });
          without_gil([&] { synk::broadcast(v.vars, vals.values, o); });
        }, py::arg("shared_vars"), py::arg("values") = py::none(), SYNK_COLL_OPTION_ARGS,
        "Every rank holds the master's value (after setting the master's from `values` when given)");
  m.def("scatter", [](py::handle vars, py::handle values, py::handle batch, py::handle a, py::handle p, py::handle c,
                      py::handle g) {
          VarList v = var_list(vars, "scatter");
          synk::CollectiveOptions o = options(a, p, c, g, "scatter");
          if (synk::node() != 0)   // node 0's values and batch alone count (as in broadcast)
            return without_gil([&] { synk::scatter(v.vars, synk::Values(std::vector<synk::Value>{}), synk::Batch{}, o); });
          synk::Batch b;
          ValueList vals = node_zero_values(synk::detail::ValuesFor::Scatter, [&] {
            b = parse_batch(batch, "scatter: batch");
            return value_list(v, values, py::none(), "scatter");
          });
          without_gil([&] { synk::scatter(v.vars, vals.values, b, o); });
        }, py::arg("shared_vars"), py::arg("values"), py::arg("batch") = py::none(), SYNK_COLL_OPTION_ARGS,
        "Rank r holds rows [floor(r*L/N), floor((r+1)*L/N)) of the L rows `batch` selects of each value");
  m.def("gather", [](py::handle vars, int nd_up, py::handle a, py::handle p, py::handle c, py::handle g) {
          VarList v = var_list(vars, "gather");
          synk::CollectiveOptions o = options(a, p, c, g, "gather");
          return arrays_out(without_gil([&] { return synk::gather(v.vars, nd_up, o); }), v.single);
        }, py::arg("shared_vars"), py::arg("nd_up") = 1, SYNK_COLL_OPTION_ARGS,
        "All ranks' values on the master: stacked on a new axis 0 (nd_up=1) or concatenated (nd_up=0)");
  m.def("all_gather", [](py::handle vars, py::handle a, py::handle p, py::handle c, py::handle g) {
          VarList v = var_list(vars, "all_gather");
          synk::CollectiveOptions o = options(a, p, c, g, "all_gather");
          without_gil([&] { synk::all_gather(v.vars, o); });
        }, py::arg("shared_vars"), SYNK_COLL_OPTION_ARGS,
        "Every rank's variable becomes the concatenation along axis 0 of all ranks' values");
}

void bind_reductions(py::module_& m) {
  m.def("reduce", [](py::handle vars, const std::string& op, bool in_place, py::handle a, py::handle p, py::handle c,
                     py::handle g) {
          VarList v = var_list(vars, "reduce");
          synk::CollectiveOptions o = options(a, p, c, g, "reduce");
          return arrays_out(without_gil([&] { return synk::reduce(v.vars, synk::ReduceOp(op), in_place, o); }), v.single);
        }, py::arg("shared_vars"), py::arg("op") = "avg", py::arg("in_place") = true, SYNK_COLL_OPTION_ARGS,
        "The reduction over ranks (avg, sum, prod, max, min) on the master, written into the master's copy when "
        "in_place; returned either way");
  m.def("all_reduce", [](py::handle vars, const std::string& op, py::handle a, py::handle p, py::handle c,
                         py::handle g) {
          VarList v = var_list(vars, "all_reduce");
          synk::CollectiveOptions o = options(a, p, c, g, "all_reduce");
          without_gil([&] { synk::all_reduce(v.vars, synk::ReduceOp(op), o); });
        }, py::arg("shared_vars"), py::arg("op") = "avg", SYNK_COLL_OPTION_ARGS,
        "Every rank's variable becomes the reduction over ranks");
  m.def("all_reduce_weighted", [](py::handle vars, std::vector<double> weights, py::handle a, py::handle p,
                                  py::handle c, py::handle g) {
          VarList v = var_list(vars, "all_reduce_weighted");
          synk::CollectiveOptions o = options(a, p, c, g, "all_reduce_weighted");
          without_gil([&] { synk::all_reduce_weighted(v.vars, weights, o); });
        }, py::arg("shared_vars"), py::arg("weights"), SYNK_COLL_OPTION_ARGS,
        "Every rank's variable becomes sum_r(weights[r] * x_r) / sum(weights): one weight per rank, finite "
        "and >= 0, not all 0; a rank of weight 0 contributes nothing");
}

// The rank argument of set_value / get_value, which come first as in the seeds (`what`: the
// signature, for messages). A shared variable (or a list of them) there, with nothing or the values
// after it, is the usual slip of leaving the rank out: say so, with `example`, the call to write,
// instead of pybind's signature dump.
int rank_arg(py::handle rank, py::handle vars, const std::string& what, const std::string& example) {
  if (py::isinstance<SharedObj>(rank) || PyList_Check(rank.ptr()) || PyTuple_Check(rank.ptr()))
    usage(what + ": the first argument is the rank (an int; 0 is the master), received " +
          py::repr(rank).cast<std::string>() + "; write e.g. " + example);
  const int64_t r = int_arg(rank, what + ": rank");
  if (vars.is_none()) usage(what + ": no shared variables were given after the rank");
  if (r < INT32_MIN || r > INT32_MAX) usage(what + ": rank " + std::to_string(r) + " is out of range");
  return int(r);
}

void bind_one_rank(py::module_& m) {
  m.def("set_value", [](py::handle r, py::handle vars, py::handle values, py::handle batch, py::handle a, py::handle p,
                        py::handle c, py::handle g) {
          const int rank = rank_arg(r, vars, "set_value(rank, shared_vars, values)", "synk.set_value(0, vars, values)");
          if (values.is_none()) usage("set_value(rank, shared_vars, values): no values were given");
          VarList v = var_list(vars, "set_value");
          synk::CollectiveOptions o = options(a, p, c, g, "set_value");
          ValueList vals = value_list(v, values, batch, "set_value");
          without_gil([&] { synk::set_value(rank, v.vars, vals.values, o); });
        }, py::arg("rank"), py::arg("shared_vars") = py::none(), py::arg("values") = py::none(),
        py::arg("batch") = py::none(),
        SYNK_COLL_OPTION_ARGS, "Write one rank's values (rank 0 is the master's own)");
  m.def("get_value", [](py::handle r, py::handle vars, py::handle a, py::handle p, py::handle c, py::handle g) {
          const int rank = rank_arg(r, vars, "get_value(rank, shared_vars)", "synk.get_value(0, vars)");
          VarList v = var_list(vars, "get_value");
          synk::CollectiveOptions o = options(a, p, c, g, "get_value");
          return arrays_out(without_gil([&] { return synk::get_value(rank, v.vars, o); }), v.single);
        }, py::arg("rank"), py::arg("shared_vars") = py::none(), SYNK_COLL_OPTION_ARGS, "Read one rank's values");
  m.def("get_lengths", [](py::handle vars) -> py::object {
          VarList v = var_list(vars, "get_lengths");
          ApiLock lock;
          std::vector<std::vector<int64_t>> lengths = synk::get_lengths(v.vars);
          if (v.single) return py::cast(lengths.at(0));
          return py::cast(lengths);
        }, py::arg("shared_vars"), "Per variable, per rank: the length (axis 0); no communication");
  m.def("get_shapes", [](py::handle vars) -> py::object {
          VarList v = var_list(vars, "get_shapes");
          ApiLock lock;
          auto shapes = synk::get_shapes(v.vars);
          auto as_tuples = [](const std::vector<std::vector<int64_t>>& per_rank) {
            py::list out;
            for (const auto& s : per_rank) out.append(py::tuple(py::cast(s)));
            return out;
          };
          if (v.single) return as_tuples(shapes.at(0));
          py::list out;
          for (const auto& per_rank : shapes) out.append(as_tuples(per_rank));
          return out;
        }, py::arg("shared_vars"), "Per variable, per rank: the shape; no communication");
}

void bind_defaults(py::module_& m) {
  m.def("set_collective_defaults", [](py::handle a, py::handle p, py::handle c, py::handle g) {
          synk::CollectiveOptions o = options(a, p, c, g, "set_collective_defaults");
          ApiLock lock;
          synk::set_collective_defaults(o);
        }, SYNK_COLL_OPTION_ARGS, "Change the defaults of every later collective");
  m.def("collective_defaults", [] {
    synk::CollectiveOptions o;
    {
      ApiLock lock;
      o = synk::collective_defaults();
    }
    py::dict d;
    d["algorithm"] = synk::algorithm_name(o.algorithm.value_or(synk::Algorithm::Auto));
    d["num_packs"] = o.num_packs.value_or(1);
    d["chunk_bytes"] = o.chunk_bytes.value_or(0);
    d["group_size"] = o.group_size.value_or(0);
    return d;
  });
}

}  // namespace

void init_collectives(py::module_& m) {
  bind_moving(m);
  bind_reductions(m);
  bind_one_rank(m);
  bind_defaults(m);
}

}  // namespace synkpy
