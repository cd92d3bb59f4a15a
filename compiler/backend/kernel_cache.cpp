// The on-disk kernel cache (see kernel_cache.h). Entry layout, little-endian:
//   bytes 0..7    magic "SYNKOBJ1"
//   bytes 8..23   the key as 16 raw bytes (guards against a file copied under another name)
//   bytes 24..31  payload length
//   bytes 32..47  XXH3-128 of the payload
//   bytes 48..    payload
#include "compiler/backend/kernel_cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

namespace synk::compiler {
namespace {

constexpr char kMagic[8] = {'S', 'Y', 'N', 'K', 'O', 'B', 'J', '1'};
constexpr size_t kHeaderSize = 48;

std::string hex128(XXH128_hash_t h) { return fmt::format("{:016x}{:016x}", h.high64, h.low64); }

void put_u64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint64_t get_u64(const char* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

bool parse_key(const std::string& key, char out[16]) {
  if (key.size() != 32) return false;
  for (size_t i = 0; i < 16; ++i) {
    unsigned v = 0;
    if (std::sscanf(key.c_str() + 2 * i, "%2x", &v) != 1) return false;
    out[i] = char(v);
  }
  return true;
}

// mkdir -p with mode 0700 for the directories we create.
bool make_dirs(const std::string& dir) {
  if (dir.empty()) return false;
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) make_dirs(dir.substr(0, slash));
  return ::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST;
}

std::atomic<int64_t> g_expected_owner{-1};
uid_t expected_owner() {
  int64_t o = g_expected_owner.load();
  return o >= 0 ? uid_t(o) : ::geteuid();
}

// One warning per directory and process: the refusal matters, repeating it does not.
void warn_once(const std::string& dir, const std::string& why) {
  static std::mutex mutex;
  static std::set<std::string>* warned = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  if (!warned->insert(dir).second) return;
  std::fprintf(stderr, "synk: warning: not using the kernel cache %s: %s; compiling without the disk cache\n",
               dir.c_str(), why.c_str());
}

// Reads a whole file opened by descriptor; nullopt on a read error.
std::optional<std::vector<char>> read_all(int fd) {
  std::vector<char> bytes;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return bytes;
    bytes.insert(bytes.end(), buf, buf + n);
  }
}

bool write_all(int fd, const std::vector<char>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// Closes a descriptor at the end of a scope.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string cache_key(const std::vector<std::string_view>& parts) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  for (std::string_view part : parts) {
    uint64_t n = part.size();
    XXH3_128bits_update(&state, &n, sizeof n);
    XXH3_128bits_update(&state, part.data(), part.size());
  }
  return hex128(XXH3_128bits_digest(&state));
}

