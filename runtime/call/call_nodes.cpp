// The call engine's cross-node exchanges (call_nodes.h): what every leader sends, how the
// calls are compared, and how the answers are spread back into global rank order.
#include "runtime/call/call_nodes.h"

#include <regex>

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

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

// What a leader sends, in place of its call's description, for a call it refused before it ran
// (fail_call_before_start): the marker, then its error. Every exchange of a call begins with the
// description, so whichever exchange the other leaders are in reads it.
constexpr std::string_view kRefusedMarker = "\x01refused\x01";

std::vector<int> node_ranks(size_t node) {
  const int R = cluster_local_ranks();
  std::vector<int> ranks;
  for (int lr = 0; lr < R; ++lr) ranks.push_back(int(node) * R + lr);
  return ranks;
}

}  // namespace

[[noreturn]] void throw_refusal(const std::string& fn, size_t node, const std::string& call) {
  throw RankError(fmt::format("{}: node {}'s leader refused this call before it ran, so no node ran it "
                              "(the leaders stay in step): {}",
                              fn, node, call.substr(kRefusedMarker.size())),
                  node_ranks(node));
}

bool is_refusal(const std::string& call) { return call.rfind(kRefusedMarker, 0) == 0; }

std::vector<std::string> exchange_first_fields(const char* what, const std::string& mine) {
  wire::Writer w;
  w.str(mine);
  std::vector<std::string> all;
  cross_node(what, [&] { all = cluster()->all_gather(w.bytes()); });
  std::vector<std::string> fields;
  for (const std::string& message : all) fields.push_back(wire::Reader(message).str());
  return fields;
}
std::string refusal_reason(const std::string& call) { return call.substr(kRefusedMarker.size()); }

namespace {

// A bcast input's values in a call's description (describe_call): its name and a hash of its bytes.
const std::regex& values_token() {
  static const std::regex token(R"( \{'([^']*)' values ([0-9a-f]{16})\})");
  return token;
}

// When calls differ only in their bcast inputs' values: a UsageError naming those inputs.
void require_same_bcast_values(const std::string& fn, const std::vector<std::string>& calls, size_t first) {
  const std::string shape = std::regex_replace(calls[first], values_token(), "");
  std::vector<std::string> names, nodes;
  for (size_t n = first + 1; n < calls.size(); ++n) {
    if (is_refusal(calls[n]) || calls[n] == calls[first]) continue;
    if (std::regex_replace(calls[n], values_token(), "") != shape) return;   // they differ in more
    nodes.push_back(std::to_string(n));
    auto a = std::sregex_iterator(calls[first].begin(), calls[first].end(), values_token());
    auto b = std::sregex_iterator(calls[n].begin(), calls[n].end(), values_token());
    for (; a != std::sregex_iterator() && b != std::sregex_iterator(); ++a, ++b)
      if ((*a)[2] != (*b)[2] && std::find(names.begin(), names.end(), "'" + (*a)[1].str() + "'") == names.end())
        names.push_back("'" + (*a)[1].str() + "'");
  }
  if (nodes.empty()) return;
  throw UsageError(fmt::format("{}: the bcast input{} {} {} other values on node{} {} than on node {} (every node "
                               "must pass the same values to a bcast input; only the batch and batch_s index lists "
                               "are taken from node 0, docs/multinode.md)",
                               fn, names.size() == 1 ? "" : "s", fmt::join(names, ", "),
                               names.size() == 1 ? "has" : "have", nodes.size() == 1 ? "" : "s",
                               fmt::join(nodes, ", "), first));
}

// The calls of every node, compared: a UsageError naming every node whose call differs from node
// 0's. A refusal is not a different call; the caller reports it.
void require_same_calls(const std::string& fn, const std::vector<std::string>& calls) {
  size_t first = 0;
  while (first < calls.size() && is_refusal(calls[first])) ++first;
  if (first == calls.size()) return;
  std::string differ;
  for (size_t n = first + 1; n < calls.size(); ++n)
    if (!is_refusal(calls[n]) && calls[n] != calls[first]) differ += fmt::format("; node {} called {}", n, calls[n]);
  if (!differ.empty()) require_same_bcast_values(fn, calls, first);
  if (!differ.empty())
    throw UsageError(fmt::format("{}: the nodes' leaders made different calls (every node must make the same "
                                 "calls in the same order, docs/multinode.md): node {} called {}{}",
                                 fn, first, calls[first], differ));
}

}  // namespace

