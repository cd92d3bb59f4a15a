// The optional comparison of collectives across the node leaders (SYNK_CHECK_NODES=1;
// collectives_internal.h's NodeCheck): each leader sends a sentence saying which collective it is
// about to run, or its refusal, and the leaders compare them before any data moves across nodes.
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/call/call_nodes.h"
#include "runtime/data/dtype.h"
#include "runtime/node/cluster.h"
#include "synk/collectives_internal.h"

namespace synk::collectives_internal {
namespace {

// The check of this thread's outermost collective: its name, and whether agree is still to come.
struct Pending {
  const char* what = nullptr;
  bool open = false;
};
thread_local Pending t_pending;

constexpr std::string_view kPrefix = "the collective ";

}  // namespace

bool NodeCheck::enabled() {
  static const bool on = [] {
    const char* s = std::getenv("SYNK_CHECK_NODES");
    if (!s || !*s || std::strcmp(s, "0") == 0) return false;
    if (std::strcmp(s, "1") == 0) return true;
    throw UsageError(fmt::format("SYNK_CHECK_NODES: expected 0 or 1, received '{}'", s));
  }();
  return on;
}

NodeCheck::NodeCheck(const char* what) {
  if (t_pending.what || !rt::cluster() || !enabled()) return;
  owner_ = true;
  t_pending = Pending{what, true};
}

NodeCheck::~NodeCheck() {
  if (owner_) t_pending = Pending{};
}

void NodeCheck::agree(const std::function<std::string()>& detail) {
  if (!t_pending.open) return;
  const char* what = t_pending.what;
  const std::string mine = fmt::format("{}{}{}", kPrefix, what, detail());   // may throw: a refusal then
  t_pending.open = false;
  const std::vector<std::string> all = rt::exchange_first_fields(what, mine);
  for (size_t n = 0; n < all.size(); ++n)
    if (rt::is_refusal(all[n]))
      throw UsageError(fmt::format("{}: node {}'s leader refused it before any data moved, so no node ran it "
                                   "(the leaders stay in step): {}", what, n, rt::refusal_reason(all[n])));
  std::string differ;
  for (size_t n = 0; n < all.size(); ++n) {
    const bool collective = all[n].rfind(kPrefix, 0) == 0;
    differ += fmt::format("; node {}: {}", n, collective ? all[n].substr(kPrefix.size()) : "a call, " + all[n]);
  }
  for (const std::string& other : all)
    if (other != mine)
      throw UsageError(fmt::format("{}: the nodes' leaders make different collectives (every node must make the "
                                   "same ones in the same order, docs/multinode.md){}", what, differ));
}

std::string describe_targets(rt::ProcessGroup* g, const std::vector<Target>& ts, bool shapes) {
  std::string out;
  for (const Target& t : ts)
    out += fmt::format("{}'{}' {}{}", out.empty() ? "" : ", ", t.name(), rt::dtype_name(t.spec->dtype),
                       shapes ? rt::shape_string(shape_on(g, t, 0)) : "");
  return out;
}

void NodeCheck::finished() const {
  if (owner_ && t_pending.open)
    throw InternalError(fmt::format("{}: SYNK_CHECK_NODES: the collective ended without comparing itself across "
                                    "the leaders", t_pending.what));
}

void NodeCheck::refused(const std::exception& e) {
  if (!owner_ || !t_pending.open) return;
  t_pending.open = false;
  const Error* error = dynamic_cast<const Error*>(&e);
  rt::fail_call_before_start(error ? *error : UsageError(e.what()));
}

}  // namespace synk::collectives_internal
