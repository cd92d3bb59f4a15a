// Checkpoints (checkpoint.h): the directory layout, the atomic swap and the all-or-nothing load.
//
// DIR/manifest.json:
//   {"format": "synk-checkpoint", "version": 1,
//    "variables": [{"name": "w", "file": "w.npy", "dtype": "f32", "shape": [4], "xxh3_64": "..."}],
//    "functions": [{"name": "train", "seed": 0, "step": 20}], "metadata": {"epoch": "3"},
//    "train_steps": {"train": 20}}   (absent in checkpoints saved without steps)
#include "synk/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ir/ir.h"
#include "runtime/call/call_nodes.h"
#include "runtime/data/npy.h"
#include "runtime/data/shared_vars.h"
#include "runtime/group/cleanup.h"
#include "runtime/node/cluster.h"
#include "synk/collectives.h"

namespace synk {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kFormat = "synk-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kManifest = "manifest.json";

std::string checksum(const Array& a) {
  return fmt::format("{:016x}", XXH3_64bits(a.bytes.data(), a.bytes.size()));
}

// The file that holds shared variable `name`: `<name>.npy`, or, where that would pass the
// filesystem's 255-byte limit on a name, the name's first 200 bytes, '~' and a hash of the whole
// name, so that any variable name can be saved and two long names never share a file.
std::string variable_file(const std::string& name) {
  constexpr size_t kNameMax = 255, kKept = 200;
  if (name.size() + 4 <= kNameMax) return name + ".npy";
  return fmt::format("{}~{:016x}.npy", name.substr(0, kKept), XXH3_64bits(name.data(), name.size()));
}

// Flushes a file or directory to disk, so the rename that publishes a checkpoint never
// overtakes its contents.
void sync_path(const fs::path& path, const std::string& dir) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int e = errno;
    if (fd >= 0) ::close(fd);
    throw UsageError(fmt::format("save_checkpoint('{}'): cannot flush '{}' to disk: {}", dir, path.string(),
                                 std::strerror(e)));
  }
  ::close(fd);
}

// Temporary directories are named .NAME.tmp-PID-RANDOM beside DIR; those of dead processes (a
// save interrupted by a crash or a kill) are removed by the next save.
std::string temp_prefix(const fs::path& target) { return "." + target.filename().string() + ".tmp-"; }

