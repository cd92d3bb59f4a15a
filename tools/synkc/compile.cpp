// synkc's default command (check, --emit=STAGE, artifacts) and `synkc check`: the front end over
// the input, then the requested stage or artifact (see driver.h).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/diagnostics.h"
#include "compiler/aot/aot.h"
#include "compiler/pipeline.h"
#include "compiler/llvm/aot_object.h"
#include "compiler/backend/signature.h"
#include "compiler/cuda/cuda_images.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/emit.h"
#include "synk/jit.h"
#include "dsl/frontend.h"
#include "dsl/parser.h"
#include "runtime/data/dtype.h"
#include "runtime/data/npy.h"
#include "runtime/data/shared_vars.h"
#include "synk/synk.h"

#include "tools/synkc/driver.h"

namespace synkc {

using synk::DiagnosticEngine;
using synk::SourceFile;

// The stages `--emit` accepts, in pipeline order (compiler/pipeline.h).
const std::vector<std::string>& known_stages() { return synk::compiler::pipeline_stages(); }


std::string read_input(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UsageError(fmt::format("cannot read '{}': {}", path, std::strerror(EISDIR)));
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw UsageError(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  bool failed = std::ferror(file);
  int error = errno;
  std::fclose(file);
  if (failed) throw UsageError(fmt::format("cannot read '{}': {}", path, std::strerror(error)));
  return text;
}

namespace {

// The front end over the input file (dsl::FrontEnd), printing each stage's diagnostics to stderr
// as it finishes. Stops at the first stage with errors.
class FrontEnd {
 public:
  explicit FrontEnd(const std::string& path)
      : front_end_(path, read_input(path), std::filesystem::path(path).parent_path().string()) {}
  const SourceFile& file() const { return front_end_.file(); }

  bool parse() { return report(front_end_.parse()); }
  bool analyze() { return report(front_end_.analyze()); }
  const synk::ast::Program& program() const { return front_end_.program(); }
  const synk::ir::Module& module() const { return front_end_.module(); }
  // The analysed module prepared to run (training steps expanded), as the JIT prepares it.
  synk::ir::Module prepared_module() const {
    synk::ir::Module module = front_end_.module();
    synk::compiler::prepare_module(module);
    return module;
  }

 private:
  bool report(bool ok) {
    std::cerr << front_end_.diagnostics_if_new();
    return ok;
  }

  synk::dsl::FrontEnd front_end_;
};

// --cuda-arch: the list given, else the default when NVRTC can be loaded (without it the artifact
// is CPU-only, and synkc says so once).
std::vector<int> cuda_archs(const ArtifactOptions& artifact, std::vector<bool>* arch_specific) {
  if (!artifact.cuda_arch.empty()) return synk::compiler::parse_cuda_archs(artifact.cuda_arch, arch_specific);
  std::string reason;
  if (!synk::compiler::nvrtc_available(&reason)) {
    static bool said = false;
    if (!std::exchange(said, true))
      std::cerr << "synkc: note: building a CPU-only artifact: NVRTC cannot be loaded (" << reason << ")\n";
    return {};
  }
  arch_specific->assign(synk::compiler::default_cuda_archs().size(), false);
  return synk::compiler::default_cuda_archs();
}

synk::compiler::aot::AotOptions aot_options(const ArtifactOptions& artifact) {
  synk::compiler::aot::AotOptions o{.module_name = artifact.module_name, .target_cpu = artifact.target_cpu,
                                    .bundle = !artifact.no_bundle, .keep_temps = artifact.keep_temps,
                                    .embed_data = !artifact.no_embed_data};
  o.cuda_archs = cuda_archs(artifact, &o.cuda_arch_specific);
  return o;
}

// `--depfile FILE`: "OUTPUT: INPUTS..." in Makefile syntax (what Ninja and CMake's DEPFILE read),
// so that a build reruns synkc when the .synk file or an embedded .npy file changes.
void write_depfile(const std::string& path, const std::string& output, const std::string& input,
                   const std::vector<std::string>& data_files) {
  auto escaped = [](const std::string& p) {
    std::string out;
    for (char c : p) {
      if (c == ' ' || c == '#' || c == '\\') out += '\\';
      if (c == '$') out += '$';
      out += c;
    }
    return out;
  };
  std::string rule = escaped(output) + ":";
  rule += " " + escaped(std::filesystem::absolute(input).lexically_normal().string());
  for (const std::string& f : data_files) rule += " \\\n  " + escaped(f);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!(file << rule << "\n") || !file.flush())
    throw UsageError(fmt::format("--depfile: cannot write '{}': {}", path, std::strerror(errno)));
}

// Every --fn NAME must name one of `functions` (the module's): a UsageError otherwise, whatever the
// output, so that a misspelt name is never silently ignored.
void check_function_names(const DriverOptions& options, const std::vector<std::string>& functions) {
  for (const std::string& name : options.artifact.functions)
    if (std::find(functions.begin(), functions.end(), name) == functions.end())
      throw UsageError(fmt::format("--fn {}: '{}' has no function '{}'{} (functions: {})", name, options.input, name,
                                   synk::did_you_mean(name, functions), functions.empty() ? "none" : fmt::format("{}", fmt::join(functions, ", "))));
}

// Runs a compiler stage after the front end: a user error it finds at a known construct (the
// gradient pass's) is reported like the front end's diagnostics, with the source line and a caret.
void run_stage(const FrontEnd& front_end, const std::function<void()>& stage) {
  try {
    stage();
  } catch (const synk::LocatedUserError& e) {
    synk::throw_in_source(front_end.file(), e);
  }
}

// The artifact's texts for the input (which the front end has accepted already; not parsed again).
synk::compiler::aot::AotModule generate_artifact(const DriverOptions& options, const FrontEnd& front_end,
                                                 bool loadable_library = false, bool gpu_images = true) {
  const ArtifactOptions& artifact = options.artifact;
  synk::ir::Module prepared = front_end.prepared_module();
  synk::compiler::aot::AotOptions restricted = aot_options(artifact);
  restricted.loadable_library = loadable_library;
  if (!gpu_images) restricted.cuda_archs.clear();
  if (!artifact.functions.empty()) {
    std::vector<std::string> all;
    for (const synk::ir::Function& fn : prepared.functions) all.push_back(fn.name);
    check_function_names(options, all);
    restricted.functions = artifact.functions;
  }
  return synk::compiler::aot::generate(prepared, options.input, front_end.file().text(), restricted);
}

bool is_archive_name(const std::string& path) { return path.size() > 2 && path.ends_with(".a"); }
bool is_shared_object_name(const std::string& path) { return path.size() > 3 && path.ends_with(".so"); }

// Which artifact the command line asks for, checked before anything is compiled.
enum class Artifact { None, Library, LoadableLibrary, Executable };

Artifact requested_artifact(const DriverOptions& options) {
  const ArtifactOptions& a = options.artifact;
  bool archive = is_archive_name(options.output);
  bool shared_object = is_shared_object_name(options.output);
  if (!a.main_driver.empty()) {
    if (!options.emit.empty()) throw UsageError("--main builds an executable; it cannot be combined with --emit");
    if (options.output.empty()) throw UsageError("--main DRIVER.cpp needs -o APP (the executable to write)");
    if (archive || shared_object)
      throw UsageError(fmt::format("--main builds an executable, not the library '{}' (drop --main to build a "
                                   "library)", options.output));
    if (!a.header.empty()) throw UsageError("--header goes with -o libNAME.a, not with --main");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(a.main_driver, ec))
      throw UsageError(fmt::format("cannot read the driver '{}': {}", a.main_driver,
                                   std::filesystem::exists(a.main_driver, ec) ? "not a regular file" : std::strerror(ENOENT)));
  } else if (!a.header.empty() && (!options.emit.empty() || !archive)) {
    throw UsageError("--header FILE needs -o libNAME.a (the static library the header belongs to)");
  }
  if (!a.target_cpu.empty() && !synk::compiler::aot::is_known_target_cpu(a.target_cpu))
    throw UsageError(fmt::format("--target-cpu: LLVM does not know the CPU '{}' (e.g. x86-64, x86-64-v3, skylake-avx512, "
                                 "znver3)", a.target_cpu));
  if (!a.module_name.empty() && a.module_name != synk::compiler::aot::cxx_identifier(a.module_name))
    throw UsageError(fmt::format("--name: '{}' is not a C++ identifier{} (try '{}')", a.module_name,
                                 a.module_name + "_" == synk::compiler::aot::cxx_identifier(a.module_name)
                                     ? " the header can use: it is a C++ keyword or a name of the C and C++ headers"
                                     : "",
                                 synk::compiler::aot::cxx_identifier(a.module_name)));
  const bool builds = !a.main_driver.empty() || (options.emit.empty() && (archive || shared_object));
  if (!a.depfile.empty() && !builds)
    throw UsageError("--depfile FILE goes with an artifact (-o libNAME.a, -o libNAME.so, or --main DRIVER.cpp -o APP)");
  if (!a.main_driver.empty()) return Artifact::Executable;
  if (!options.emit.empty()) return Artifact::None;
  if (archive) return Artifact::Library;
  if (shared_object) {
    if (a.no_bundle) throw UsageError("--no-bundle goes with -o libNAME.a (a loadable library never holds synk)");
    return Artifact::LoadableLibrary;
  }
  if (!options.output.empty())
    throw UsageError(fmt::format("-o {}: without --emit this builds an artifact: a static library needs a name ending "
                                 "in .a (-o libNAME.a), a loadable library (Python's synk.load_library) one ending in "
                                 ".so, an executable needs --main DRIVER.cpp", options.output));
  return Artifact::None;
}

// Produces the requested stage's text. Artifact outputs that are not text on stdout (an object
// file, a shared library) will branch off here too.
int write_output(const DriverOptions& options, FrontEnd& front_end, std::ostream& out) {
  if (options.emit == "ast") {
    std::vector<std::string> functions;
    for (const synk::ast::FnDecl& fn : front_end.program().functions) functions.push_back(fn.name);
    check_function_names(options, functions);
    out << synk::dsl::print_ast(front_end.program());
    return kOk;
  }
  if (!front_end.analyze()) return kUserError;
  if (options.emit != "stub" && options.emit != "header" && !options.artifact.functions.empty()) {
    // The later stages also show the update function that each training step's optimizer adds.
    std::vector<std::string> functions;
    for (const synk::ir::Function& fn : front_end.module().functions) functions.push_back(fn.name);
    for (const synk::ir::Optimizer& o : front_end.module().optimizers)
      if (o.gradient >= 0) functions.push_back(o.update_function());
    check_function_names(options, functions);
  }
  if (options.emit.empty()) return kOk;
  if (options.emit == "ir") {
    out << synk::dsl::print_module(front_end.module());
    return kOk;
  }
  if (options.emit == "stub" || options.emit == "header") {
    // The header declares the functions alone: no GPU image (NVRTC, a few seconds per function
    // on a cold kernel cache) goes into it.
    synk::compiler::aot::AotModule module = generate_artifact(options, front_end, false, options.emit == "stub");
    out << (options.emit == "stub" ? module.stub : module.header);
    return kOk;
  }
  synk::compiler::EmitOptions emit_options;
  emit_options.print_after_all = options.print_after_all;
  emit_options.pass_dump = &std::cerr;
  if (options.emit == "ptx") {
    std::vector<bool> specific;
    std::vector<int> archs = synk::compiler::parse_cuda_archs(options.artifact.cuda_arch, &specific);
    if (!archs.empty()) emit_options.ptx_arch = *std::max_element(archs.begin(), archs.end());
  }
  run_stage(front_end, [&] { synk::compiler::emit(front_end.module(), options.emit, out, emit_options); });
  return kOk;
}

}  // namespace

