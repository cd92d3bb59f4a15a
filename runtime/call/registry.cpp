// The per-process registry, its Distribute command and the master's ShapeBook (see registry.h).
#include "runtime/call/registry.h"

#include <fmt/format.h>

#include <atomic>
#include <climits>
#include <mutex>
#include <optional>

#include "base/errors.h"
#include "base/wire.h"
#include "runtime/data/shared_vars.h"
#include "runtime/group/cleanup.h"

namespace synk::rt {
namespace {

void worker_distribute(RankContext& ctx, std::string_view payload) {
  wire::Reader r(payload);
  int32_t functions = r.pod<int32_t>(), modules = r.pod<int32_t>();
  for (int32_t m = 0; m < modules; ++m)
    if (!is_released(Released::Module, m)) module_on_rank(ctx, m);
  for (int32_t f = 0; f < functions; ++f)
    if (!is_released(Released::Function, f)) function_on_rank(ctx, f);
}

const CommandKind kDistributeCommand = register_command("distribute", worker_distribute);

// Functions first: a function's entry may point into its module's.
void free_entries(const std::vector<int32_t>& functions, const std::vector<int32_t>& modules) {
  Registry& reg = Registry::instance();
  auto mark = [](std::vector<bool>& released, int32_t id) {
    if (released.size() <= size_t(id)) released.resize(size_t(id) + 1);
    released[size_t(id)] = true;
  };
  for (int32_t f : functions) {
    if (size_t(f) < reg.functions.size()) reg.functions[size_t(f)].reset();
    mark(reg.released_functions, f);
  }
  for (int32_t m : modules) {
    if (size_t(m) < reg.modules.size()) reg.modules[size_t(m)].reset();
    mark(reg.released_modules, m);
  }
}

void worker_release(RankContext&, std::string_view payload) {
  wire::Reader r(payload);
  std::vector<int32_t> functions = r.vec<int32_t>();
  free_entries(functions, r.vec<int32_t>());
}

const CommandKind kReleaseCommand = register_command("release", worker_release);

// Queued by handles from any thread; `owed`: freed on the master, not yet on the workers.
struct ReleaseQueue {
  std::mutex mutex;
  std::vector<int32_t> functions, modules;
  std::atomic<bool> queued{false};
  std::vector<int32_t> owed_functions, owed_modules;   // the API thread's alone
};

ReleaseQueue& release_queue() {
  static ReleaseQueue* queue = new ReleaseQueue();   // handles may die during static destruction
  return *queue;
}

void release_before_command(ProcessGroup& group) { release_queued(&group); }
[[maybe_unused]] const bool kReleasePreamble = (register_command_preamble(release_before_command), true);

template <class Entry>
Entry* known(std::vector<std::unique_ptr<Entry>>& entries, int32_t id) {
  return id >= 0 && size_t(id) < entries.size() ? entries[size_t(id)].get() : nullptr;
}

template <class Entry>
Entry& keep(std::vector<std::unique_ptr<Entry>>& entries, int32_t id, std::unique_ptr<Entry> entry) {
  if (entries.size() <= size_t(id)) entries.resize(size_t(id) + 1);
  entries[size_t(id)] = std::move(entry);
  return *entries[size_t(id)];
}

std::string published(RankContext& ctx, const char* what, int32_t id, const std::string& key) {
  if (id < 0 || !ctx.has_store())
    throw InternalError(fmt::format("{} #{} is not known on rank {}", what, id, ctx.rank()));
  std::optional<std::string> bytes = ctx.store().get(key);
  if (!bytes) throw InternalError(fmt::format("{} #{} was never published to rank {}", what, id, ctx.rank()));
  return std::move(*bytes);
}

}  // namespace

Registry& Registry::instance() {
  static Registry* registry = new Registry();   // never destroyed: workers exit without unwinding
  return *registry;
}

void queue_release(Released what, int32_t id) noexcept {
  if (id < 0) return;
  ReleaseQueue& q = release_queue();
  try {
    std::lock_guard lock(q.mutex);
    (what == Released::Function ? q.functions : q.modules).push_back(id);
    q.queued.store(true, std::memory_order_release);
  } catch (...) {   // out of memory: the entry stays, as before releases existed
  }
}

bool is_released(Released what, int32_t id) {
  const Registry& reg = Registry::instance();
  const std::vector<bool>& released = what == Released::Function ? reg.released_functions : reg.released_modules;
  return id >= 0 && size_t(id) < released.size() && released[size_t(id)];
}

void release_queued(ProcessGroup* group) {
  if (cleanup::is_worker()) return;   // a worker frees what the master's commands say
  ReleaseQueue& q = release_queue();
  if (q.queued.load(std::memory_order_acquire)) {
    std::vector<int32_t> functions, modules;
    {
      std::lock_guard lock(q.mutex);
      functions.swap(q.functions);
      modules.swap(q.modules);
      q.queued.store(false, std::memory_order_relaxed);
    }
    free_entries(functions, modules);
    for (int32_t m : modules) ShapeBook::instance().forget(m);
    q.owed_functions.insert(q.owed_functions.end(), functions.begin(), functions.end());
    q.owed_modules.insert(q.owed_modules.end(), modules.begin(), modules.end());
  }
  if (q.owed_functions.empty() && q.owed_modules.empty()) return;
  const bool workers = group && group->alive() && group->size() > 1;
  if (workers && (group->is_forked_copy() || group->in_command())) return;   // told before a later command
  wire::Writer w;
  w.vec(q.owed_functions);
  w.vec(q.owed_modules);
  q.owed_functions.clear();
  q.owed_modules.clear();
  if (!workers) return;   // none to tell: workers forked later inherit the freed entries
  const std::vector<std::string>& errors = group->run(kReleaseCommand, w.bytes(), nullptr);
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty())
      throw InternalError(fmt::format("freeing released modules failed on {}: {}", rank_name(int(r)), errors[r]));
}

