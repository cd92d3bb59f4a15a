// What every process of a group knows about compiled code: the functions and modules registered
// so far (with this rank's own copy of every shared variable) and the loaders that rebuild a
// function from its (kind, payload). It is per process: workers inherit the master's registry at
// fork() and learn about later registrations through the group's Store, on demand
// (function_on_rank / module_on_rank) or all at once (the Distribute command). The master also
// keeps here what it knows of every worker's shared-variable shapes (ShapeBook).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "runtime/call/descriptor.h"
#include "runtime/group/process_group.h"

namespace synk::rt {

struct FunctionEntry {
  std::shared_ptr<CompiledFunction> fn;
  int32_t id = -1;               // in the registry (never reused)
  int32_t module = -1;
  std::string kind, payload;     // how a worker forked earlier rebuilds it (may be empty)
  // The random state of its calls (base/rng.h), the master's: every call sends it to the workers;
  // a call of a function with updates (a training step) advances `step` once it succeeds.
  uint64_t seed = 0;
  uint64_t step = 0;
};

// Whether a micro-sharded call keeps an update per shard for the exact all-reduce (f32 and f64
// `avg` updates); every other update folds on its rank as usual. The call engine and the exact
// all-reduce's master side both ask this.
inline bool kept_per_shard(ReduceMode mode, DType dtype) {
  return mode == ReduceMode::Avg && (dtype == DType::F32 || dtype == DType::F64);
}

// One variable's per-shard values from a micro-sharded call on this rank (the first `used` of
// `values`, with their rows in `weights`); the storage is reused from call to call.
struct MicroShardParts {
  std::vector<Array> values;
  std::vector<int64_t> weights;
  size_t used = 0;
};

struct ModuleEntry {
  ModuleSpec spec;
  std::vector<Array> values;     // this rank's copies
  // Per variable (grown on demand): the storage of its previous value, kept when an update
  // replaces it and handed to the next call that updates it (call_engine.cpp).
  std::vector<Array> spares;
  // By variable: the float `avg` updates a micro-sharded call kept apart (CallRequest::
  // micro_shard_rows), waiting for the exact all-reduce that combines them.
  std::map<int32_t, MicroShardParts> micro_parts;
};

struct Registry {
  std::map<std::string, FunctionLoader, std::less<>> loaders;
  std::vector<std::unique_ptr<FunctionEntry>> functions;   // by id; null until known here
  std::vector<std::unique_ptr<ModuleEntry>> modules;       // by id; null until known here
  // By id: released (see release_queued), so null for good; ids are never reused.
  std::vector<bool> released_functions, released_modules;

  static Registry& instance();
};

// Freeing what no handle holds. The last handle of a function or module (synk/core.h) queues its
// id, from any thread (Python's garbage collector's too). release_queued frees what was queued: in
// the master, between commands (the API thread: synk::module(), synk::function(), fork(), close()
// and every command's preamble call it), this process's entries at once and the workers' by a
// command of its own when `group` has workers and no command runs (else before the next command).
// A released id is null on every rank for good: Distribute and loading on demand skip it.
enum class Released { Function, Module };
void queue_release(Released what, int32_t id) noexcept;
void release_queued(ProcessGroup* group);
bool is_released(Released what, int32_t id);

// Module or function `id` in this process, loaded from the group's store when it was registered
// after this worker was forked (InternalError when it was never published).
ModuleEntry& module_on_rank(RankContext& ctx, int32_t id);
FunctionEntry& function_on_rank(RankContext& ctx, int32_t id);

// The command that makes every worker load every function and module registered so far.
CommandKind distribute_command();
std::string encode_distribute(const Registry& registry);

// Store keys under which the master publishes registrations made after the fork.
std::string function_key(int32_t id);
std::string module_key(int32_t id);
std::string encode_function_entry(const FunctionEntry& entry);
void decode_function_entry(std::string_view bytes, FunctionEntry* entry);

// The master's record of each rank's shared-variable shapes (rank 0: its own values). Plans of
// calls that slice shared variables read it; collectives that resize variables write it.
class ShapeBook {
 public:
  static ShapeBook& instance();
  const std::vector<int64_t>& shape(int rank, int32_t module, int32_t var) const;
  void note(int rank, int32_t module, int32_t var, std::vector<int64_t> shape);
  void forget(int32_t module);   // a released module
  // Records that ranks 1..nranks-1 now hold module `module` with the master's current shapes.
  void snapshot(int32_t module, int nranks);
  // A fresh group: forgets everything, then snapshots every module known now.
  void reset(int nranks);

 private:
  std::map<std::tuple<int32_t, int32_t, int>, std::vector<int64_t>> shapes_;
};

}  // namespace synk::rt