// `synkc FILE [--emit=STAGE] [-o OUT]`: the default command.
int run_compile(const DriverOptions& options) {
  if (options.artifact.print_link_flags) {
    std::cout << synk::compiler::aot::link_flags(!options.artifact.no_bundle) << "\n";
    return kOk;
  }
  if (options.input.empty()) throw UsageError("no input file (run 'synkc --help' for usage)");
  if (!options.emit.empty()) {
    const std::vector<std::string>& stages = known_stages();
    if (std::find(stages.begin(), stages.end(), options.emit) == stages.end()) {
      throw UsageError(fmt::format("unknown stage '{}' for --emit (known stages: {})", options.emit,
                                   fmt::join(stages, ", ")));
    }
  }
  Artifact artifact = requested_artifact(options);
  FrontEnd front_end(options.input);
  if (!front_end.parse()) return kUserError;
  if (artifact != Artifact::None) {
    if (!front_end.analyze()) return kUserError;
    const bool loadable = artifact == Artifact::LoadableLibrary;
    synk::compiler::aot::AotModule module = generate_artifact(options, front_end, loadable);
    if (artifact == Artifact::Library)
      synk::compiler::aot::build_library(module, options.output, options.artifact.header, aot_options(options.artifact));
    else if (loadable)
      synk::compiler::aot::build_loadable_library(module, options.output, aot_options(options.artifact));
    else
      synk::compiler::aot::build_executable(module, options.artifact.main_driver, options.output,
                                            aot_options(options.artifact));
    if (!options.artifact.depfile.empty())
      write_depfile(options.artifact.depfile, options.output, options.input, module.data_files);
    return kOk;
  }
  // Text goes to a buffer first: a failed compile never truncates an existing output file.
  std::ostringstream text;
  int status = write_output(options, front_end, text);
  if (status != kOk) return status;
  if (options.output.empty()) {
    std::cout << text.str() << std::flush;
  } else {
    std::ofstream file(options.output, std::ios::binary | std::ios::trunc);
    if (!(file << text.str()) || !file.flush()) {
      throw UsageError(fmt::format("cannot write '{}': {}", options.output, std::strerror(errno)));
    }
  }
  return kOk;
}

// `synkc check FILE`: the whole front end, then the stages after it that can still find errors in
// the program (gradients: what --emit=ir-grad runs), no output.
int run_check(const DriverOptions& options) {
  FrontEnd front_end(options.input);
  if (!front_end.parse() || !front_end.analyze()) return kUserError;
  run_stage(front_end, [&] { synk::compiler::check_program(front_end.module()); });
  return kOk;
}

}  // namespace synkc