void sweep_stale_temps(const fs::path& target) {
  std::error_code ec;
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string prefix = temp_prefix(target);
  for (const fs::directory_entry& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const pid_t pid = pid_t(std::atoll(name.c_str() + prefix.size()));
    if (pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;   // its writer may still run
    fs::remove_all(e.path(), ec);
  }
}

bool is_checkpoint(const fs::path& dir) { return fs::is_regular_file(dir / kManifest); }

// The first entry of checkpoint `dir` that is neither its manifest nor a file the manifest names
// (a user's notes beside the values), which replacing the checkpoint would delete.
std::optional<std::string> foreign_entry(const fs::path& dir) {
  if (!is_checkpoint(dir)) return std::nullopt;
  std::set<std::string> own = {kManifest};
  try {
    std::ifstream in(dir / kManifest);
    const json m = json::parse(in);
    for (const json& e : m.at("variables")) own.insert(e.at("file").get<std::string>());
  } catch (const std::exception&) {
    return std::nullopt;   // a damaged manifest: what the directory holds is not known to be anyone's
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (!own.count(e.path().filename().string())) return e.path().filename().string();
  return std::nullopt;
}

// A filesystem error (a path too long, a loop of symbolic links, a directory without permission)
// is the caller's path, so a UsageError naming it, not an internal error.
template <class F>
auto with_path_errors(const std::string& who, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const fs::filesystem_error& e) {
    throw UsageError(fmt::format("{}: {}: {}", who, e.code().message(), e.path1().string()));
  }
}

// How a message names the call: "save_checkpoint('ckpt')".
std::string call_text(const char* what, const std::string& dir) { return fmt::format("{}('{}')", what, dir); }

// Every leader makes the same checkpoint call here (SPMD): one small exchange compares them
// before node 0 touches any file. It has the form of a call's first exchange (a description as
// the first field), so a leader that makes a call or a collective here instead reads this one's
// description in its own comparison, and every leader raises a UsageError naming what each node
// did, instead of pairing node 0's values with another exchange.
void agree_across_nodes(const char* what) {
  const std::vector<std::string> did = rt::exchange_first_fields(what, fmt::format("{}(...)", what));
  if (std::all_of(did.begin(), did.end(), [&](const std::string& d) { return d == did[0]; })) return;
  std::string text;
  for (size_t n = 0; n < did.size(); ++n)
    text += fmt::format("{}node {}: {}", n ? "; " : "", n,
                        rt::is_refusal(did[n]) ? "refused a call: " + rt::refusal_reason(did[n]) : did[n]);
  throw UsageError(fmt::format("{}: the nodes' leaders made different calls (every leader must make the same "
                               "calls, collectives and checkpoint calls in the same order, docs/multinode.md): {}",
                               what, text));
}

// In a job over several nodes only node 0's leader touches the checkpoint's files: the other
// nodes' disks may not hold it, or may be the same shared filesystem, where several writers
// would race to replace one directory. It runs `f`; every leader gets its result, or fails with
// its error (node 0 with its own exception, the others with a UsageError carrying its message).
// Without other nodes, `f` runs here.
std::string on_node_zero(const char* what, const std::function<std::string()>& f) {
  rt::Cluster* cl = rt::cluster();
  if (!cl) return f();
  agree_across_nodes(what);
  std::string message;   // "0" + the result, or "1" + the error
  std::exception_ptr failure;
  if (cl->node() == 0) {
    try {
      message = "0" + f();
    } catch (const std::exception& e) {
      message = std::string("1") + e.what();
      failure = std::current_exception();
    }
  }
  rt::cross_node(what, [&] { cl->broadcast(message, 0); });
  if (failure) std::rethrow_exception(failure);
  if (message.empty()) throw InternalError(fmt::format("{}: no answer from node 0", what));
  if (message[0] == '1') throw UsageError(fmt::format("node 0: {}", message.substr(1)));
  return message.substr(1);
}

json read_manifest_here(const std::string& dir, const char* what) {
  const fs::path path = fs::path(dir) / kManifest;
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw UsageError(fmt::format("{}('{}'): it is a file; a checkpoint is a directory (the one save_checkpoint "
                                 "named)", what, dir));
  if (!fs::is_directory(dir)) throw UsageError(fmt::format("{}('{}'): no such directory", what, dir));
  if (!fs::exists(path)) throw UsageError(fmt::format("{}('{}'): not a checkpoint (no {})", what, dir, kManifest));
  if (!fs::is_regular_file(path))   // a FIFO would block the read forever
    throw UsageError(fmt::format("{}('{}'): {} is not a regular file", what, dir, path.string()));
  std::ifstream in(path);
  if (!in)
    throw UsageError(fmt::format("{}('{}'): cannot read {}: {}", what, dir, path.string(), std::strerror(errno)));
  json m;
  try {
    m = json::parse(in);
    if (m.at("format") != kFormat) throw UsageError("");
  } catch (const std::exception&) {
    throw UsageError(fmt::format("{}('{}'): {} is not a synk checkpoint manifest", what, dir, path.string()));
  }
  if (m.value("version", 0) != kVersion)
    throw UsageError(fmt::format("{}('{}'): checkpoint format version {} (this synk reads version {})", what, dir,
                                 m.value("version", 0), kVersion));
  return m;
}

// The manifest as node 0 reads it (on_node_zero), on every leader.
json read_manifest(const std::string& dir, const char* what) {
  refuse_nul_in_path(dir, what);
  return json::parse(
      on_node_zero(what, [&] { return with_path_errors(call_text(what, dir), [&] { return read_manifest_here(dir, what).dump(); }); }));
}

bool is_scratch(const ScratchVariables& scratch, const std::string& name) {
  return std::find(scratch.begin(), scratch.end(), name) != scratch.end();
}

// The variables a checkpoint holds: every shared variable but the sliceable and scratch ones.
std::vector<int32_t> state_variables(const Module& module, const ScratchVariables& scratch) {
  std::vector<int32_t> out;
  const rt::ModuleSpec& spec = module.spec();
  for (size_t v = 0; v < spec.shareds.size(); ++v)
    if (!spec.shareds[v].sliceable && !is_scratch(scratch, spec.shareds[v].name)) out.push_back(int32_t(v));
  return out;
}

json manifest_of(const Module& module, const std::vector<Function>& functions, const CheckpointMetadata& metadata,
                 const StepIndices& steps, const ScratchVariables& scratch, const fs::path& into) {
  json vars = json::array();
  for (int32_t v : state_variables(module, scratch)) {
    const rt::SharedSpec& s = module.spec().shareds[size_t(v)];
    const Array value = module.get_value(s.name);
    const std::string file = variable_file(s.name);
    rt::npy::write((into / file).string(), value.ref());
    vars.push_back({{"name", s.name}, {"file", file}, {"dtype", rt::dtype_name(value.dtype)},
                    {"shape", value.shape}, {"xxh3_64", checksum(value)}});
  }
  json fns = json::array();
  for (const Function& f : functions) fns.push_back({{"name", f.name()}, {"seed", f.seed()}, {"step", f.step()}});
  json manifest{{"format", kFormat}, {"version", kVersion}, {"variables", vars}, {"functions", fns},
                {"metadata", metadata}};
  if (!steps.empty()) manifest["train_steps"] = steps;
  return manifest;
}

// A load in one process and saves in another over the same directory (an evaluator reading what
// training writes): a save swaps whole directories, but a load reads the manifest, then the files
// by path, so without a lock it could read one checkpoint's manifest and the next one's files. A
// load holds a shared flock on the directory while it reads; a save holds an exclusive one on the
// directory it swaps out until it has removed it. Each takes the lock on the directory that is
// at the path once the lock is held (a save may have swapped it meanwhile). Where the filesystem
// has no flock, they go on unlocked, as before.
class DirectoryLock {
 public:
  DirectoryLock() = default;
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock(DirectoryLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);   // releases the lock
  }

  // `operation`: LOCK_SH (a load) or LOCK_EX (a save). No lock when `dir` is not a directory
  // (the caller reports that) or cannot be locked.
  static DirectoryLock take(const fs::path& dir, int operation) {
    for (int attempt = 0; attempt < 1000; ++attempt) {
      DirectoryLock lock;
      lock.fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (lock.fd_ < 0) return DirectoryLock();
      int rc;
      while ((rc = ::flock(lock.fd_, operation)) != 0 && errno == EINTR) {
      }
      if (rc != 0) return DirectoryLock();
      struct stat held {}, now {};
      if (::fstat(lock.fd_, &held) == 0 && ::stat(dir.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
          held.st_ino == now.st_ino)
        return lock;
    }
    return DirectoryLock();
  }

 private:
  int fd_ = -1;
};

// The load's lock, where this leader reads the files (node 0 in a job over several nodes).
DirectoryLock lock_for_loading(const std::string& dir) {
  const rt::Cluster* cl = rt::cluster();
  if (cl && cl->node() != 0) return DirectoryLock();
  return DirectoryLock::take(fs::path(dir), LOCK_SH);
}

// Puts `fresh` at `target`: an atomic exchange when a checkpoint is there (the old one then sits
// at `fresh` and is removed), a rename otherwise.
void publish(const fs::path& fresh, const fs::path& target, const std::string& dir) {
  if (fs::exists(target)) {
    const DirectoryLock replacing = DirectoryLock::take(target, LOCK_EX);   // held until the old one is gone
    if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0)
      throw UsageError(fmt::format("save_checkpoint('{}'): cannot replace the old checkpoint: {}", dir,
                                   std::strerror(errno)));
    fs::remove_all(fresh);
  } else if (::rename(fresh.c_str(), target.c_str()) != 0) {
    throw UsageError(fmt::format("save_checkpoint('{}'): cannot create it: {}", dir, std::strerror(errno)));
  }
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  sync_path(parent, dir);
}

