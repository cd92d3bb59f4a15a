// Checkpoints: every piece of a module's training state in one directory, restored on every rank
// (docs/training.md, "Checkpoints"). A checkpoint holds each shared variable that is model state
// (parameters, optimizer state such as `w_m`/`w_v`, step counters, batch-norm statistics; every
// shared variable except the sliceable ones, which hold each rank's own data, and the scratch ones
// the caller names: training steps' flat gradients, which every step overwrites before it reads
// them) as NAME.npy, the
// random state (seed, step) of the given functions, and the caller's metadata, described by
// manifest.json (dtypes, shapes, XXH3-64 checksums). It is written into a temporary directory
// beside DIR and swapped into place with one rename, so a crash mid-save leaves the previous
// checkpoint (or none), never half of one. Loading checks everything before it changes anything,
// then sets the master's copies and broadcasts them, so every rank resumes from the same state.
// Across nodes (after fork() under mpirun) node 0's leader alone writes and reads the files; every
// leader calls these, gets node 0's outcome (its metadata, or its error as a UsageError) and its values.
//
//   synk::save_checkpoint(mod, fns, "ckpt", {{"epoch", "3"}});   // jit::Module::save_checkpoint
//   auto metadata = synk::load_checkpoint(mod, fns, "ckpt");      // metadata["epoch"] == "3"
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "synk/core.h"

namespace synk {
namespace ir {
struct Module;
}

using CheckpointMetadata = std::map<std::string, std::string>;
// Training steps' positions by step name (TrainStep::step_index(), what a schedule reads).
using StepIndices = std::map<std::string, int64_t>;

// Shared variables a checkpoint leaves out (jit::Module and aot modules name their training steps'
// flat gradients `<optimizer>_grads`): a save does not write them, and a load leaves them as they
// are, also from a checkpoint that holds them (one saved before they were left out).
using ScratchVariables = std::vector<std::string>;

// Saves the master's copies (after a training step every rank holds the same parameters and
// optimizer state; a variable that ranks update from their own rows alone, such as batch norm's
// running statistics, is saved as the master holds it). `dir` is created, or replaced when it is
// a checkpoint; anything else there is a UsageError (a checkpoint never overwrites other files).
// `steps` are saved beside the metadata (detail::load_with_step_counts reads them back).
void save_checkpoint(const Module& module, const std::vector<Function>& functions, const std::string& dir,
                     const CheckpointMetadata& metadata = {}, const StepIndices& steps = {},
                     const ScratchVariables& scratch = {});

// Restores what save_checkpoint wrote, on every rank, and returns its metadata: the variables,
// and the random state of `functions` (those the checkpoint does not name had not run when it was
// saved, so their random step goes back to 0). UsageError, with nothing changed, when `dir` is not
// a checkpoint, was saved from a module with other shared variables, or a file is missing, has
// another dtype or shape, or fails its checksum, or a field of its manifest is damaged.
CheckpointMetadata load_checkpoint(const Module& module, const std::vector<Function>& functions,
                                   const std::string& dir, const ScratchVariables& scratch = {});

// The metadata alone (UsageError when `dir` is not a checkpoint).
CheckpointMetadata checkpoint_metadata(const std::string& dir);

namespace detail {
// The module's training-step gradients (each optimizer's `<optimizer>_grads`), which its checkpoints
// leave out.
ScratchVariables gradient_buffers(const ir::Module& module);
// The directory a save to `dir` writes: `dir/` is `dir`, and a symbolic link is followed (synkc
// run checks its parent before the call).
std::filesystem::path checkpoint_directory(const std::string& dir);
// The checks save_checkpoint makes of `dir` before it writes anything (UsageError naming what is
// wrong, after `who`), for callers that save after long work (synkc run --checkpoint) and refuse
// a bad DIR first.
void check_save_target(const std::string& dir, const std::string& who);
// A module's step counts by training function, as jit::Module and aot modules keep them: every
// TrainStep a module makes for one function shares its count (detail::share_step_count).
struct StepCounts {
  std::map<std::string, std::shared_ptr<int64_t>> counts;

  std::shared_ptr<int64_t> of(const std::string& function);   // created at 0
  // What a checkpoint saves: the count of each of `functions` (0 for one never stepped).
  StepIndices saved(const std::vector<std::string>& functions);
  void restore(const StepIndices& indices);
};

// load_checkpoint for a module that keeps step counts (jit::Module, aot modules), from one read
// of the manifest, so that a save replacing the checkpoint meanwhile cannot mix two of them. The
// step indices are checked first (UsageError for one of a function not among `step_functions`,
// the module's training functions); `functions_for(named)` gives the functions whose random
// state to restore, given those the checkpoint names (the caller compiles them); after the load,
// `restore_steps` gets the step indices.
CheckpointMetadata load_with_step_counts(
    const Module& module, const std::string& dir, const ScratchVariables& scratch,
    const std::vector<std::string>& step_functions,
    const std::function<std::vector<Function>(const std::vector<std::string>&)>& functions_for,
    const std::function<void(const StepIndices&)>& restore_steps);
}  // namespace detail

}  // namespace synk
