// claim_node_cpus (placement.h): OpenMPI says through the environment whether the user chose a
// binding (OMPI_MCA_hwloc_base_binding_policy, set by --bind-to) and how many of the job's
// processes share this host (OMPI_COMM_WORLD_LOCAL_SIZE / _LOCAL_RANK).
#include "runtime/node/placement.h"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/group/process_group.h"

namespace synk::rt {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return *end || x < 0 || x > 1'000'000 ? fallback : int(x);
}

std::string list(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size(); ++i) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    s += fmt::format("{}{}", s.empty() ? "" : ",", i == j ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]));
    i = j;
  }
  return s;
}

}  // namespace

std::string claim_node_cpus() {
  // Only OpenMPI's default binding or --bind-to none, and a launcher that says who shares the host.
  const char* policy = std::getenv("OMPI_MCA_hwloc_base_binding_policy");
  const bool unbound = policy && std::string(policy) == "none";
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") || (policy && !unbound)) return "";
  const int sharing = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 0), index = env_int("OMPI_COMM_WORLD_LOCAL_RANK", -1);
  if (sharing < 1 || index < 0 || index >= sharing) return "";
  cpu_set_t before;
  CPU_ZERO(&before);
  if (sched_getaffinity(0, sizeof before, &before) != 0) return "";
  // Every online CPU; the kernel keeps only those the process's cpuset (a batch system's
  // allocation) allows.
  cpu_set_t all;
  CPU_ZERO(&all);
  const long online = sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < online && c < CPU_SETSIZE; ++c) CPU_SET(int(c), &all);
  if (sched_setaffinity(0, sizeof all, &all) != 0) return "";
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    sched_setaffinity(0, sizeof before, &before);
    return "";
  }
  const std::vector<int> host = allowed_cpus(allowed);
  if (host.size() < size_t(sharing)) {   // more leaders than CPUs: no share of its own to take
    sched_setaffinity(0, sizeof before, &before);
    return "";
  }
  const size_t lo = host.size() * size_t(index) / size_t(sharing), hi = host.size() * size_t(index + 1) / size_t(sharing);
  const std::vector<int> share(host.begin() + ptrdiff_t(lo), host.begin() + ptrdiff_t(hi));
  cpu_set_t mine;
  CPU_ZERO(&mine);
  for (int c : share) CPU_SET(c, &mine);
  if (sched_setaffinity(0, sizeof mine, &mine) != 0) {
    sched_setaffinity(0, sizeof before, &before);
    return "";
  }
  const std::vector<int> was = allowed_cpus(before);
  if (was == share) return "";
  return fmt::format("node {}: this leader takes CPU{} {} for its ranks, its share of the {} CPUs this host lets its "
                     "{} leader{} use (mpirun {} CPU{} {})", env_int("OMPI_COMM_WORLD_RANK", 0),
                     share.size() == 1 ? "" : "s", list(share), host.size(), sharing, sharing == 1 ? "" : "s",
                     unbound ? "with --bind-to none left it on" : "had bound it, by default, to",
                     was.size() == 1 ? "" : "s", list(was));
}

}  // namespace synk::rt