// One variable read back from a checkpoint and checked against the manifest and the module.
Array read_variable(const Module& module, const json& entry, const std::string& dir) {
  const std::string name = entry.at("name");
  const rt::SharedSpec& spec = module.spec().shareds.at(size_t(module.index_of(name)));
  const std::string where = fmt::format("load_checkpoint('{}'): shared variable '{}'", dir, name);
  if (entry.at("file").get<std::string>() != variable_file(name))   // never a path outside the checkpoint
    throw UsageError(fmt::format("{}: the manifest names the file '{}' instead of '{}'", where,
                                 entry.at("file").get<std::string>(), variable_file(name)));
  const fs::path file = fs::path(dir) / variable_file(name);
  if (!fs::exists(file)) throw UsageError(fmt::format("{}: the file {} is missing", where, file.string()));
  if (!fs::is_regular_file(file))
    throw UsageError(fmt::format("{}: {} is not a regular file", where, file.string()));
  Array value;
  try {
    value = rt::npy::read(file.string());
  } catch (const UsageError& e) {   // a truncated or unreadable file: say which load met it
    throw UsageError(fmt::format("{}: {}", where, e.what()));
  }
  if (rt::dtype_name(value.dtype) != entry.at("dtype").get<std::string>() ||
      value.shape != entry.at("shape").get<std::vector<int64_t>>() || checksum(value) != entry.at("xxh3_64"))
    throw UsageError(fmt::format("{}: {} does not match the manifest (dtype, shape or checksum): the checkpoint is "
                                 "damaged", where, file.string()));
  if (!rt::can_cast_safely(value.dtype, spec.dtype))
    throw UsageError(fmt::format("{}: the checkpoint holds it as {}, but this module declares it {}, which cannot "
                                 "hold every {} value; declare it {} (or a wider type) to load this checkpoint",
                                 where, rt::dtype_name(value.dtype), rt::dtype_name(spec.dtype),
                                 rt::dtype_name(value.dtype), rt::dtype_name(value.dtype)));
  return rt::conform_shared_value(spec, module.spec().symbols, value.ref(), false, where);
}

