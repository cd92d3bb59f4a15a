// The inline collectives (inline_reduce.h): the command's payload is the InlineCollective request
// and the master's value; an all_reduce worker's inline results are its own value.
#include "runtime/coll/inline_reduce.h"

#include <array>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/call/registry.h"
#include "runtime/coll/staging.h"
#include "runtime/trace/trace.h"

namespace synk::rt {

namespace {

static_assert(sizeof(InlineCollective) == 12 && std::is_trivially_copyable_v<InlineCollective>);
static_assert(sizeof(InlineCollective) + kInlineValueBytes <= kInlinePayloadBytes);
static_assert(kInlineValueBytes <= kInlineResultBytes);

// Where every rank's value lies, in rank order, as reduce_sources takes them.
using Sources = std::array<const std::byte*, 64>;
// The command's payload: the request, then the master's value.
using Payload = std::array<char, sizeof(InlineCollective) + kInlineValueBytes>;

InlineCollective read_request(std::string_view payload, const char* what) {
  InlineCollective request;
  if (payload.size() < sizeof request) throw InternalError(fmt::format("inline {}: short payload", what));
  std::memcpy(&request, payload.data(), sizeof request);
  return request;
}
const std::byte* master_value(std::string_view payload) {
  return reinterpret_cast<const std::byte*>(payload.data()) + sizeof(InlineCollective);
}

// This rank's variable, checked against the master's record.
Array& own_value(RankContext& ctx, const InlineCollective& request, const char* what) {
  Array& value = module_on_rank(ctx, request.module).values.at(size_t(request.var));
  if (value.dtype != request.dtype || size_t(value.size()) != request.count)
    throw InternalError(fmt::format("{}: shared variable '{}' on rank {} holds {} {} values, but the master "
                                    "recorded {} {}", what,
                                    module_on_rank(ctx, request.module).spec.shareds.at(size_t(request.var)).name,
                                    ctx.rank(), value.size(), dtype_name(value.dtype), request.count,
                                    dtype_name(request.dtype)));
  return value;
}

void reduce_into(const InlineCollective& request, const std::byte* const* sources, int n, Array& value) {
  reduce_sources(request.dtype, request.op, sources, n, value.bytes.data(), request.count,
                 request.op == CollOp::Avg ? n : 0);
}

void run_inline_all_reduce_rank(RankContext& ctx, std::string_view payload) {
  const InlineCollective request = read_request(payload, "all_reduce");
  const size_t bytes = request.bytes();
  trace::Span span(trace::Category::Collective, "all_reduce");
  if (span.active()) span.set_detail("1 variable, inline", int64_t(bytes));
  Array& value = own_value(ctx, request, "all_reduce");
  const int n = ctx.size(), me = ctx.rank();
  std::span<std::byte> mine = ctx.inline_results();
  Sources sources{};
  sources[0] = master_value(payload);
  if (n == 2) {
    // Nobody but the master needs our value: keep it apart until the result is written, so that
    // the line the master polls changes once, right before the completion.
    std::array<std::byte, kInlineValueBytes> own;
    std::memcpy(own.data(), value.bytes.data(), bytes);
    sources[1] = own.data();
    reduce_into(request, sources.data(), n, value);
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
  reduce_into(request, sources.data(), n, value);
}

const CommandKind kInlineAllReduceCommand = register_command("inline all_reduce", run_inline_all_reduce_rank);

void run_inline_broadcast_rank(RankContext& ctx, std::string_view payload) {
  const InlineCollective request = read_request(payload, "broadcast");
  trace::Span span(trace::Category::Collective, "broadcast");
  if (span.active()) span.set_detail("1 variable, inline", int64_t(request.bytes()));
  std::memcpy(own_value(ctx, request, "broadcast").bytes.data(), master_value(payload), request.bytes());
}

const CommandKind kInlineBroadcastCommand = register_command("inline broadcast", run_inline_broadcast_rank);

// Sends `command` with the request and the master's value (written into `payload`); throws the
// collective's RankError if a rank failed.
void run_inline(ProcessGroup& group, CommandKind command, const InlineCollective& request, const Array& value,
                const char* what, Payload& payload) {
  const size_t bytes = request.bytes();
  const int n = group.size();
  if (n < 2 || n > int(std::tuple_size_v<Sources>) || bytes > kInlineValueBytes || value.bytes.size() != bytes)
    throw InternalError(fmt::format("{}: the inline path takes 2 to {} ranks and at most {} bytes, not {} ranks and {} "
                                    "bytes", what, std::tuple_size_v<Sources>, kInlineValueBytes, n, bytes));
  std::memcpy(payload.data(), &request, sizeof request);
  std::memcpy(payload.data() + sizeof request, value.bytes.data(), bytes);
  throw_collective_errors(what, group.run(command, {payload.data(), sizeof request + bytes}, nullptr));
}

}  // namespace

void inline_all_reduce(ProcessGroup& group, const InlineCollective& request, const char* what) {
  Array& value = module_on_rank(group.master_context(), request.module).values.at(size_t(request.var));
  // The master's span holds the whole collective, its wait for the workers included, as the
  // staging path's does.
  trace::Span span(trace::Category::Collective, "all_reduce");
  if (span.active()) span.set_detail("1 variable, inline", int64_t(value.bytes.size()));
  Payload payload;
  run_inline(group, kInlineAllReduceCommand, request, value, what, payload);
  Sources sources{};
  sources[0] = master_value({payload.data(), payload.size()});
  for (int r = 1; r < group.size(); ++r) sources[size_t(r)] = group.worker_inline_results(r).data();
  reduce_into(request, sources.data(), group.size(), value);
}

void inline_broadcast(ProcessGroup& group, const InlineCollective& request, const char* what) {
  const Array& value = module_on_rank(group.master_context(), request.module).values.at(size_t(request.var));
  trace::Span span(trace::Category::Collective, "broadcast");
  if (span.active()) span.set_detail("1 variable, inline", int64_t(value.bytes.size()));
  Payload payload;
  run_inline(group, kInlineBroadcastCommand, request, value, what, payload);
}

}  // namespace synk::rt
