// The call engine's cross-node exchanges (call_nodes.h): what every leader sends, how the
// calls are compared, and how the answers are spread back into global rank order.
#include "runtime/call/call_nodes.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "base/wire.h"
#include "runtime/node/cluster.h"

namespace synk::rt {
namespace {

const char* kind_name(RowSelection::Kind k) {
  switch (k) {
    case RowSelection::Kind::All: return "all rows";
    case RowSelection::Kind::Count: return "count";
    case RowSelection::Kind::Range: return "range";
    case RowSelection::Kind::List: return "index list";
  }
  return "?";
}

std::string describe_selection(const RowSelection& s, int64_t list_length) {
  switch (s.kind) {
    case RowSelection::Kind::All: return "all rows";
    case RowSelection::Kind::Count: return fmt::format("count {}", s.stop);
    case RowSelection::Kind::Range: return fmt::format("range [{}, {})", s.start, s.stop);
    case RowSelection::Kind::List: return fmt::format("{} of {} rows", kind_name(s.kind), list_length);
  }
  return "?";
}

std::vector<int64_t> batch_as_list(const CallRequest& req) {
  if (!req.batch_data.valid()) return req.batch_list;
  const Data& b = req.batch_data;
  IndexSource src{b.raw(), b.dtype(), b.length()};
  std::vector<int64_t> list(size_t(b.length()));
  for (int64_t i = 0; i < b.length(); ++i) list[size_t(i)] = src.at(i);
  return list;
}

// The calls of every node, compared: a UsageError naming every node whose call differs from node 0's.
void require_same_calls(const std::string& fn, const std::vector<std::string>& calls) {
  std::string differ;
  for (size_t n = 1; n < calls.size(); ++n)
    if (calls[n] != calls[0]) differ += fmt::format("; node {} called {}", n, calls[n]);
  if (!differ.empty())
    throw UsageError(fmt::format("{}: the nodes' leaders made different calls (every node must make the same "
                                 "calls in the same order, docs/multinode.md): node 0 called {}{}",
                                 fn, calls[0], differ));
}

}  // namespace

std::string describe_call(const CallRequest& req, const FunctionSignature& sig) {
  std::string d = fmt::format("{}(", sig.name);
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const Data& x = req.inputs[i];
    d += fmt::format("{}{}", i ? ", " : "", x.valid() ? dtype_name(x.dtype()) + shape_string(x.shape()) : "no Data");
  }
  int64_t batch_length = req.batch_data.valid() ? req.batch_data.length() : int64_t(req.batch_list.size());
  d += fmt::format("), batch: {}", describe_selection(req.batch, batch_length));
  if (!req.batch_s.empty()) {
    d += ", batch_s:";
    for (size_t k = 0, list = 0; k < req.batch_s.size(); ++k) {
      int64_t len = req.batch_s[k].kind == RowSelection::Kind::List ? int64_t(req.batch_s_lists.at(list++).size()) : 0;
      d += " " + describe_selection(req.batch_s[k], len);
    }
  }
  d += fmt::format(", num_slices {}", req.num_slices);
  if (req.micro_shard_rows) d += fmt::format(", deterministic shards of {} rows", req.micro_shard_rows);
  if (!req.output_subset.empty()) d += fmt::format(", outputs {}", fmt::join(req.output_subset, ","));
  return d;
}

bool needs_agreement_first(const CallRequest& req, const FunctionSignature& sig, const ModuleSpec& module) {
  if (req.batch.kind == RowSelection::Kind::List || !req.batch_s_lists.empty()) return true;
  for (int32_t var : sig.shareds_read)
    if (module.shareds[size_t(var)].sliceable) return true;
  return false;
}

void agree_on_call(CallRequest& req, const FunctionSignature& sig, const ModuleSpec& module,
                   const std::function<const std::vector<int64_t>&(int, int32_t)>& local_shape,
                   RemoteShapes* remote) {
  Cluster& cl = *cluster();
  const int R = cluster_local_ranks();
  std::vector<int32_t> sliceable;
  for (int32_t var : sig.shareds_read)
    if (module.shareds[size_t(var)].sliceable) sliceable.push_back(var);
  const bool lists = req.batch.kind == RowSelection::Kind::List || !req.batch_s_lists.empty();
  wire::Writer w;
  w.str(describe_call(req, sig));
  for (int r = 0; r < R; ++r)
    for (int32_t var : sliceable) w.vec(local_shape(r, var));
  if (cl.node() == 0 && lists) {
    w.vec(batch_as_list(req));
    w.pod<uint32_t>(uint32_t(req.batch_s_lists.size()));
    for (const auto& l : req.batch_s_lists) w.vec(l);
  }
  std::vector<std::string> all;
  cross_node("agreeing on a call", [&] { all = cl.all_gather(w.bytes()); });

  std::vector<std::string> calls(all.size());
  for (size_t n = 0; n < all.size(); ++n) {
    wire::Reader r(all[n]);
    calls[n] = r.str();
    for (int lr = 0; lr < R; ++lr)
      for (int32_t var : sliceable) {
        std::vector<int64_t> shape = r.vec<int64_t>();
        if (int(n) != cl.node()) (*remote)[{int(n) * R + lr, var}] = std::move(shape);
      }
    if (n == 0 && lists && cl.node() != 0) {
      req.batch_list = r.vec<int64_t>();
      req.batch_data = Data();
      uint32_t count = r.pod<uint32_t>();
      if (count != req.batch_s_lists.size()) throw InternalError("agree_on_call: batch_s lists differ in number");
      for (auto& l : req.batch_s_lists) l = r.vec<int64_t>();
    }
  }
  require_same_calls(sig.name, calls);
  if (lists && cl.node() == 0 && req.batch_data.valid()) {
    req.batch_list = batch_as_list(req);   // the same path as on the other nodes
    req.batch_data = Data();
  }
}

GlobalOutcome exchange_outcomes(const std::string& fn, const std::string& described,
                                const std::vector<std::string>& local_errors, std::vector<std::string> local_results) {
  Cluster& cl = *cluster();
  const int R = cluster_local_ranks();
  wire::Writer w;
  w.str(described);
  for (int r = 0; r < R; ++r) {
    w.str(local_errors.at(size_t(r)));
    w.str(local_errors.at(size_t(r)).empty() ? local_results.at(size_t(r)) : std::string());
  }
  std::vector<std::string> all;
  cross_node("exchanging call results", [&] { all = cl.all_gather(w.bytes()); });
  GlobalOutcome g;
  g.errors.resize(size_t(R) * all.size());
  g.results.resize(g.errors.size());
  std::vector<std::string> calls(all.size());
  for (size_t n = 0; n < all.size(); ++n) {
    wire::Reader r(all[n]);
    calls[n] = r.str();
    for (int lr = 0; lr < R; ++lr) {
      size_t at = n * size_t(R) + size_t(lr);
      g.errors[at] = r.str();
      g.results[at] = r.str();
    }
  }
  require_same_calls(fn, calls);
  return g;
}

void fail_call_on_every_node(const std::string& fn, const std::string& described, int local_ranks,
                             const UsageError& error) {
  const std::string message = fmt::format("node {}: {}", cluster()->node(), error.what());
  const std::vector<std::string> errors(size_t(local_ranks), message);
  try {
    exchange_outcomes(fn, described, errors, std::vector<std::string>(size_t(local_ranks)));
  } catch (const UsageError&) {
    // The calls differed too (the description shows the mistake): this leader's own message says more.
  }
  throw error;
}

}  // namespace synk::rt