// A manifest's fields have the wrong type or are missing: the checkpoint was damaged or edited.
template <class F>
auto checked_manifest(const std::string& dir, const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const json::exception& e) {
    std::string why = e.what();   // "[json.exception.type_error.302] type must be ...": the part after the tag
    if (const size_t tag = why.find("] "); why.rfind("[json.", 0) == 0 && tag != std::string::npos)
      why = why.substr(tag + 2);
    throw UsageError(fmt::format("{}('{}'): {} is damaged: {}", what, dir, kManifest, why));
  }
}

// The manifest's entries of the variables a load sets: all but the scratch ones it may hold.
std::vector<json> held_entries(const json& manifest, const ScratchVariables& scratch) {
  std::vector<json> entries;
  for (const json& e : manifest.at("variables"))
    if (!is_scratch(scratch, e.at("name"))) entries.push_back(e);
  return entries;
}

// The checkpoint holds exactly the module's state variables (by name), and perhaps scratch ones.
void check_same_variables(const Module& module, const std::string& dir, const json& manifest,
                          const ScratchVariables& scratch) {
  std::vector<std::string> held;
  for (const json& e : held_entries(manifest, scratch)) held.push_back(e.at("name"));
  std::vector<std::string> wanted;
  for (int32_t v : state_variables(module, scratch)) wanted.push_back(module.spec().shareds[size_t(v)].name);
  const std::set<std::string> held_set(held.begin(), held.end()), wanted_set(wanted.begin(), wanted.end());
  for (const std::string& name : wanted)
    if (!held_set.count(name))
      throw UsageError(fmt::format("load_checkpoint('{}'): it has no shared variable '{}' (it holds: {}); was it "
                                   "saved from another model?", dir, name, fmt::join(held, ", ")));
  for (const std::string& name : held)
    if (!wanted_set.count(name))
      throw UsageError(fmt::format("load_checkpoint('{}'): it holds '{}', but this module has no non-sliceable "
                                   "shared variable of that name; was it saved from another model?", dir, name));
}

