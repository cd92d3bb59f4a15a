// synk::TrainStep: one data-parallel training step as one call (docs/training.md). It holds three
// runtime handles: the gradient function (which writes this rank's flat gradient into a shared
// variable), that variable, and the update function (no inputs; reads the averaged gradient from
// the variable and updates the parameters). A call runs the gradient function on every rank,
// one reduction of the gradient variable weighted by each rank's rows (in num_packs flat buffers
// when asked), and the update function, and returns the gradient function's outputs. When every
// rank held as many rows this is exactly what the three separate calls (gradient,
// all_reduce(avg), update) do, bit for bit. The runtime knows nothing of .synk: jit::Module::train_step("train")
// finds the three handles of a step declared with `minimize` (synk/jit.h).
//
// Hyper-parameters at run time: the update function reads each of its optimizer's
// hyper-parameters from a scalar f64 shared variable, and the step knows them by keyword
// (HyperParameter). set_hyper / set_lr write one on every rank (so the ranks never diverge);
// set_schedule makes every call set `lr` from a synk::Schedule of the step's call count first.
//
//   synk::TrainStep step = mod.train_step("train");       // before or after synk::fork()
//   synk::Outputs out = step({images, labels}, {.batch = idx});
//   step.set_lr(0.01);                                    // the next calls use lr = 0.01
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "synk/core.h"
#include "synk/schedule.h"

namespace synk {

class TrainStep;
namespace detail {
// Makes `step` count in `count`: jit::Module and aot modules give every step they make for one
// training function the same count, which their checkpoints save (detail::StepCounts).
void share_step_count(TrainStep& step, std::shared_ptr<int64_t> count);
// A step this leader refused before it started (a Python value that is not an input): what the
// step does across nodes before its gradient call, detail::refuse_call.
void refuse_step(const TrainStep& step, const Error& error);
}  // namespace detail

// The values a hyper-parameter may take at run time (all finite): [0, 1) (momentum, rho, beta1,
// beta2) or >= 0 (lr, epsilon, weight_decay, clip_norm). A declaration needs lr > 0, but at run
// time lr may reach 0 (where a schedule ends): the parameters then stay as they are.
enum class HyperRange : uint8_t { Unit, NonNegative };

// One hyper-parameter of a step's update function: its keyword and the f64 scalar shared
// variable the function reads it from.
struct HyperParameter {
  std::string keyword;
  Var var;
  HyperRange range = HyperRange::NonNegative;
};

class TrainStep {
 public:
  TrainStep() = default;
  // UsageError when a handle is empty, `update` takes inputs, or `gradient` does not update
  // `gradient_var`. `name` names the step in every message.
  // num_packs > 0: the gradient travels in that many flat buffers (CollectiveOptions::num_packs);
  // 0: the collectives' default. `hyper`: the update function's hyper-parameters (UsageError for
  // an empty keyword or handle, or a keyword given twice).
  TrainStep(std::string name, Function gradient, Var gradient_var, Function update, int64_t num_packs = 0,
            std::vector<HyperParameter> hyper = {});

  // The gradient call (with `options`); with a schedule, lr = schedule(step_index()) on every
  // rank; the reduction of the gradient variable; the update call. step_index() counts the calls
  // that got through, and a call that fails before its update leaves lr as it was. The
  // reduction weights each rank by its rows (Outputs::rank_weights): all_reduce(avg) when every
  // rank held as many rows, all_reduce_weighted otherwise, so a rank without rows contributes
  // nothing and `minimize mean(...)` is the gradient of the mean over all the step's rows. A step
  // that selected no rows at all changes nothing (no reduction, no update).
  // Errors are those of the three calls, with the step and the part that failed named first.
  Outputs operator()(const std::vector<Data>& inputs, const CallOptions& options = {}) const;

  // The first part alone, as operator() makes it (with its micro-shards in a deterministic step):
  // the gradient call, its errors named like operator()'s. No schedule is applied.
  Outputs gradient_call(const std::vector<Data>& inputs, const CallOptions& options = {}) const;

  // The middle part alone, for callers that time or interleave the three parts: reduces the
  // gradient variable as operator() does, weighted by `gradient_outputs.rank_weights()` (the
  // outputs of the gradient call just made). False when that call selected no rows: then nothing
  // was reduced and the update must be skipped. A deterministic step's gradient call must be made
  // by operator() or gradient_call() (its micro-shards): this reduces what that call kept apart.
  bool reduce_gradient(const Outputs& gradient_outputs) const;

