// The on-disk kernel cache: compiled object files keyed by a 128-bit hash (XXH3-128) of
// everything that determines them (source, options, target, compiler version). Shared by every
// process of the user, so writes go to a unique temporary file that is then renamed into place
// (rename is atomic: readers see the old entry, no entry, or the whole new one). Each entry
// starts with a header (magic, key, payload length, payload checksum); an entry that fails the
// check (truncated, corrupt, written by something else) is removed and reported as a miss.
//
// Directory: $SYNK_CACHE_DIR, else $XDG_CACHE_HOME/synk, else $HOME/.cache/synk; created with
// mode 0700 on first write.
#pragma once

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

 private:
  std::string dir_;
};

}  // namespace synk::compiler