std::string KernelCache::default_dir() {
  if (const char* d = std::getenv("SYNK_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/synk";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/synk";
  // No HOME (a service, `env -i`): the passwd entry's home rather than a name in /tmp that another
  // user can take first.
  struct passwd pw, *found = nullptr;
  char buf[4096];
  if (::getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &found) == 0 && found && found->pw_dir && found->pw_dir[0])
    return std::string(found->pw_dir) + "/.cache/synk";
  return "/tmp/synk-cache-" + std::to_string(::geteuid());
}

void KernelCache::set_expected_owner_for_tests(std::optional<uid_t> uid) {
  g_expected_owner.store(uid ? int64_t(*uid) : -1);
}

int KernelCache::open_dir() const {
  refusal_.clear();
  if (!make_dirs(dir_)) {   // cannot be created (read-only home, ...): no cache, said once
    refusal_ = fmt::format("it cannot be created ({}); set SYNK_CACHE_DIR to a writable directory",
                           std::strerror(errno));
    warn_once(dir_, refusal_);
    return -1;
  }
  int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  const uid_t owner = expected_owner();
  if (::fstat(fd, &st) != 0) refusal_ = fmt::format("cannot stat it: {}", std::strerror(errno));
  else if (!S_ISDIR(st.st_mode)) refusal_ = "it is not a directory";
  else if (st.st_uid != owner)
    refusal_ = fmt::format("it is owned by uid {}, not by this user (uid {})", st.st_uid, owner);
  else if (st.st_mode & 077)
    refusal_ = fmt::format("its mode is {:04o}, so other users can write or read it (make it private: chmod 700 {})",
                           st.st_mode & 07777, dir_);
  if (refusal_.empty()) return fd;
  ::close(fd);
  warn_once(dir_, refusal_);
  return -1;
}

std::string KernelCache::refusal() const {
  Fd dir{open_dir()};
  return refusal_;
}

KernelCache::KernelCache(std::string dir) : dir_(dir.empty() ? default_dir() : std::move(dir)) {}

std::string KernelCache::path_for(const std::string& key) const { return dir_ + "/" + key + ".o"; }

std::optional<std::vector<char>> KernelCache::get(const std::string& key) const {
  char raw_key[16];
  if (!parse_key(key, raw_key)) return std::nullopt;
  Fd dir{open_dir()};
  if (dir.fd < 0) return std::nullopt;
  const std::string name = key + ".o";
  std::optional<std::vector<char>> read;
  {
    Fd file{::openat(dir.fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)};
    if (file.fd < 0) return std::nullopt;   // absent, or a symlink (ELOOP): a miss; put() replaces it
    struct stat st;
    // Only a regular file of the user's: nothing another user could have put there.
    if (::fstat(file.fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == expected_owner()) read = read_all(file.fd);
  }
  const std::vector<char> none;
  const std::vector<char>& bytes = read ? *read : none;
  bool valid = read && bytes.size() >= kHeaderSize && std::memcmp(bytes.data(), kMagic, 8) == 0 &&
               std::memcmp(bytes.data() + 8, raw_key, 16) == 0 &&
               get_u64(bytes.data() + 24) == bytes.size() - kHeaderSize;
  if (valid) {
    XXH128_hash_t sum = XXH3_128bits(bytes.data() + kHeaderSize, bytes.size() - kHeaderSize);
    valid = get_u64(bytes.data() + 32) == sum.high64 && get_u64(bytes.data() + 40) == sum.low64;
  }
  if (!valid) {
    // Another process may have replaced it with a good entry since we read it; removing a good
    // entry only costs a recompile, so no locking is needed.
    ::unlinkat(dir.fd, name.c_str(), 0);
    return std::nullopt;
  }
  return std::vector<char>(bytes.begin() + kHeaderSize, bytes.end());
}

bool KernelCache::put(const std::string& key, const std::vector<char>& payload) const {
  char raw_key[16];
  if (!parse_key(key, raw_key)) return false;
  std::vector<char> bytes(kHeaderSize + payload.size());
  std::memcpy(bytes.data(), kMagic, 8);
  std::memcpy(bytes.data() + 8, raw_key, 16);
  put_u64(bytes.data() + 24, payload.size());
  XXH128_hash_t sum = XXH3_128bits(payload.data(), payload.size());
  put_u64(bytes.data() + 32, sum.high64);
  put_u64(bytes.data() + 40, sum.low64);
  if (!payload.empty()) std::memcpy(bytes.data() + kHeaderSize, payload.data(), payload.size());

  Fd dir{open_dir()};
  if (dir.fd < 0) return false;
  // Writers take the cache's lock; the temporary name is random and created with O_EXCL, so no
  // other process (or a file planted under that name) can be written through.
  while (::flock(dir.fd, LOCK_EX) != 0)
    if (errno != EINTR) return false;
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format(".tmp-{}-{}-{}-{:x}", key, ::getpid(), counter++, std::random_device{}());
  bool ok = false;
  {
    Fd file{::openat(dir.fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
    ok = file.fd >= 0 && write_all(file.fd, bytes);
    if (file.fd >= 0) ok = (::close(std::exchange(file.fd, -1)) == 0) && ok;
  }
  const std::string name = key + ".o";
  if (ok) ok = ::renameat(dir.fd, tmp.c_str(), dir.fd, name.c_str()) == 0;
  if (!ok) ::unlinkat(dir.fd, tmp.c_str(), 0);
  ::flock(dir.fd, LOCK_UN);
  return ok;
}

}  // namespace synk::compiler
