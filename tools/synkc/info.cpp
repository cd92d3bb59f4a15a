// `synkc info`: prints synk::machine_info() (synk/machine_info.h), one labelled line per part of
// the machine synk uses, for a user who wonders why it is slow or where it will run, and for bug
// reports. Reads only; starts no process group.
#include <iostream>
#include <map>
#include <string>

#include "synk/machine_info.h"
#include "tools/synkc/driver.h"

namespace synkc {

int run_info(const DriverOptions&) {
  static const std::map<std::string, std::string> labels = {
      {"synk", "synk "},           {"cpu", "CPU:          "},         {"vectors", "  vectors:    "},
      {"usable_cpus", "  usable:     "}, {"jit_target", "JIT target:   "}, {"blas", "BLAS:         "},
      {"onednn", "oneDNN:       "},  {"gpu", "GPU backend:  "},         {"shared_memory", "shared mem:   "},
      {"kernel_cache", "kernel cache: "}};
  for (const auto& [key, text] : synk::machine_info()) {
    const auto label = labels.find(key);
    std::cout << (label != labels.end() ? label->second : key + ": ") << text << "\n";
  }
  return kOk;
}

}  // namespace synkc
