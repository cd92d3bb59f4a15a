// What the host stub of an ahead-of-time module (written by `synkc -o libX.a` / `--main`) links
// against: a module's baked description (its .synk text, the kernel symbols it was compiled
// with and a hash of their generated source) and the calls its generated header's entry points
// make. Everything here runs without LLVM: the text goes through the front end and lower() at
// first use, and the CpuFunction takes its kernels from the linked table, not from a JIT. A
// function with GPU images runs on the backend of the group it is called in (BackendFunction):
// in a GPU group the image for the device is loaded (never NVRTC); elsewhere the CPU kernels run.
//
// Functions are registered with the runtime under loader kind "aot" (payload: module name, then
// '\0', then function name; for a loadable library's module also '\0' and the library's path),
// so that workers forked before a function was first used rebuild it from the same linked table;
// every stub registers its module at static-initialisation time.
//
// A loadable library (`synkc -o libX.so`) holds the same tables but registers nothing by itself
// and refers to no symbol of synk: its one exported symbol, kLibrarySymbol, returns a LibraryDef,
// and load_library() (here, for C++ programs; synk.load_library in Python) registers what it
// describes. So one library loads into any program that links synk, whatever its symbol
// visibility (a Python extension's are hidden), and workers forked before it was loaded load it
// themselves when a call first needs one of its functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/source_hash.h"
#include "synk/shared_variable.h"
#include "synk/synk.h"

namespace synk::ir {
struct Module;
}

namespace synk::aot {

inline constexpr const char* kLoaderKind = "aot";

using KernelEntry = int64_t (*)(void* const* bufs, const int64_t* syms, int64_t* err);

// One generated kernel: its JIT name (kernel_symbol without prefix) and the linked entry.
struct KernelSymbol {
  const char* name;
  KernelEntry entry;
};

// One pre-built GPU image of a function (synkc --cuda-arch): bytes embedded in the stub.
enum class GpuImageKind : int { Cubin = 0, Ptx = 1, ArchSpecificCubin = 2 };
struct GpuImage {
  int sm;                         // 80: sm_80 (CUBIN) or compute_80 (PTX)
  GpuImageKind kind;
  int min_driver;                 // the CUDA driver version it needs (13000 = 13.0)
  const char* begin;              // PTX includes its terminating NUL
  const char* end;
};

// One function of the module as synkc compiled it.
struct FunctionTable {
  const char* name;
  uint64_t source_hash;           // source_hash() of the kernel source synkc compiled
  const KernelSymbol* kernels;
  size_t kernel_count;
  // The GPU version (none: the function runs on the CPU in every group): source_hash() of its
  // CUDA program and the images the runtime chooses from for the device (compiler/cuda/cuda_images.h).
  uint64_t cuda_source_hash = 0;
  const GpuImage* gpu_images = nullptr;
  size_t gpu_image_count = 0;
};

// Everything the stub bakes in. All pointers are to static data of the stub.
struct ModuleDef {
  const char* name;               // the C++ namespace of the header; also the symbol prefix
  const char* source_name;        // the .synk path as given to synkc (messages quote it)
  const char* base_dir;           // absolute directory of relative load("...") paths
  const char* text;               // the .synk source
  const FunctionTable* functions;
  size_t function_count;
};

// A .npy file of a load() initialiser built into a loadable library (see embed_data).
struct EmbeddedFile {
  const char* path;
  const char* begin;
  const char* end;
};

// What a loadable library describes. `abi` and `module_def_size` let load_library refuse a library
// written by a synkc whose tables have another layout, with a message instead of a crash.
inline constexpr uint32_t kLibraryAbi = 1;
inline constexpr const char* kLibrarySymbol = "synk_aot_library_v1";
struct LibraryDef {
  uint32_t abi;
  uint32_t module_def_size;       // sizeof(ModuleDef) in the synkc that wrote it
  const ModuleDef* module;
  const EmbeddedFile* data;
  size_t data_count;
};

// FNV-1a 64 of the text; stable across builds and machines (baked into stubs).
using synk::source_hash;

// Makes `def` known to this process (and, through fork, to workers). Called by every stub's
// static initialiser; also registers the "aot" loader. A second module with the same name is an
// internal error at first use of either (two artifacts of one name linked into one binary).
bool register_module(const ModuleDef* def);

// A .npy file of a load() initialiser, built into the stub (its absolute path as the module's
// load() resolves it, and its bytes): both the front end, which checks the file when the stub's
// source is analysed at run time, and the runtime, which reads the values, find it in memory.
// Called by the stub's static initialisers; returns true.
bool embed_data(const char* path, const char* begin, const char* end);

// Registers the "aot" loader with the runtime (register_module does; so does the JIT's
// register_loader, so that workers forked before a library is loaded can build its functions).
void register_loader();

// Loads a library written by `synkc -o libX.so` (dlopen; never unloaded) and registers its module
// and embedded files; returns the module. Loading one path again returns the same module.
// UsageError when the file cannot be loaded, is not a synk library, was written by an
// incompatible synkc, or holds a module whose name another loaded or linked module already has.
const ModuleDef& load_library(const std::string& path);

// The module as the runtime prepared it from the baked source (what its functions were built from).
const ir::Module& prepared_module(const ModuleDef& def);

// The module's shared variables, registered with the runtime on first use.
synk::Module runtime_module(const ModuleDef& def);
// Function `name`, built and registered on first use (later calls return the same handle).
// UsageError for an unknown name; InternalError when the linked kernels do not match the code the
// stub regenerates (an artifact built by another synkc).
synk::Function function(const ModuleDef& def, const std::string& name);
// Builds and registers every function now (before synk::fork(): workers inherit them).
void load_all(const ModuleDef& def);
std::vector<std::string> function_names(const ModuleDef& def);
std::vector<std::string> shared_names(const ModuleDef& def);

// The step `<function>_step()` returns: `made`, counting in the module's step count for its function
// (shared by every step made for it; checkpoints save it).
synk::TrainStep train_step(const ModuleDef& def, synk::TrainStep made);

// Checkpoints of the module (synk/checkpoint.h) with the random state of all its functions and
// the training functions' step indices.
void save_checkpoint(const ModuleDef& def, const std::string& dir, const CheckpointMetadata& metadata);
CheckpointMetadata load_checkpoint(const ModuleDef& def, const std::string& dir);

// One shared variable of an AOT module (the same type as synk::jit::Shared).
using Shared = synk::SharedVariable;

// UsageError for an unknown name (listing the module's shared variables).
Shared shared(const ModuleDef& def, const std::string& name);

}  // namespace synk::aot
