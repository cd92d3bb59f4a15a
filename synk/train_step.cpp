// synk::TrainStep (train_step.h): the step's three calls, and its run-time hyper-parameters.
#include "synk/train_step.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/diagnostics.h"
#include "runtime/call/call_nodes.h"
#include "runtime/node/cluster.h"
#include "synk/collectives.h"

namespace synk {

namespace {

// Runs `part` and rethrows its error with the step and the part named first, same type.
template <class F>
auto named(const std::string& step, const char* part, F&& f) -> decltype(f()) {
  auto prefix = [&](const Error& e) { return fmt::format("training step '{}', {}: {}", step, part, e.what()); };
  try {
    return f();
  } catch (const UsageError& e) {
    throw UsageError(prefix(e));
  } catch (const RankError& e) {
    throw RankError(prefix(e), e.ranks(), e.group_lost());
  } catch (const InternalError& e) {
    throw InternalError(prefix(e));
  }
}

}  // namespace

TrainStep::TrainStep(std::string name, Function gradient, Var gradient_var, Function update, int64_t num_packs,
                     std::vector<HyperParameter> hyper)
    : name_(std::move(name)),
      gradient_(std::move(gradient)),
      gradient_var_(gradient_var),
      update_(std::move(update)),
      hyper_(std::move(hyper)) {
  if (gradient_.id() < 0 || update_.id() < 0 || !gradient_var_.valid())
    throw UsageError(fmt::format("training step '{}': the gradient function, the gradient variable and the "
                                 "update function must all be given", name_));
  const rt::FunctionSignature& g = gradient_.signature();
  for (size_t u = 0; u < g.updates.size(); ++u)
    if (g.updates[u].shared == gradient_var_.index()) gradient_update_ = int32_t(u);
  if (gradient_update_ < 0)
    throw UsageError(fmt::format("training step '{}': function '{}' does not update the gradient variable '{}'",
                                 name_, g.name, gradient_var_.name()));
  if (!update_.signature().inputs.empty())
    throw UsageError(fmt::format("training step '{}': the update function '{}' must take no inputs (it reads the "
                                 "averaged gradient from '{}'), but it takes {}",
                                 name_, update_.name(), gradient_var_.name(), update_.signature().inputs.size()));
  set_num_packs(num_packs);
  for (size_t i = 0; i < hyper_.size(); ++i) {
    if (hyper_[i].keyword.empty() || !hyper_[i].var.valid())
      throw UsageError(fmt::format("training step '{}': hyper-parameter {} needs a keyword and a shared variable",
                                   name_, i));
    for (size_t j = 0; j < i; ++j)
      if (hyper_[j].keyword == hyper_[i].keyword)
        throw UsageError(fmt::format("training step '{}': hyper-parameter '{}' is given twice", name_,
                                     hyper_[i].keyword));
  }
}

const HyperParameter& TrainStep::find_hyper(std::string_view keyword) const {
  for (const HyperParameter& h : hyper_)
    if (h.keyword == keyword) return h;
  std::vector<std::string> keywords;
  for (const HyperParameter& h : hyper_) keywords.push_back(h.keyword);
  const std::string hint = keyword == "clip_norm" ? " (clip_norm can be set where the optimizer declares it; "
                                                    "declare clip_norm=0 to start with clipping off)"
                                                  : "";
  throw UsageError(fmt::format("training step '{}': no hyper-parameter '{}'{}{}; its update function has: {}", name_,
                               keyword, did_you_mean(keyword, keywords), hint,
                               keywords.empty() ? std::string("none") : fmt::format("{}", fmt::join(keywords, ", "))));
}

void TrainStep::write_hyper(const HyperParameter& h, double value, bool compared) const {
  const char* range = nullptr;
  switch (h.range) {
    case HyperRange::Unit: if (!(value >= 0 && value < 1)) range = "in [0, 1)"; break;
    case HyperRange::NonNegative: if (!(value >= 0) || !std::isfinite(value)) range = "a finite number >= 0"; break;
  }
  if (range)
    throw UsageError(fmt::format("training step '{}': hyper-parameter '{}' must be {}, got {}", name_, h.keyword,
                                 range, value));
  if (rt::cluster() && !compared) agree_across_nodes(h.keyword, value);
  const ArrayRef ref{&value, rt::DType::F64, {}};
  named(name_, fmt::format("setting '{}'", h.keyword).c_str(), [&] {
    if (forked()) broadcast(h.var, ref);
    else set_value(0, h.var, ref);
  });
}

// Across nodes the broadcast that writes a hyper-parameter takes node 0's value: one computed on
// each leader (from its own clock, or from a step index set differently) would be dropped without
// a word. The leaders compare what they write first, in the form of a call's first exchange (so a
// leader making a call here instead sees this one in its own comparison), and differences are a
// UsageError on every leader.
void TrainStep::agree_across_nodes(const std::string& keyword, double value, bool in_step) const {
  const std::vector<std::string> did = rt::exchange_first_fields(
      "set_hyper", fmt::format("set_hyper('{}', {}) of training step '{}'", keyword, value, name_));
  if (std::all_of(did.begin(), did.end(), [&](const std::string& d) { return d == did[0]; })) return;
  // A leader that refused this step before it started (refuse_step) sent its reason here: the
  // error its gradient call would have met.
  for (size_t n = 0; in_step && n < did.size(); ++n)
    if (rt::is_refusal(did[n]))
      rt::throw_refusal(fmt::format("training step '{}', gradient function: {}", name_, gradient_.name()), n, did[n]);
  std::string text;
  for (size_t n = 0; n < did.size(); ++n)
    text += fmt::format("{}node {}: {}", n ? "; " : "", n, rt::is_refusal(did[n]) ? "refused a call" : did[n]);
  throw UsageError(fmt::format("training step '{}': the nodes' leaders set '{}' differently, or make different calls "
                               "(every leader must write the same hyper-parameter values; a value computed on each "
                               "node from its own clock or step index differs, docs/multinode.md): {}",
                               name_, keyword, text));
}

void TrainStep::set_hyper(std::string_view keyword, double value) {
  if (!valid()) throw UsageError("use of an empty synk::TrainStep (get one from jit::Module::train_step)");
  if (schedule_ && keyword == "lr")   // the next call would overwrite it without a word
    throw UsageError(fmt::format("training step '{}': lr follows the schedule set with set_schedule, which sets "
                                 "it before every step; call clear_schedule() first to set it by hand", name_));
  write_hyper(find_hyper(keyword), value);
}

double TrainStep::hyper(std::string_view keyword) const {
  if (!valid()) throw UsageError("use of an empty synk::TrainStep (get one from jit::Module::train_step)");
  const Array value = get_value(0, find_hyper(keyword).var);
  if (value.dtype != rt::DType::F64 || value.size() != 1)
    throw UsageError(fmt::format("training step '{}': hyper-parameter '{}' is not an f64 scalar variable", name_,
                                 keyword));
  return value.data<double>()[0];
}

void TrainStep::set_schedule(Schedule schedule) {
  (void)find_hyper("lr");
  schedule_ = std::move(schedule);
}

void detail::share_step_count(TrainStep& step, std::shared_ptr<int64_t> count) {
  if (!count) throw InternalError("share_step_count: no count");
  step.step_index_ = std::move(count);
}

void TrainStep::set_step_index(int64_t index) {
  if (index < 0)
    throw UsageError(fmt::format("training step '{}': the step index must be >= 0, got {}", name_, index));
  *step_index_ = index;
}

void TrainStep::set_deterministic(int64_t micro_shard_rows) {
  if (micro_shard_rows < 0)
    throw UsageError(fmt::format("training step '{}': set_deterministic(rows) (Python: deterministic = rows) takes "
                                 "the micro-shard rows, >= 0 (0: off); received {}", name_, micro_shard_rows));
  micro_shard_rows_ = micro_shard_rows;
}

void TrainStep::set_overlap(bool on, int64_t bucket_bytes) {
  if (bucket_bytes < 0)
    throw UsageError(fmt::format("training step '{}': bucket_bytes must be >= 0 (0: the default), got {}", name_,
                                 bucket_bytes));
  overlap_ = on;
  bucket_bytes_ = bucket_bytes;
}

void TrainStep::set_num_packs(int64_t num_packs) {
  if (num_packs < 0)
    throw UsageError(fmt::format("training step '{}': num_packs must be >= 0 (0: the default), got {}", name_,
                                 num_packs));
  num_packs_ = num_packs;
}

Outputs TrainStep::operator()(const std::vector<Data>& inputs, const CallOptions& options) const {
  if (!valid()) throw UsageError("use of an empty synk::TrainStep (get one from jit::Module::train_step)");
  const std::optional<double> lr = scheduled_lr();   // a bad value is refused before anything runs
  // Across nodes the scheduled lr is compared on every step, before anything runs and whether it
  // is written or not: a leader whose step index differs (set_step_index on one node) would
  // otherwise skip a write the others make.
  if (lr && rt::cluster()) agree_across_nodes("lr", *lr, true);
  Outputs out = gradient_call(inputs, options);
  // Only the update reads lr: setting it here leaves it as it was when the gradient call is
  // refused (a UsageError changes nothing) or fails.
  if (lr && *lr != hyper("lr")) write_hyper(find_hyper("lr"), *lr, true);
  if (reduce_gradient(out)) named(name_, "update function", [&] { return update_({}); });
  ++*step_index_;
  return out;
}

// set_hyper keeps every rank's lr equal to the master's, so the caller writes it only when it
// changes (most steps of a step-decay or warm-up-then-constant schedule need no broadcast).
std::optional<double> TrainStep::scheduled_lr() const {
  if (!schedule_) return std::nullopt;
  const double lr = (*schedule_)(*step_index_);
  if (!std::isfinite(lr) || lr < 0)   // a step_decay with gamma > 1 grows without bound
    throw UsageError(fmt::format("training step '{}': its schedule gives lr = {} at step {}; lr must be a finite "
                                 "number >= 0 (a step_decay with gamma > 1 grows without bound)",
                                 name_, lr, *step_index_));
  return lr;
}

void detail::refuse_step(const TrainStep& step, const Error& error) {
  if (!step.valid()) return;
  detail::refuse_call(error);   // the other leaders' gradient calls fail: none of them sets lr
}

Outputs TrainStep::gradient_call(const std::vector<Data>& inputs, const CallOptions& options) const {
  if (!valid()) throw UsageError("use of an empty synk::TrainStep (get one from jit::Module::train_step)");
  return named(name_, "gradient function", [&] {
    // Not forked: the plain call says so, with its usual message.
    if (micro_shard_rows_ > 0 && forked()) return gradient_.call(current_group(), inputs, options, micro_shard_rows_);
    if (overlap_ && forked())
      return gradient_.call(current_group(), inputs, options, 0,
                            rt::StreamRequest{gradient_update_, uint64_t(bucket_bytes_)});
    return gradient_(inputs, options);
  });
}

bool TrainStep::reduce_gradient(const Outputs& gradient_outputs) const {
  if (!valid()) throw UsageError("use of an empty synk::TrainStep (get one from jit::Module::train_step)");
  CollectiveOptions reduce;
  if (num_packs_ > 0) reduce.num_packs = num_packs_;
  // Each rank's gradient counts by its rows, like an `avg` output (SEMANTICS, training steps): a
  // rank without rows still holds an older gradient, which must not count. Equal shares take the
  // plain average, so an evenly split step keeps the bits of the three separate calls.
  const std::vector<int64_t>& rows = gradient_outputs.rank_weights();
  if (rows.empty())
    throw UsageError(fmt::format("training step '{}': reduce_gradient needs the outputs of a call of '{}'", name_,
                                 gradient_.name()));
  if (std::all_of(rows.begin(), rows.end(), [](int64_t r) { return r == 0; })) return false;
  if (gradient_outputs.gradient_reduced_) return true;   // averaged during the call (set_overlap)
  if (micro_shard_rows_ > 0) {
    const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t(0));
    named(name_, "exact all_reduce of the gradient", [&] { detail::all_reduce_exact(gradient_, total, reduce); });
    return true;
  }
  if (std::all_of(rows.begin(), rows.end(), [&](int64_t r) { return r == rows.front(); })) {
    named(name_, "all_reduce of the gradient", [&] { all_reduce(gradient_var_, Op::Avg, reduce); });
  } else {
    const std::vector<double> weights(rows.begin(), rows.end());
    named(name_, "all_reduce of the gradient", [&] { all_reduce_weighted(gradient_var_, weights, reduce); });
  }
  return true;
}

}  // namespace synk