// An unsigned integer field of a manifest entry (a function's seed or step).
uint64_t unsigned_field(const json& entry, const char* field, const std::string& dir) {
  const json& v = entry.at(field);
  if (!v.is_number_unsigned()) {
    const json& name = entry.at("name");
    throw UsageError(fmt::format("load_checkpoint('{}'): {} is damaged: the {} of function '{}' is {}, not an "
                                 "integer >= 0 below 2^64", dir, kManifest, field,
                                 name.is_string() ? name.get<std::string>() : name.dump(), v.dump()));
  }
  return v.get<uint64_t>();
}

// Random state (seed, step) by function name, as the manifest holds it.
std::map<std::string, std::pair<uint64_t, uint64_t>> saved_random_state(const json& manifest, const std::string& dir) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> out;
  for (const json& f : manifest.at("functions"))
    out[f.at("name").get<std::string>()] = {unsigned_field(f, "seed", dir), unsigned_field(f, "step", dir)};
  return out;
}

// Checks every variable against the module and the files, and every other field, then sets them all.
CheckpointMetadata restore(const Module& module, const std::vector<Function>& functions, const std::string& dir,
                           const json& manifest, const ScratchVariables& scratch) {
  check_same_variables(module, dir, manifest, scratch);
  const std::vector<json> entries = held_entries(manifest, scratch);
  const auto random_state = saved_random_state(manifest, dir);
  const CheckpointMetadata metadata = manifest.value("metadata", json::object()).get<CheckpointMetadata>();
  // Everything is read and checked before anything changes (on node 0 alone in a multi-node job:
  // the broadcast takes its values to every rank of every node).
  std::vector<std::pair<std::string, Array>> values;
  on_node_zero("load_checkpoint", [&] {
    with_path_errors(call_text("load_checkpoint", dir), [&] {
      for (const json& e : entries) values.emplace_back(e.at("name"), read_variable(module, e, dir));
    });
    return std::string();
  });
  Module target = module;
  std::vector<Var> vars;
  for (const json& e : entries) vars.push_back(target.var(e.at("name").get<std::string>()));
  for (auto& [name, value] : values) target.set_value(name, value.ref());
  if (forked() && size() > 1 && !vars.empty()) broadcast(Vars(vars));
  // A function the checkpoint does not name had not run when it was saved: its random stream
  // starts again from step 0 (its seed stays), so resuming there draws what that run drew.
  for (const Function& fn : functions) {
    const auto saved = random_state.find(fn.name());
    if (saved == random_state.end()) {
      fn.set_step(0);
    } else {
      fn.set_seed(saved->second.first);
      fn.set_step(saved->second.second);
    }
  }
  return metadata;
}

}  // namespace

ScratchVariables detail::gradient_buffers(const ir::Module& module) {
  ScratchVariables names;
  for (const ir::Optimizer& optimizer : module.optimizers)
    if (optimizer.gradient >= 0) names.push_back(module.shareds.at(size_t(optimizer.gradient)).name);
  return names;
}

