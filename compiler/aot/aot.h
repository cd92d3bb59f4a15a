// Ahead-of-time artifacts, synkc's side (docs/compiler.md, "Ahead-of-time artifacts"):
//   synkc model.synk -o libmodel.a --header model.h   a static library + its typed header
//   synkc model.synk --main driver.cpp -o app          the user's driver linked with the module
//   synkc model.synk -o libmodel.so                    a loadable library (synk::aot::load_library,
//                                                      synk.load_library in Python)
//   synkc model.synk --emit=stub | --emit=header        the generated C++ (lit checks them)
// generate() makes the texts: per function the CPU kernel source (the JIT's code generator, entry
// names prefixed with the module name so that two modules link into one binary), the host stub
// (the .synk text, a kernel symbol table, hashes of the kernel sources; aot_runtime.h does the
// rest at run time) and the header. build_library()/build_executable() compile the kernels with
// the in-process Clang and the stub/driver with the system C++ compiler, then archive or link.
// With GPU architectures (AotOptions::cuda_archs) each function's CUDA program is compiled by
// NVRTC to a CUBIN per architecture plus PTX of the newest; the stub embeds the images (one ELF
// section each, .synk_gpu.<module>.<function>.<arch>, so readelf/objdump list them) and the
// runtime picks the one for the device (synk/aot_module.h).
//
// Errors: a wrong .synk program is a synk::UserError; a driver that does not compile or link is
// an AotUserError (exit 1, the compiler's output in the message); a failure building synk's own
// generated code is a synk::InternalError naming the saved file.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "base/errors.h"
#include "compiler/cuda/cuda_images.h"
#include "ir/ir.h"

namespace synk::compiler::aot {

// The one symbol a loadable library exports (synk::aot::kLibrarySymbol, which synk/aot_module.cpp
// checks equal to this at compile time).
inline constexpr const char* kLibraryEntrySymbol = "synk_aot_library_v1";

struct AotOptions {
  std::string module_name;   // empty: from the file's stem (sanitized to a C++ identifier)
  std::string target_cpu;    // empty: the host's CPU and features (what the JIT uses)
  bool bundle = true;        // -o lib.a: also merge synk's own static libraries into the archive
  bool keep_temps = false;   // keep the build directory (its path is printed)
  bool embed_data = true;    // build the .npy files of load() initialisers into the artifact
  bool loadable_library = false;   // -o lib.so: a stub that registers nothing and exports one LibraryDef
  std::vector<std::string> functions;   // empty: every function; else only these (known names)
  // GPU architectures: a CUBIN for each and PTX for the newest (compiler/cuda/cuda_images.h);
  // empty: a CPU-only artifact.
  std::vector<int> cuda_archs;
  std::vector<bool> cuda_arch_specific;   // per cuda_archs entry: sm_90a rather than sm_90
};

// One function's generated kernels (no source when every kernel is a BLAS call).
struct AotKernels {
  std::string function;
  std::string source;
  std::vector<std::string> symbols;          // JIT names (kernel_symbol, no prefix)
  std::vector<std::string> linked_symbols;   // the same with the module prefix
  bool has_gpu = false;                      // a GPU version was built (cuda_archs not empty)
  CudaImageSet cuda;                         // its images (none when every kernel is a BLAS call)
  std::vector<std::string> gpu_files;        // per image: the file name the stub's .incbin reads
};

struct AotModule {
  std::string name;      // the C++ namespace and kernel-symbol prefix
  std::string header;
  std::string stub;
  std::vector<AotKernels> kernels;
  std::vector<std::string> data_files;   // absolute paths of the load() files built in (none without embed_data)
};

// A user's driver that failed to compile or link, or an artifact that cannot be written (a user
// error, exit status 1; its message may quote the C++ compiler's diagnostics).
class AotUserError : public UserError {
 public:
  using UserError::UserError;
};

// "my-model.synk" -> "my_model"; leading digits and C++ keywords get an underscore.
std::string module_name_from_path(const std::string& path);
std::string cxx_identifier(const std::string& name);

// Front end + lower() + code generation. `source_name` is the path as the user gave it.
AotModule generate(const std::string& source_name, const std::string& text, const AotOptions& options);
// The same for a module the caller has already prepared (compiler/pipeline.h) from `text`, so
// that synkc parses its input once.
AotModule generate(const ir::Module& prepared, const std::string& source_name, const std::string& text,
                   const AotOptions& options);

// -o libX.a (+ header when header_path is not empty).
void build_library(const AotModule& module, const std::string& archive_path, const std::string& header_path,
                   const AotOptions& options);
// -o libX.so (AotOptions::loadable_library): the kernels and the stub, linked into a shared
// object that needs none of synk's symbols (BLAS, oneDNN and libm only) and exports one.
void build_loadable_library(const AotModule& module, const std::string& path, const AotOptions& options);
// --main driver.cpp -o app.
void build_executable(const AotModule& module, const std::string& driver_path, const std::string& output_path,
                      const AotOptions& options);

// What a program linking a bundled libX.a needs after it (e.g. "-lopenblas -lfmt -lpthread ...");
// with bundle=false, synk's own static libraries come first.
std::string link_flags(bool bundle);
// The -I options for a driver (synk's headers).
std::string include_flags();

}  // namespace synk::compiler::aot