  // Writes hyper-parameter `keyword` on every rank (a broadcast after synk::fork(), the master's
  // own value before). UsageError naming the keyword for an unknown one (listing the step's) or a
  // value out of its range.
  void set_hyper(std::string_view keyword, double value);
  void set_lr(double value) { set_hyper("lr", value); }
  // The master's current value of hyper-parameter `keyword` (UsageError for an unknown one).
  double hyper(std::string_view keyword) const;
  double lr() const { return hyper("lr"); }
  const std::vector<HyperParameter>& hyper_parameters() const { return hyper_; }

  // Every later call sets lr = schedule(step_index()) before its update; clear_schedule() stops it
  // (lr keeps its last value). UsageError when the step has no `lr`.
  void set_schedule(Schedule schedule);
  void clear_schedule() { schedule_.reset(); }
  const std::optional<Schedule>& schedule() const { return schedule_; }
  // The number of calls that completed (the schedule's step); settable. Copies of a step share it,
  // and jit::Module gives every step of one function the same count, which its save_checkpoint
  // saves and load_checkpoint restores (docs/training.md, "Checkpoints"); so do aot modules.
  int64_t step_index() const { return *step_index_; }
  void set_step_index(int64_t index);   // UsageError when negative

  const std::string& name() const { return name_; }
  const Function& gradient() const { return gradient_; }
  const Var& gradient_var() const { return gradient_var_; }
  const Function& update() const { return update_; }
  int64_t num_packs() const { return num_packs_; }
  void set_num_packs(int64_t num_packs);   // UsageError when negative

  // The same bits on any number of ranks (docs/training.md): micro_shard_rows > 0 cuts every
  // step's rows into micro-shards of that many rows, [k*m, (k+1)*m) of the batch, fixed whatever
  // the rank count (ranks run whole shards; num_slices has no effect). Each shard's gradient (and
  // every other f32/f64 `avg` update of the gradient function, e.g. batch-norm running
  // statistics) is kept apart and all are combined by an exact all-reduce (fixed-point sums over
  // ranks), so 1, 2, 3 or 4 ranks train to bit-identical parameters. Costs about one extra pass
  // over the gradient per shard and two reductions (docs/performance/training.md). 0 turns it off (the
  // default). UsageError when negative.
  void set_deterministic(int64_t micro_shard_rows);
  int64_t deterministic() const { return micro_shard_rows_; }

  // Overlap (docs/training.md): average the gradient during the gradient call, in buckets of
  // bucket_bytes taken from the gradient's end (the last layers, which the backward pass finishes
  // first), each on a helper thread per rank as soon as the backward pass has finished it, instead
  // of in one all_reduce after the call. Same bits as without. Used where the call allows it (the
  // CPU, one node, equal rows on every rank, one slice, not deterministic); the step falls back
  // to the one all_reduce otherwise. Off by default on the CPU (docs/performance/overlap.md).
  // bucket_bytes 0: the default (1 MiB); UsageError when negative.
  void set_overlap(bool on, int64_t bucket_bytes = 0);
  bool overlap() const { return overlap_; }
  int64_t bucket_bytes() const { return bucket_bytes_; }
  bool valid() const { return gradient_var_.valid(); }

 private:
  std::string name_;
  Function gradient_;
  Var gradient_var_;
  Function update_;
  int64_t num_packs_ = 0;
  int64_t micro_shard_rows_ = 0;
  bool overlap_ = false;
  int64_t bucket_bytes_ = 0;
  int32_t gradient_update_ = -1;   // the gradient variable's update in the gradient function
  std::vector<HyperParameter> hyper_;
  std::optional<Schedule> schedule_;
  std::shared_ptr<int64_t> step_index_ = std::make_shared<int64_t>(0);

  friend void detail::share_step_count(TrainStep& step, std::shared_ptr<int64_t> count);
  friend void detail::refuse_step(const TrainStep& step, const Error& error);

  // The lr of the current step index, where a schedule is set (UsageError for one that is not
  // finite and >= 0).
  std::optional<double> scheduled_lr() const;

  const HyperParameter& find_hyper(std::string_view keyword) const;
  // `compared`: the leaders compared `value` already (agree_across_nodes).
  void write_hyper(const HyperParameter& h, double value, bool compared = false) const;
  // Across nodes: every leader writes the same `value` (UsageError otherwise); `in_step`: in a
  // step's call, where another leader may have refused the step instead (then its RankError).
  void agree_across_nodes(const std::string& keyword, double value, bool in_step = false) const;
};

}  // namespace synk
