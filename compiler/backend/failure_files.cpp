// save_failure_file (failure_files.h).
#include "compiler/backend/failure_files.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

namespace synk::compiler {

std::string save_failure_file(std::string_view text, std::string_view name_hint, std::string_view extension) {
  static std::atomic<int> counter{0};
  const char* tmpdir = std::getenv("TMPDIR");
  std::string safe;
  for (char c : name_hint) safe += (std::isalnum((unsigned char)c) || c == '_') ? c : '_';
  std::string path = fmt::format("{}/synk-failed-{}-{}-{}.{}", (tmpdir && *tmpdir) ? tmpdir : "/tmp", safe, ::getpid(),
                                 counter++, extension);
  std::ofstream out(path);
  out << text;
  return out ? path : "<could not write " + path + ">";
}

}  // namespace synk::compiler
