// The helpers the master's side of the collectives shares between its two files
// (collectives.cpp: reductions, broadcast, one rank's values; collectives_rows.cpp: scatter,
// gather, all_gather, shapes): option and argument checks, and running one collective's
// descriptor on the group. Not part of the public API.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/call/registry.h"
#include "runtime/coll/exec.h"
#include "runtime/group/process_group.h"
#include "synk/collectives.h"

namespace synk::collectives_internal {

// A shared variable a collective names: where the runtime keeps it and its declaration.
struct Target {
  rt::CollVar cv;
  rt::ModuleEntry* module = nullptr;
  const rt::SharedSpec* spec = nullptr;
  const std::string& name() const { return spec->name; }
};

CollectiveOptions merged(const char* what, const CollectiveOptions& o);
rt::ProcessGroup& group_for(const char* what);   // UsageError when no group runs
int ranks_now();                                  // global ranks (1 without a group)
bool across_nodes(const char* what);              // whether the collective spans nodes
std::vector<Target> targets(const char* what, const std::vector<Var>& vars);
// Rank `rank`'s shape of `t` (the master's record of the workers' shapes).
const std::vector<int64_t>& shape_on(rt::ProcessGroup* g, const Target& t, int rank);
void require_equal_shapes(const char* what, rt::ProcessGroup& g, const Target& t, const char* instead);
void require_rows(const char* what, rt::ProcessGroup& g, const Target& t);
void require_length_allowed(const char* what, const Target& t, int64_t rows, int rank);
rt::Array conform(const char* what, const Target& t, const Value& v, size_t index, bool force_cast = false);
void check_value_count(const char* what, const std::vector<Target>& ts, const Values& values);

void fill_descriptor(rt::CollDescriptor& d, const std::vector<Target>& ts, const CollectiveOptions& o);
rt::CollDescriptor& descriptor();   // the calling thread's, cleared
// The start of most collectives: the options merged with the defaults, the group, the checked
// variables, and a fresh descriptor of `kind` for them.
struct Setup {
  CollectiveOptions o;
  rt::ProcessGroup& g;
  std::vector<Target> ts;
  rt::CollDescriptor& d;
};
Setup setup(const char* what, rt::CollKind kind, const Vars& vars, const CollectiveOptions& options);
// Runs `d` on every rank of `g`; errors become exceptions naming `what`.
void run(const char* what, rt::ProcessGroup& g, rt::CollDescriptor& d, const std::vector<Target>& ts,
         rt::MasterIO& io);
// The master's values of `vars` to every rank of this node.
void broadcast_local(const char* what, const Vars& vars, const CollectiveOptions& options);

// Across nodes, node 0 alone checks the values of some collectives (the others' are ignored)
// and sends its error, if any, in place of them: `status_array` carries it (empty: none) as the
// first array of the message, and `throw_node_zero_error` raises it on the other leaders.
rt::Array status_array(const std::string& error);
void throw_node_zero_error(const std::vector<rt::Array>& message);

}  // namespace synk::collectives_internal