std::string describe_call(const CallRequest& req, const FunctionSignature& sig) {
  std::string d = fmt::format("{}(", sig.name);
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const Data& x = req.inputs[i];
    d += fmt::format("{}{}", i ? ", " : "", x.valid() ? dtype_name(x.dtype()) + shape_string(x.shape()) : "no Data");
    // Each leader passes its own bcast values to its ranks: a hash of them makes values that
    // differ between nodes a mismatch like a shape (XXH3 runs faster than the copy the call makes).
    if (x.valid() && i < sig.inputs.size() && sig.inputs[i].role == Role::Broadcast)
      d += fmt::format(" {{'{}' values {:016x}}}", sig.inputs[i].name,
                       XXH3_64bits(x.raw(), size_t(x.size()) * dtype_size(x.dtype())));
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
  if (req.stream.update >= 0) d += ", gradient reduced while it runs";
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

  // The descriptions first: a leader that refused the call sent nothing else.
  std::vector<wire::Reader> readers;
  std::vector<std::string> calls(all.size());
  for (size_t n = 0; n < all.size(); ++n) {
    calls[n] = readers.emplace_back(all[n]).str();
    if (is_refusal(calls[n])) throw_refusal(sig.name, n, calls[n]);
  }
  require_same_calls(sig.name, calls);
  for (size_t n = 0; n < all.size(); ++n) {
    wire::Reader& r = readers[n];
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
  std::vector<wire::Reader> readers;
  for (size_t n = 0; n < all.size(); ++n) calls[n] = readers.emplace_back(all[n]).str();
  require_same_calls(fn, calls);
  for (size_t n = 0; n < all.size(); ++n) {
    for (int lr = 0; lr < R; ++lr) {
      size_t at = n * size_t(R) + size_t(lr);
      if (is_refusal(calls[n])) {   // its ranks failed, with its reason (a RankError naming them)
        g.errors[at] = fmt::format("node {}'s leader refused this call before it ran, so no node ran it: {}", n,
                                   calls[n].substr(kRefusedMarker.size()));
        continue;
      }
      g.errors[at] = readers[n].str();
      g.results[at] = readers[n].str();
    }
  }
  return g;
}

void agree_call_is_ready(const std::string& fn, const std::string& described, const std::string& local_error) {
  Cluster& cl = *cluster();
  wire::Writer w;
  w.str(described);
  w.str(local_error);
  std::vector<std::string> all;
  cross_node("agreeing to run a call", [&] { all = cl.all_gather(w.bytes()); });
  std::vector<std::string> calls(all.size()), errors(all.size());
  for (size_t n = 0; n < all.size(); ++n) {
    wire::Reader r(all[n]);
    calls[n] = r.str();
    if (is_refusal(calls[n])) throw_refusal(fn, n, calls[n]);
    errors[n] = r.str();
  }
  require_same_calls(fn, calls);
  for (size_t n = 0; n < all.size(); ++n)
    if (!errors[n].empty() && int(n) != cl.node())
      throw RankError(fmt::format("{}: node {}'s leader refused this call before it ran, so no node ran it "
                                  "(the leaders stay in step): {}", fn, n, errors[n]), node_ranks(n));
}

void fail_call_before_start(const Error& error) {
  if (!cluster()) throw InternalError("fail_call_before_start without a cluster");
  wire::Writer w;
  w.str(std::string(kRefusedMarker) + fmt::format("node {}: {}", cluster()->node(), error.what()));
  cross_node("refusing a call", [&] { (void)cluster()->all_gather(w.bytes()); });
}

void fail_call_on_every_node(const std::string& fn, const std::string& described, int local_ranks, bool streamed,
                             const UsageError& error) {
  const std::string message = fmt::format("node {}: {}", cluster()->node(), error.what());
  try {
    if (streamed) {
      agree_call_is_ready(fn, described, message);
    } else {
      const std::vector<std::string> errors(size_t(local_ranks), message);
      exchange_outcomes(fn, described, errors, std::vector<std::string>(size_t(local_ranks)));
    }
  } catch (const Error&) {
    // The calls differed too, or another leader refused it as well: this leader's own message says more.
  }
  throw error;
}

}  // namespace synk::rt
