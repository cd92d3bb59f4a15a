// The inline all_reduce (inline_reduce.h): the command's payload is a 12-byte header and the
// master's value; a worker's inline results are its own value.
#include "runtime/coll/inline_reduce.h"

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/errors.h"
#include "runtime/call/registry.h"
#include "runtime/coll/staging.h"
#include "runtime/data/dtype.h"
#include "runtime/trace/trace.h"

namespace synk::rt {

namespace {

struct Header {
  int32_t module;
  int32_t var;
  uint8_t op;
  uint8_t dtype;
  uint16_t count;
};
static_assert(sizeof(Header) == 12 && sizeof(Header) + kInlineAllReduceBytes <= kInlinePayloadBytes);
static_assert(kInlineAllReduceBytes <= kInlineResultBytes);

// Where every rank's value lies, in rank order, as reduce_sources takes them.
using Sources = std::array<const std::byte*, 64>;

// This rank's variable, checked against the master's record.
Array& own_value(RankContext& ctx, const Header& h, const char* what) {
  Array& value = module_on_rank(ctx, h.module).values.at(size_t(h.var));
  if (value.dtype != DType(h.dtype) || size_t(value.size()) != h.count)
    throw InternalError(fmt::format("{}: shared variable '{}' on rank {} holds {} {} values, but the master "
                                    "recorded {} {}", what,
                                    module_on_rank(ctx, h.module).spec.shareds.at(size_t(h.var)).name, ctx.rank(),
                                    value.size(), dtype_name(value.dtype), h.count, dtype_name(DType(h.dtype))));
  return value;
}

void reduce_into(const Header& h, const std::byte* const* sources, int n, Array& value) {
  const CollOp op = CollOp(h.op);
  reduce_sources(DType(h.dtype), op, sources, n, value.bytes.data(), h.count, op == CollOp::Avg ? n : 0);
}

void run_inline_all_reduce_rank(RankContext& ctx, std::string_view payload) {
  Header h;
  if (payload.size() < sizeof h) throw InternalError("inline all_reduce: short payload");
  std::memcpy(&h, payload.data(), sizeof h);
  trace::Span span(trace::Category::Collective, "all_reduce");
  if (span.active()) span.set_detail("1 variable, inline", int64_t(h.count * dtype_size(DType(h.dtype))));
  Array& value = own_value(ctx, h, "all_reduce");
  const size_t bytes = size_t(h.count) * dtype_size(DType(h.dtype));
  const int n = ctx.size(), me = ctx.rank();
  std::span<std::byte> mine = ctx.inline_results();
  Sources sources{};
  sources[0] = reinterpret_cast<const std::byte*>(payload.data()) + sizeof h;
  if (n == 2) {
    // Nobody but the master needs our value: keep it apart until the result is written, so that
    // the line the master polls changes once, right before the completion.
    std::array<std::byte, kInlineAllReduceBytes> own;
    std::memcpy(own.data(), value.bytes.data(), bytes);
    sources[1] = own.data();
    reduce_into(h, sources.data(), n, value);
    std::memcpy(mine.data(), own.data(), bytes);
    return;
  }
  std::memcpy(mine.data(), value.bytes.data(), bytes);
  ctx.publish_inline();
  for (int r = 1; r < n; ++r) {
    if (r == me) {
      sources[size_t(r)] = mine.data();
      continue;
    }
    std::span<const std::byte> theirs = ctx.peer_inline(r);
    if (theirs.empty()) throw CollectiveAborted(r);
    sources[size_t(r)] = theirs.data();
  }
  reduce_into(h, sources.data(), n, value);
}

const CommandKind kInlineAllReduceCommand = register_command("inline all_reduce", run_inline_all_reduce_rank);

void run_inline_broadcast_rank(RankContext& ctx, std::string_view payload) {
  Header h;
  if (payload.size() < sizeof h) throw InternalError("inline broadcast: short payload");
  std::memcpy(&h, payload.data(), sizeof h);
  const size_t bytes = size_t(h.count) * dtype_size(DType(h.dtype));
  trace::Span span(trace::Category::Collective, "broadcast");
  if (span.active()) span.set_detail("1 variable, inline", int64_t(bytes));
  std::memcpy(own_value(ctx, h, "broadcast").bytes.data(), payload.data() + sizeof h, bytes);
}

const CommandKind kInlineBroadcastCommand = register_command("inline broadcast", run_inline_broadcast_rank);

// The command with the master's value after the header; a RankError naming the ranks that failed
// (not those that only abandoned because another failed).
void run_inline(ProcessGroup& group, CommandKind command, const InlineCollective& request, const Array& value,
                const char* what, std::array<char, sizeof(Header) + kInlineAllReduceBytes>& payload) {
  const size_t bytes = size_t(request.count) * dtype_size(request.dtype);
  const int n = group.size();
  if (n < 2 || n > int(std::tuple_size_v<Sources>) || bytes > kInlineAllReduceBytes || value.bytes.size() != bytes)
    throw InternalError(fmt::format("{}: the inline path takes 2 to {} ranks and at most {} bytes, not {} ranks and {} "
                                    "bytes", what, std::tuple_size_v<Sources>, kInlineAllReduceBytes, n, bytes));
  const Header h{request.module, request.var, uint8_t(request.op), uint8_t(request.dtype), request.count};
  std::memcpy(payload.data(), &h, sizeof h);
  std::memcpy(payload.data() + sizeof h, value.bytes.data(), bytes);
  const std::vector<std::string>& errors = group.run(command, {payload.data(), sizeof h + bytes}, nullptr);
  bool real_error = false;
  for (const std::string& m : errors) real_error |= !m.empty() && !is_abandon_message(m);
  std::vector<int> ranks;
  std::vector<std::string> parts;
  for (size_t r = 1; r < errors.size(); ++r)
    if (!errors[r].empty() && !(real_error && is_abandon_message(errors[r]))) {
      ranks.push_back(int(r));
      parts.push_back(fmt::format("rank {}: {}", r, errors[r]));
    }
  if (!ranks.empty()) throw RankError(fmt::format("{} failed on {}", what, fmt::join(parts, "; ")), ranks);
}

}  // namespace

void inline_all_reduce(ProcessGroup& group, const InlineCollective& request, const char* what) {
  Array& value = module_on_rank(group.master_context(), request.module).values.at(size_t(request.var));
  std::array<char, sizeof(Header) + kInlineAllReduceBytes> payload;
  run_inline(group, kInlineAllReduceCommand, request, value, what, payload);
  trace::Span span(trace::Category::Collective, "all_reduce");
  if (span.active()) span.set_detail("1 variable, inline", int64_t(value.bytes.size()));
  Sources sources{};
  sources[0] = reinterpret_cast<const std::byte*>(payload.data()) + sizeof(Header);
  for (int r = 1; r < group.size(); ++r) sources[size_t(r)] = group.worker_inline_results(r).data();
  const Header h{request.module, request.var, uint8_t(request.op), uint8_t(request.dtype), request.count};
  reduce_into(h, sources.data(), group.size(), value);
}

void inline_broadcast(ProcessGroup& group, const InlineCollective& request, const char* what) {
  const Array& value = module_on_rank(group.master_context(), request.module).values.at(size_t(request.var));
  std::array<char, sizeof(Header) + kInlineAllReduceBytes> payload;
  run_inline(group, kInlineBroadcastCommand, request, value, what, payload);
}

}  // namespace synk::rt
