// The on-disk kernel cache: compiled object files keyed by a 128-bit hash (XXH3-128) of
// everything that determines them (source, options, target, compiler version). Shared by every
// process of the user, so writes go to a temporary file created with O_EXCL, under the cache's
// lock (flock on the directory), that is then renamed into place (rename is atomic: readers see
// the old entry, no entry, or the whole new one). Each entry starts with a header (magic, key,
// payload length, payload checksum); an entry that fails the check (truncated, corrupt, written by
// something else, not a regular file of the user's) is removed and reported as a miss.
//
// The cache holds code that will run, so it is used only when it is the user's own: a directory
// owned by the effective uid with no permission for group or others (created with mode 0700 when
// missing). Any other directory (another user's, group- or world-writable, not a directory) is
// refused with one warning per process on stderr, and everything is compiled in process without
// the disk cache. Entries are opened relative to the checked directory, never through symlinks.
//
// Directory: $SYNK_CACHE_DIR, else $XDG_CACHE_HOME/synk, else $HOME/.cache/synk, else the home
// directory of the user's passwd entry + /.cache/synk, else /tmp/synk-cache-<uid> (which another
// user could create first: then refused as above).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace synk::compiler {

// How a compiled function got its code, for tests and benchmarks: from this process's table of
// loaded objects, from the on-disk cache, or from the compiler.
enum class CacheOutcome { MemoryHit, DiskHit, Compiled };

// 32 hex digits of XXH3-128 over the parts, each length-prefixed so that ("ab","c") and
// ("a","bc") differ.
std::string cache_key(const std::vector<std::string_view>& parts);

class KernelCache {
 public:
  // dir empty: the default directory described above.
  explicit KernelCache(std::string dir = {});
  static std::string default_dir();
  const std::string& dir() const { return dir_; }

  // The payload stored under key, or nullopt (absent, or corrupt and now removed).
  std::optional<std::vector<char>> get(const std::string& key) const;
  // Stores payload under key. Failure to write (read-only directory, disk full) is not an
  // error for the caller: the cache is an optimisation. Returns whether the entry was written.
  bool put(const std::string& key, const std::vector<char>& payload) const;
  std::string path_for(const std::string& key) const;

  // Why the directory is not used ("" when it is, or when it merely cannot be created: the cache
  // is then silently absent, as for a read-only home). Checked on first use.
  std::string refusal() const;
  // Tests: the owner the directory must have instead of geteuid() (nullopt: back to geteuid()).
  static void set_expected_owner_for_tests(std::optional<uid_t> uid);

 private:
  // An open descriptor of the directory when it is trusted, else -1 (and refusal_ says why).
  int open_dir() const;
  std::string dir_;
  mutable std::string refusal_;
};

}  // namespace synk::compiler