// A symbolic link is followed because replacing the link would leave the checkpoint it points
// at stale.
fs::path detail::checkpoint_directory(const std::string& dir) {
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty() && target.has_parent_path()) target = target.parent_path();
  for (int hops = 0; hops < 40 && fs::is_symlink(target); ++hops) {
    const fs::path link = fs::read_symlink(target);
    target = (link.is_absolute() ? link : target.parent_path() / link).lexically_normal();
  }
  return target;
}

namespace {

// Where a save of `dir` writes, after the checks it makes before writing anything.
// `who` names the caller in the messages.
fs::path checked_target(const std::string& dir, const std::string& who) {
  const fs::path target = detail::checkpoint_directory(dir);
  if (target.filename().empty() || target.filename() == "." || target.filename() == "..")
    throw UsageError(fmt::format("{}: name the checkpoint's own directory", who));
  if (fs::exists(target) && !(fs::is_directory(target) && (is_checkpoint(target) || fs::is_empty(target))))
    throw UsageError(fmt::format("{}: it exists and is not a checkpoint; a checkpoint never replaces other files", who));
  if (const std::optional<std::string> other = foreign_entry(target))
    throw UsageError(fmt::format("{}: it is a checkpoint, but it also holds '{}', which the new one would delete; a "
                                 "checkpoint never replaces other files (move it out first)", who, *other));
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  if (!fs::is_directory(parent))
    throw UsageError(fmt::format("{}: the directory '{}' does not exist", who, parent.string()));
  return target;
}

// The save itself, on this leader's filesystem.
void save_here(const Module& module, const std::vector<Function>& functions, const std::string& dir,
               const CheckpointMetadata& metadata, const StepIndices& steps, const ScratchVariables& scratch) {
  const fs::path target = checked_target(dir, call_text("save_checkpoint", dir));
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  sweep_stale_temps(target);
  std::random_device entropy;
  const fs::path fresh = parent / fmt::format("{}{}-{:08x}", temp_prefix(target), ::getpid(), entropy());
  std::error_code ec;
  if (!fs::create_directory(fresh, ec))
    throw UsageError(fmt::format("save_checkpoint('{}'): cannot create '{}': {}", dir, fresh.string(), ec.message()));
  rt::cleanup::set_scratch_directory(fresh.string());   // a signal from here on removes it
  struct Unregister {
    ~Unregister() { rt::cleanup::set_scratch_directory(""); }
  } unregister;
  try {
    const json manifest = manifest_of(module, functions, metadata, steps, scratch, fresh);
    {
      std::ofstream out(fresh / kManifest);
      out << manifest.dump(1) << "\n";
      if (!out.flush()) throw UsageError(fmt::format("save_checkpoint('{}'): cannot write the manifest", dir));
    }
    for (const fs::directory_entry& e : fs::directory_iterator(fresh)) sync_path(e.path(), dir);
    sync_path(fresh, dir);
    publish(fresh, target, dir);
  } catch (...) {
    fs::remove_all(fresh, ec);
    throw;
  }
}

}  // namespace

void detail::check_save_target(const std::string& dir, const std::string& who) {
  if (dir.empty()) throw UsageError(who + ": the directory name is empty");
  refuse_nul_in_path(dir, who);
  with_path_errors(who, [&] { checked_target(dir, who); });
}

void save_checkpoint(const Module& module, const std::vector<Function>& functions, const std::string& dir,
                     const CheckpointMetadata& metadata, const StepIndices& steps, const ScratchVariables& scratch) {
  if (dir.empty()) throw UsageError("save_checkpoint: the directory name is empty");
  refuse_nul_in_path(dir, "save_checkpoint");
  for (const auto& [name, index] : steps)
    if (index < 0)
      throw UsageError(fmt::format("save_checkpoint('{}'): training step '{}' has step index {} (must be >= 0)", dir,
                                   name, index));
  on_node_zero("save_checkpoint", [&] {
    with_path_errors(call_text("save_checkpoint", dir), [&] { save_here(module, functions, dir, metadata, steps, scratch); });
    return std::string();
  });
}

