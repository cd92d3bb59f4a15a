// save_failure_file (failure_files.h): a private mkdtemp directory per process, files created
// exclusively, so that a predictable name in a shared /tmp can neither be taken first nor be a
// symlink that redirects the write.
#include "compiler/backend/failure_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace synk::compiler {

namespace {
// The directory of this process, made on first use (again in a forked child: its pid differs).
std::string private_dir(std::string* error) {
  static std::mutex mutex;
  static pid_t made_by = 0;
  static std::string* dir = new std::string();
  std::lock_guard<std::mutex> lock(mutex);
  if (made_by == ::getpid() && !dir->empty()) return *dir;
  const char* tmpdir = std::getenv("TMPDIR");
  std::string templ = fmt::format("{}/synk-failed-{}-XXXXXX", (tmpdir && *tmpdir) ? tmpdir : "/tmp", ::getpid());
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    *error = fmt::format("{}: {}", templ, std::strerror(errno));
    return {};
  }
  *dir = buf.data();
  made_by = ::getpid();
  return *dir;
}
}  // namespace

std::string save_failure_file(std::string_view text, std::string_view name_hint, std::string_view extension) {
  static std::atomic<int> counter{0};
  std::string safe;
  for (char c : name_hint) safe += (std::isalnum((unsigned char)c) || c == '_') ? c : '_';
  std::string error;
  const std::string dir = private_dir(&error);
  if (dir.empty()) return "<could not write a failure file: " + error + ">";
  const std::string path = fmt::format("{}/{}-{}.{}", dir, safe, counter++, extension);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fmt::format("<could not write {}: {}>", path, std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  const bool ok = ::close(fd) == 0 && done == text.size();
  return ok ? path : fmt::format("<could not write {}: {}>", path, std::strerror(errno));
}

}  // namespace synk::compiler
