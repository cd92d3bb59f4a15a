// The in-process native compiler: generated C++ (no std headers) goes through Clang's
// CompilerInstance (cc1, -O3, the host CPU with every feature it has) to LLVM IR, then through an
// LLVM TargetMachine to an ELF object file in memory. Objects are loaded into one ORC LLJIT per
// process, created lazily, each into its own JITDylib so that symbol names never clash.
// Compiling and loading are separate so that the kernel cache (kernel_cache.h) can store the
// object and a cache hit skips Clang entirely: compile_cached() does both.
//
// A failure inside Clang or LLVM is an internal error (synk generated bad code): the message
// names a file where the offending source was saved.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/backend/kernel_cache.h"

namespace synk::compiler {

// What the generated code is compiled for. Part of every cache key.
struct JitTarget {
  std::string triple;                 // "x86_64-pc-linux-gnu"
  std::string cpu;                    // LLVM's name for the host CPU ("znver3")
  std::vector<std::string> features;  // "+avx2", "+avx512f", ... (every feature the host has)
  std::string compiler_version;       // LLVM version + synk's code generator version
};
const JitTarget& host_target();

// The cc1 options used for every kernel (without triple/CPU/features), as one string: part of
// every cache key.
const std::string& jit_options_string();

// Compiles C++ source to a relocatable object file. `name_hint` names the saved source file on
// failure. Throws synk::InternalError naming that file.
std::vector<char> compile_to_object(const std::string& source, const std::string& name_hint);

// Same, but returns textual LLVM IR or assembly after optimisation (for tests and --emit
// debugging: "is this loop vectorised?").
std::string compile_to_assembly(const std::string& source, const std::string& name_hint);

// Where the time of the last compile_to_object() in this thread went (for benchmarks), as
// thread CPU seconds: Clang's front end, the LLVM pass pipeline, LLVM code generation. After a
// compile_cached() of several units: the sums over the units' threads.
struct CompileTimes {
  double frontend = 0, optimize = 0, codegen = 0;
};
CompileTimes last_compile_times();

// A loaded object: its symbols stay valid for the life of the process.
class LoadedObject {
 public:
  // Address of an `extern "C"` symbol; throws synk::InternalError when absent.
  void* lookup(const std::string& symbol) const;
  const std::string& dylib_name() const { return dylib_name_; }

 private:
  friend std::shared_ptr<LoadedObject> load_object(const std::vector<char>&, const std::string&);
  friend std::shared_ptr<LoadedObject> load_objects(const std::vector<std::vector<char>>&, const std::string&);
  std::string dylib_name_;
};

// Loads an object file into the process-wide JIT in a fresh JITDylib.
std::shared_ptr<LoadedObject> load_object(const std::vector<char>& object, const std::string& name_hint);
// Loads several object files into one fresh JITDylib (their symbols resolve against each other).
std::shared_ptr<LoadedObject> load_objects(const std::vector<std::vector<char>>& objects, const std::string& name_hint);


struct CachedCompile {
  std::shared_ptr<LoadedObject> object;
  CacheOutcome outcome = CacheOutcome::Compiled;
  std::string key;   // hex digest
};

// The full path: key = hash(source, options, target, compiler version); a process-local table
// of loaded objects, then the on-disk cache (unless use_disk_cache is false), then Clang.
CachedCompile compile_cached(const std::string& source, const std::string& name_hint,
                             bool use_disk_cache = true);

// The same for a source split into translation units (codegen_cpu.h, split_translation_units):
// on a miss the units compile on one thread each, and their objects are cached as one entry and
// loaded into one JITDylib. The key is that of the units' concatenation.
CachedCompile compile_cached(const std::vector<std::string>& units, const std::string& name_hint,
                             bool use_disk_cache = true);

// How many threads the JIT compiles one function's kernels on: $SYNK_JIT_THREADS (1 to 16), else
// the number of CPUs this process may run on, at most 4.
int jit_compile_threads();

// Forgets the process-local table (objects stay loaded); tests use it to force a disk lookup.
void clear_memory_cache_for_tests();

}  // namespace synk::compiler