CheckpointMetadata checkpoint_metadata(const std::string& dir) {
  const json m = read_manifest(dir, "checkpoint_metadata");
  return checked_manifest(dir, "checkpoint_metadata",
                          [&] { return m.value("metadata", json::object()).get<CheckpointMetadata>(); });
}

std::shared_ptr<int64_t> detail::StepCounts::of(const std::string& function) {
  std::shared_ptr<int64_t>& count = counts[function];
  if (!count) count = std::make_shared<int64_t>(0);
  return count;
}

StepIndices detail::StepCounts::saved(const std::vector<std::string>& functions) {
  StepIndices out;
  for (const std::string& name : functions) out[name] = *of(name);
  return out;
}

namespace {

// The manifest's step indices, checked against the module's training `functions`: UsageError
// for one that is not an integer in [0, 2^63) or that names a function the module lacks.
StepIndices checked_step_indices(const json& manifest, const std::string& dir,
                                 const std::vector<std::string>& functions) {
  StepIndices steps;
  const json saved = manifest.value("train_steps", json::object());   // items() of a temporary dangles
  if (!saved.is_object())
    throw UsageError(fmt::format("load_checkpoint('{}'): {} is damaged: train_steps is {}", dir, kManifest,
                                 saved.dump()));
  for (const auto& [name, index] : saved.items()) {
    // json reads 5.5 as 5 and 1e30 as anything: only an integer in [0, 2^63) is a step index.
    if (!index.is_number_integer() || (index.is_number_unsigned() ? index.get<uint64_t>() > uint64_t(INT64_MAX)
                                                                  : index.get<int64_t>() < 0))
      throw UsageError(fmt::format("load_checkpoint('{}'): {} is damaged: training step '{}' has step index {}",
                                   dir, kManifest, name, index.dump()));
    if (std::find(functions.begin(), functions.end(), name) == functions.end())
      throw UsageError(fmt::format("load_checkpoint('{}'): it holds the step index of training function '{}', which "
                                   "this module does not have ({}); was it saved from another model?", dir, name,
                                   functions.empty() ? std::string("it has none")
                                                     : fmt::format("it has: {}", fmt::join(functions, ", "))));
    steps[name] = index.get<int64_t>();
  }
  return steps;
}

}  // namespace

CheckpointMetadata detail::load_with_step_counts(
    const Module& module, const std::string& dir, const ScratchVariables& scratch,
    const std::vector<std::string>& step_functions,
    const std::function<std::vector<Function>(const std::vector<std::string>&)>& functions_for,
    const std::function<void(const StepIndices&)>& restore_steps) {
  const DirectoryLock reading = lock_for_loading(dir);
  const json manifest = read_manifest(dir, "load_checkpoint");
  return checked_manifest(dir, "load_checkpoint", [&] {
    check_same_variables(module, dir, manifest, scratch);
    const StepIndices steps = checked_step_indices(manifest, dir, step_functions);
    std::vector<std::string> named;
    for (const json& f : manifest.at("functions")) named.push_back(f.at("name"));
    CheckpointMetadata metadata = restore(module, functions_for(named), dir, manifest, scratch);
    restore_steps(steps);
    return metadata;
  });
}

void detail::StepCounts::restore(const StepIndices& indices) {
  for (const auto& [name, index] : indices) *of(name) = index;
}

CheckpointMetadata load_checkpoint(const Module& module, const std::vector<Function>& functions,
                                   const std::string& dir, const ScratchVariables& scratch) {
  const DirectoryLock reading = lock_for_loading(dir);
  const json manifest = read_manifest(dir, "load_checkpoint");
  return checked_manifest(dir, "load_checkpoint",
                          [&] { return restore(module, functions, dir, manifest, scratch); });
}

}  // namespace synk
