// The per-process registry, its Distribute command and the master's ShapeBook (see registry.h).
#include "runtime/call/registry.h"

#include <fmt/format.h>

#include <optional>

#include "base/errors.h"
#include "base/wire.h"
#include "runtime/data/shared_vars.h"

namespace synk::rt {
namespace {

void worker_distribute(RankContext& ctx, std::string_view payload) {
  wire::Reader r(payload);
  int32_t functions = r.pod<int32_t>(), modules = r.pod<int32_t>();
  for (int32_t m = 0; m < modules; ++m) module_on_rank(ctx, m);
  for (int32_t f = 0; f < functions; ++f) function_on_rank(ctx, f);
}

const CommandKind kDistributeCommand = register_command("distribute", worker_distribute);

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

ModuleEntry& module_on_rank(RankContext& ctx, int32_t id) {
  Registry& reg = Registry::instance();
  if (ModuleEntry* entry = known(reg.modules, id)) return *entry;
  auto entry = std::make_unique<ModuleEntry>();
  entry->spec = decode_module(published(ctx, "module", id, module_key(id)));
  entry->values = initial_values(entry->spec);
  return keep(reg.modules, id, std::move(entry));
}

FunctionEntry& function_on_rank(RankContext& ctx, int32_t id) {
  Registry& reg = Registry::instance();
  if (FunctionEntry* entry = known(reg.functions, id)) return *entry;
  auto entry = std::make_unique<FunctionEntry>();
  decode_function_entry(published(ctx, "function", id, function_key(id)), entry.get());
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
