// `synkc info`: prints synk::machine_info() (synk/machine_info.h), one labelled line per part of
// the machine synk uses, for a user who wonders why it is slow or where it will run, and for bug
// reports. Reads only; starts no process group.
#include <iostream>
#include <string>

#include "synk/machine_info.h"
#include "tools/synkc/driver.h"

namespace synkc {

int run_info(const DriverOptions&) {
  for (const auto& [key, text] : synk::machine_info()) {
    const std::string label = key == "synk"            ? ""
                              : key == "cpu"           ? "CPU:          "
                              : key == "vectors"       ? "  vectors:    "
                              : key == "usable_cpus"   ? "  usable:     "
                              : key == "jit_target"    ? "JIT target:   "
                              : key == "blas"          ? "BLAS:         "
                              : key == "onednn"        ? "oneDNN:       "
                              : key == "gpu"           ? "GPU backend:  "
                              : key == "shared_memory" ? "shared mem:   "
                              : key == "kernel_cache"  ? "kernel cache: "
                                                       : key + ": ";
    std::cout << (key == "synk" ? "synk " : label) << text << "\n";
  }
  return kOk;
}

}  // namespace synkc
