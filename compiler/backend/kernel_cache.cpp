// The on-disk kernel cache (see kernel_cache.h). Entry layout, little-endian:
//   bytes 0..7    magic "SYNKOBJ1"
//   bytes 8..23   the key as 16 raw bytes (guards against a file copied under another name)
//   bytes 24..31  payload length
//   bytes 32..47  XXH3-128 of the payload
//   bytes 48..    payload
#include "compiler/backend/kernel_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

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
  return "/tmp/synk-cache-" + std::to_string(::getuid());
}

KernelCache::KernelCache(std::string dir) : dir_(dir.empty() ? default_dir() : std::move(dir)) {}

std::string KernelCache::path_for(const std::string& key) const { return dir_ + "/" + key + ".o"; }

std::optional<std::vector<char>> KernelCache::get(const std::string& key) const {
  char raw_key[16];
  if (!parse_key(key, raw_key)) return std::nullopt;
  std::string path = path_for(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bool valid = bytes.size() >= kHeaderSize && std::memcmp(bytes.data(), kMagic, 8) == 0 &&
               std::memcmp(bytes.data() + 8, raw_key, 16) == 0 &&
               get_u64(bytes.data() + 24) == bytes.size() - kHeaderSize;
  if (valid) {
    XXH128_hash_t sum = XXH3_128bits(bytes.data() + kHeaderSize, bytes.size() - kHeaderSize);
    valid = get_u64(bytes.data() + 32) == sum.high64 && get_u64(bytes.data() + 40) == sum.low64;
  }
  if (!valid) {
    // Another process may have replaced it with a good entry since we read it; removing a good
    // entry only costs a recompile, so no locking is needed.
    ::unlink(path.c_str());
    return std::nullopt;
  }
  return std::vector<char>(bytes.begin() + kHeaderSize, bytes.end());
}

bool KernelCache::put(const std::string& key, const std::vector<char>& payload) const {
  char raw_key[16];
  if (!parse_key(key, raw_key) || !make_dirs(dir_)) return false;
  std::vector<char> bytes(kHeaderSize + payload.size());
  std::memcpy(bytes.data(), kMagic, 8);
  std::memcpy(bytes.data() + 8, raw_key, 16);
  put_u64(bytes.data() + 24, payload.size());
  XXH128_hash_t sum = XXH3_128bits(payload.data(), payload.size());
  put_u64(bytes.data() + 32, sum.high64);
  put_u64(bytes.data() + 40, sum.low64);
  if (!payload.empty()) std::memcpy(bytes.data() + kHeaderSize, payload.data(), payload.size());

  // A name no other process or thread can pick: pid + a process-local counter + random bits.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = fmt::format("{}/.tmp-{}-{}-{}-{:x}", dir_, key, ::getpid(), counter++,
                                std::random_device{}());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  bool ok = done == bytes.size();
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path_for(key).c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace synk::compiler