ModuleEntry& module_on_rank(RankContext& ctx, int32_t id) {
  Registry& reg = Registry::instance();
  if (ModuleEntry* entry = known(reg.modules, id)) return *entry;
  if (is_released(Released::Module, id))
    throw InternalError(fmt::format("module #{} was released on rank {}: no handle holds it", id, ctx.rank()));
  auto entry = std::make_unique<ModuleEntry>();
  entry->spec = decode_module(published(ctx, "module", id, module_key(id)));
  entry->values = initial_values(entry->spec);
  return keep(reg.modules, id, std::move(entry));
}

FunctionEntry& function_on_rank(RankContext& ctx, int32_t id) {
  Registry& reg = Registry::instance();
  if (FunctionEntry* entry = known(reg.functions, id)) return *entry;
  if (is_released(Released::Function, id))
    throw InternalError(fmt::format("function #{} was released on rank {}: no handle holds it", id, ctx.rank()));
  auto entry = std::make_unique<FunctionEntry>();
  decode_function_entry(published(ctx, "function", id, function_key(id)), entry.get());
  entry->id = id;
  auto loader = reg.loaders.find(entry->kind);
  if (loader == reg.loaders.end())
    throw Error(fmt::format("no loader for functions of kind '{}' in this process (loaders must "
                            "be registered before synk::fork())", entry->kind));
  entry->fn = loader->second(entry->payload);
  if (!entry->fn) throw Error(fmt::format("the '{}' loader returned no function", entry->kind));
  module_on_rank(ctx, entry->module);
  return keep(reg.functions, id, std::move(entry));
}

CommandKind distribute_command() { return kDistributeCommand; }

std::string encode_distribute(const Registry& registry) {
  wire::Writer w;
  w.pod<int32_t>(int32_t(registry.functions.size()));
  w.pod<int32_t>(int32_t(registry.modules.size()));
  return w.take();
}

std::string function_key(int32_t id) { return fmt::format("fn/{}", id); }
std::string module_key(int32_t id) { return fmt::format("mod/{}", id); }

std::string encode_function_entry(const FunctionEntry& entry) {
  wire::Writer w;
  w.pod(entry.module);
  w.str(entry.kind);
  w.str(entry.payload);
  return w.take();
}

void decode_function_entry(std::string_view bytes, FunctionEntry* entry) {
  wire::Reader r(bytes);
  entry->module = r.pod<int32_t>();
  entry->kind = r.str();
  entry->payload = r.str();
}

ShapeBook& ShapeBook::instance() {
  static ShapeBook* book = new ShapeBook();
  return *book;
}

const std::vector<int64_t>& ShapeBook::shape(int rank, int32_t module, int32_t var) const {
  if (rank == 0) return Registry::instance().modules.at(size_t(module))->values.at(size_t(var)).shape;
  auto it = shapes_.find({module, var, rank});
  if (it == shapes_.end())
    throw InternalError(fmt::format("no shape recorded for shared #{} of module #{} on rank {}", var, module, rank));
  return it->second;
}

void ShapeBook::note(int rank, int32_t module, int32_t var, std::vector<int64_t> shape) {
  if (rank != 0) shapes_[{module, var, rank}] = std::move(shape);
}

void ShapeBook::forget(int32_t module) {
  shapes_.erase(shapes_.lower_bound({module, INT32_MIN, INT_MIN}), shapes_.lower_bound({module + 1, INT32_MIN, INT_MIN}));
}

void ShapeBook::snapshot(int32_t module, int nranks) {
  const ModuleEntry& m = *Registry::instance().modules.at(size_t(module));
  for (int r = 1; r < nranks; ++r)
    for (size_t v = 0; v < m.values.size(); ++v) shapes_[{module, int32_t(v), r}] = m.values[v].shape;
}

void ShapeBook::reset(int nranks) {
  shapes_.clear();
  Registry& reg = Registry::instance();
  for (size_t m = 0; m < reg.modules.size(); ++m)
    if (reg.modules[m]) snapshot(int32_t(m), nranks);
}

}  // namespace synk::rt
