// What every process of a group knows: the compiled functions and modules registered so far
// (with this rank's own copy of every shared variable), the loaders that rebuild a function from
// its (kind, payload) and the named rank-command handlers. It is per process: workers inherit the
// master's registry at fork() and learn about later registrations through the group's Store.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/call/descriptor.h"

namespace synk::rt {

class RankContext;

// Rebuilds a CompiledFunction in a worker from the payload its producer registered.
using FunctionLoader = std::function<std::shared_ptr<CompiledFunction>(const std::string& payload)>;
// Runs in every rank for ProcessGroup::run_handler (the hook for collectives and other
// rank-wide operations).
using RankHandler = std::function<void(RankContext& ctx, std::string_view payload)>;

struct FunctionEntry {
  std::shared_ptr<CompiledFunction> fn;
  int32_t module = -1;
  std::string kind, payload;     // how a worker forked earlier rebuilds it (may be empty)
};

struct ModuleEntry {
  ModuleSpec spec;
  std::vector<Array> values;     // this rank's copies
  // Per variable (grown on demand): the storage of its previous value, kept when an update
  // replaces it and handed to the next call that updates it (call_engine.cpp).
  std::vector<Array> spares;
};

struct Registry {
  std::map<std::string, FunctionLoader, std::less<>> loaders;
  std::map<std::string, RankHandler, std::less<>> handlers;
  std::vector<std::unique_ptr<FunctionEntry>> functions;   // by id; null until known here
  std::vector<std::unique_ptr<ModuleEntry>> modules;       // by id; null until known here

  static Registry& instance();
};

// Store keys under which the master publishes registrations made after the fork.
std::string function_key(int32_t id);
std::string module_key(int32_t id);
std::string encode_function_entry(const FunctionEntry& entry);
void decode_function_entry(std::string_view bytes, FunctionEntry* entry);

}  // namespace synk::rt
