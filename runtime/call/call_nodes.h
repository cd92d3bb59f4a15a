// The call engine's steps across nodes (multi-node runs, runtime/node/cluster.h). A call on K
// nodes of R ranks is planned over the K*R global ranks exactly as one node with K*R ranks would
// plan it; each node runs its own ranks; then every leader learns every rank's partial results
// and reduces them in global rank order, so every leader returns what a single node returns,
// bit for bit. The leaders must be making the same call (SPMD): the same function, input shapes
// and dtypes, bcast inputs' values (by hash), batch lengths and options; a difference is a
// UsageError on every leader naming both calls (or the bcast inputs whose values differ), and
// nothing of the call is kept. Exchanges, collective over the leaders:
//
//   agree_on_call (before planning, only for calls with index lists or sliceable shared
//   variables): the calls are compared; the batch and batch_s index lists become node 0's (a
//   node whose shuffle differed uses the master's), and the shapes of the sliceable shared
//   variables on every node's ranks are shared so the plan can split their rows.
//
//   agree_call_is_ready (after planning, only for calls that reduce their gradient across nodes
//   while they run): every leader will run it.
//
//   exchange_outcomes (after the local run): every rank's error or results area, so that a
//   rank's failure on one node is the same RankError, naming its global rank, on every leader;
//   for the other calls it also carries the call's description, compared then (one round per
//   call: an empty call costs one all-gather among the leaders).
//
// Every exchange's message begins with the call's description, so that a leader that refused
// the call before it started (fail_call_before_start) meets the others in whichever they are in.
//
// A node that loses its group (a worker died) ends the whole job at once instead (synk.cpp's
// group-lost hook, runtime/node/cluster.h): it cannot take part in anything any more.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <functional>

#include "runtime/call/call_engine.h"
#include "runtime/data/dtype.h"

namespace synk::rt {

// Shapes of shared variable `var` on global rank `rank`, for the ranks of other nodes.
using RemoteShapes = std::map<std::pair<int, int32_t>, std::vector<int64_t>>;

// Whether the call needs agree_on_call before it is planned.
bool needs_agreement_first(const CallRequest& req, const FunctionSignature& sig, const ModuleSpec& module);
// The call as a sentence (equal sentences: the same call; the error shows them).
std::string describe_call(const CallRequest& req, const FunctionSignature& sig);

// `local_shape(local_rank, var)`: this node's record (ShapeBook).
void agree_on_call(CallRequest& req, const FunctionSignature& sig, const ModuleSpec& module,
                   const std::function<const std::vector<int64_t>&(int, int32_t)>& local_shape,
                   RemoteShapes* remote);

// Per global rank: its error ("" when it succeeded) and, when it succeeded, its results bytes.
struct GlobalOutcome {
  std::vector<std::string> errors;
  std::vector<std::string> results;
};
// `described`: describe_call of a call that was not agreed on first ("" when it was).
GlobalOutcome exchange_outcomes(const std::string& fn, const std::string& described,
                                const std::vector<std::string>& local_errors, std::vector<std::string> local_results);

// A call whose checks failed on this leader (`error`) before it ran: the other leaders are
// exchanging its outcome, so this one takes part with every local rank failed and then throws
// `error` again. Every leader fails the call (the others with a RankError carrying this message,
// or the different-calls UsageError) and the leaders stay in step: without this, this leader's
// next call would be paired with this one on the others, a silently wrong answer.
// `streamed`: the call asked for its gradient to be reduced while it runs (agree_call_is_ready).
[[noreturn]] void fail_call_on_every_node(const std::string& fn, const std::string& described, int local_ranks,
                                          bool streamed, const UsageError& error);

// A call whose gradient is reduced across nodes while it runs (StreamRequest) makes collectives
// before its outcome is exchanged, so every leader must know that every other will run it: after
// planning, the leaders exchange their descriptions and planning errors (`local_error`, "" when
// none). Throws a UsageError when the calls differ, and a RankError naming another node whose
// leader refused it.
void agree_call_is_ready(const std::string& fn, const std::string& described, const std::string& local_error);

// A call this leader refused before it reached the engine (the API's own checks of its arguments,
// a Python value that is not an input): the other leaders are in the call's first exchange (or
// will be), so this leader takes part in it with `error`, in place of its description. Each of
// them then fails the call with a RankError naming this node and `error`, and every leader's next
// call pairs with the next call on the others. Returns normally; the caller throws `error`.
void fail_call_before_start(const Error& error);

// Whether the first field of a leader's message in an exchange is such a refusal, and its
// reason ("node N: ..."): the collectives' comparison across leaders (synk/collectives_check.cpp)
// meets refusals too.
bool is_refusal(const std::string& first_field);
std::string refusal_reason(const std::string& first_field);
// The RankError for a call node `node`'s leader refused before it ran (`first_field`, its
// refusal), naming that node's ranks; `fn` names the call.
[[noreturn]] void throw_refusal(const std::string& fn, size_t node, const std::string& first_field);

// One exchange among the leaders in the form of a call's first one (`mine` as the first field of
// the message), so that a leader making a call there instead meets it in its own comparison:
// every leader's first field, in node order. The comparisons of collectives, checkpoint calls and
// hyper-parameter writes across leaders use it.
std::vector<std::string> exchange_first_fields(const char* what, const std::string& mine);

}  // namespace synk::rt
