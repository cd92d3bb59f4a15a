// synkc, the synk compiler driver.
//   synkc check FILE                  run the whole front end and the gradients; silent on success
//   synkc FILE --emit=STAGE [-o OUT]  print one stage: ast, ir, or any stage of compiler/emit.h
//   synkc FILE --emit=STAGE --print-after-all   also dump the IR after every pass to stderr
//   synkc run FILE --fn NAME --ranks N --arg x=X.npy ...   run one function on N ranks, print
//                                     (or with --out DIR save) its outputs and updated variables
//   synkc FILE -o libNAME.a [--header NAME.h]   ahead-of-time static library (compiler/aot/aot.h)
//   synkc FILE --main DRIVER.cpp -o APP         the driver linked with the module
//   (artifacts build in the .npy files of load() initialisers unless --no-embed-data; --depfile FILE
//   lists what they were built from)
//   synkc --print-link-flags [--no-bundle]      what to link after libNAME.a
// Exit status: 0 success; 1 the user's program is wrong (every diagnostic on stderr, in source
// order, with the source line and a caret); 2 the command line is wrong (unknown option or stage,
// missing or unreadable input; for `run` also an argument the call rejects: a wrong dtype or
// shape, an index out of range); 3 synk itself failed (an internal error; never a crash). A
// `run` that fails inside the ranks (a kernel error) exits with 1.
// New subcommands (`run`) go in the table of subcommands(), new kinds of output in
// write_output(); everything else (reading, diagnostics, exit codes) is shared.
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
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "compiler/aot/aot.h"
#include "compiler/pipeline.h"
#include "compiler/llvm/aot_object.h"
#include "compiler/backend/signature.h"
#include "compiler/emit.h"
#include "synk/jit.h"
#include "dsl/frontend.h"
#include "dsl/parser.h"
#include "runtime/data/dtype.h"
#include "runtime/data/npy.h"
#include "runtime/data/shared_vars.h"
#include "synk/synk.h"

namespace {

using synk::DiagnosticEngine;
using synk::SourceFile;

constexpr const char* kVersion = "synkc (synk) " SYNK_VERSION;

enum ExitCode : int {
  kOk = 0,
  kUserError = synk::kExitUserError,
  kUsageError = synk::kExitUsageError,
  kInternalError = synk::kExitInternalError
};

// A command-line problem: reported as `synkc: error: ...`, exit status 2.
using synk::UsageError;

// What `synkc run` takes besides FILE.
struct RunOptions {
  std::string function;
  int ranks = 1;
  std::vector<std::string> args;         // NAME=FILE.npy, one per function input
  std::vector<std::string> sets;         // NAME=FILE.npy, shared variables set before the call
  std::string batch, batch_s;            // empty: not given
  int64_t num_slices = 1;
  std::string out_dir;                   // empty: print
  bool all_ranks = false;                // print/save updated variables of every rank
  bool force_cast = false;               // --force-cast: convert .npy values that do not convert safely
};

// Ahead-of-time artifacts (-o libNAME.a, --main, --emit=stub|header).
struct ArtifactOptions {
  std::string header;             // --header FILE (with -o libNAME.a)
  std::string main_driver;        // --main DRIVER.cpp (with -o APP)
  std::string target_cpu;         // empty: the host's
  std::string module_name;        // empty: the file's stem
  std::vector<std::string> functions;   // empty: every function
  std::string depfile;            // --depfile FILE: the artifact's inputs, as a Makefile rule
  bool no_bundle = false;
  bool keep_temps = false;
  bool no_embed_data = false;
  bool print_link_flags = false;
};

// Everything the command line can say; each subcommand reads what it needs.
struct DriverOptions {
  std::string input;
  std::string emit;              // empty: no output, just check
  std::string output;            // empty: stdout
  bool print_after_all = false;
  RunOptions run;
  ArtifactOptions artifact;
};

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
    std::cerr << front_end_.take_new_diagnostics();
    return ok;
  }

  synk::dsl::FrontEnd front_end_;
};

synk::compiler::aot::AotOptions aot_options(const ArtifactOptions& artifact) {
  return {.module_name = artifact.module_name, .target_cpu = artifact.target_cpu, .bundle = !artifact.no_bundle,
          .keep_temps = artifact.keep_temps, .embed_data = !artifact.no_embed_data};
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
      throw UsageError(fmt::format("--fn {}: '{}' has no function '{}' (functions: {})", name, options.input, name,
                                   functions.empty() ? "none" : fmt::format("{}", fmt::join(functions, ", "))));
}

// Runs a compiler stage after the front end: a user error it finds at a known construct (the
// gradient pass's) is reported like the front end's diagnostics, with the source line and a caret.
void run_stage(const FrontEnd& front_end, const std::function<void()>& stage) {
  try {
    stage();
  } catch (const synk::LocatedUserError& e) {
    if (!e.loc().valid()) throw;
    throw synk::UserError(synk::format_diagnostic(front_end.file(), {synk::Severity::Error, e.loc(), e.message()}));
  }
}

// The artifact's texts for the input (which the front end has accepted already; not parsed again).
synk::compiler::aot::AotModule generate_artifact(const DriverOptions& options, const FrontEnd& front_end) {
  const ArtifactOptions& artifact = options.artifact;
  synk::ir::Module prepared = front_end.prepared_module();
  synk::compiler::aot::AotOptions restricted = aot_options(artifact);
  if (!artifact.functions.empty()) {
    std::vector<std::string> all;
    for (const synk::ir::Function& fn : prepared.functions) all.push_back(fn.name);
    check_function_names(options, all);
    restricted.functions = artifact.functions;
  }
  return synk::compiler::aot::generate(prepared, options.input, front_end.file().text(), restricted);
}

bool is_archive_name(const std::string& path) { return path.size() > 2 && path.ends_with(".a"); }

// Which artifact the command line asks for, checked before anything is compiled.
enum class Artifact { None, Library, Executable };

Artifact requested_artifact(const DriverOptions& options) {
  const ArtifactOptions& a = options.artifact;
  bool archive = is_archive_name(options.output);
  if (!a.main_driver.empty()) {
    if (!options.emit.empty()) throw UsageError("--main builds an executable; it cannot be combined with --emit");
    if (options.output.empty()) throw UsageError("--main DRIVER.cpp needs -o APP (the executable to write)");
    if (archive) throw UsageError(fmt::format("--main builds an executable, not the archive '{}' (drop --main to build "
                                              "a library)", options.output));
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
    throw UsageError(fmt::format("--name: '{}' is not a C++ identifier", a.module_name));
  const bool builds = !a.main_driver.empty() || (options.emit.empty() && archive);
  if (!a.depfile.empty() && !builds)
    throw UsageError("--depfile FILE goes with an artifact (-o libNAME.a, or --main DRIVER.cpp -o APP)");
  if (!a.main_driver.empty()) return Artifact::Executable;
  if (!options.emit.empty()) return Artifact::None;
  if (archive) return Artifact::Library;
  if (!options.output.empty())
    throw UsageError(fmt::format("-o {}: without --emit this builds an artifact: a static library needs a name ending "
                                 "in .a (-o libNAME.a), an executable needs --main DRIVER.cpp", options.output));
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
    synk::compiler::aot::AotModule module = generate_artifact(options, front_end);
    out << (options.emit == "stub" ? module.stub : module.header);
    return kOk;
  }
  synk::compiler::EmitOptions emit_options;
  emit_options.print_after_all = options.print_after_all;
  emit_options.pass_dump = &std::cerr;
  run_stage(front_end, [&] { synk::compiler::emit(front_end.module(), options.emit, out, emit_options); });
  return kOk;
}

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
    synk::compiler::aot::AotModule module = generate_artifact(options, front_end);
    if (artifact == Artifact::Library)
      synk::compiler::aot::build_library(module, options.output, options.artifact.header, aot_options(options.artifact));
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

// --- synkc run: one function on N ranks, through the JIT and the runtime --------------------

// "NAME=FILE" into its two halves.
std::pair<std::string, std::string> name_and_file(const std::string& spec, const char* option) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw UsageError(fmt::format("{} expects NAME=FILE.npy, got '{}'", option, spec));
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

int64_t parse_index(const std::string& text, const char* option) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw UsageError(fmt::format("{}: '{}' is not an integer", option, text));
  return value;
}

std::vector<int64_t> parse_index_list(const std::string& text, const char* option) {
  std::vector<int64_t> list;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty()) list.push_back(parse_index(item, option));
  return list;
}

bool is_npy_path(const std::string& text) { return text.size() > 4 && text.ends_with(".npy"); }

// --batch: K (rows [0, K)), A:B (rows [A, B)), i,j,k (an index list; "5," is the list {5}) or
// an .npy file of integer indices.
synk::Batch parse_batch(const std::string& text) {
  if (is_npy_path(text)) return synk::Batch(synk::load_npy(text, synk::DType::I64, {.name = "--batch"}));
  if (size_t colon = text.find(':'); colon != std::string::npos)
    return synk::Batch(synk::Range{parse_index(text.substr(0, colon), "--batch"),
                                   parse_index(text.substr(colon + 1), "--batch")});
  if (text.find(',') != std::string::npos) return synk::Batch(parse_index_list(text, "--batch"));
  return synk::Batch(parse_index(text, "--batch"));
}

synk::Rows parse_rows(const std::string& text) {
  if (size_t colon = text.find(':'); colon != std::string::npos)
    return synk::Rows(synk::Range{parse_index(text.substr(0, colon), "--batch-s"),
                                  parse_index(text.substr(colon + 1), "--batch-s")});
  return synk::Rows(parse_index_list(text, "--batch-s"));
}

// --batch-s: A:B or i,j,k for every rank, or one such selection per rank separated by ';'.
synk::BatchS parse_batch_s(const std::string& text) {
  if (text.find(';') == std::string::npos) return synk::BatchS(parse_rows(text));
  std::vector<synk::Rows> per_rank;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ';')) per_rank.push_back(parse_rows(item));
  return synk::BatchS::per_rank(std::move(per_rank));
}

// One element as text: shortest round-trip form for floats, true/false for bool.
std::string element_text(const synk::Array& a, int64_t i) {
  switch (a.dtype) {
    case synk::DType::F32: return fmt::format("{}", a.data<float>()[i]);
    case synk::DType::F64: return fmt::format("{}", a.data<double>()[i]);
    case synk::DType::I32: return fmt::format("{}", a.data<int32_t>()[i]);
    case synk::DType::I64: return fmt::format("{}", a.data<int64_t>()[i]);
    case synk::DType::U8: return fmt::format("{}", a.data<uint8_t>()[i]);
    case synk::DType::Bool: return a.data<uint8_t>()[i] ? "true" : "false";
  }
  return "?";
}

// Nested brackets like numpy ("[[1, 2], [3, 4]]"); more than kMaxPrinted elements are
// summarised by their first and last few (--out saves everything).
constexpr int64_t kMaxPrinted = 1000;

void append_nested(const synk::Array& a, size_t axis, int64_t offset, std::string& out) {
  if (axis == a.shape.size()) {
    out += element_text(a, offset);
    return;
  }
  int64_t stride = 1;
  for (size_t d = axis + 1; d < a.shape.size(); ++d) stride *= a.shape[d];
  out += '[';
  for (int64_t i = 0; i < a.shape[axis]; ++i) {
    if (i) out += ", ";
    append_nested(a, axis + 1, offset + i * stride, out);
  }
  out += ']';
}

std::string array_text(const synk::Array& a) {
  if (a.size() <= kMaxPrinted) {
    std::string out;
    append_nested(a, 0, 0, out);
    return out;
  }
  std::vector<std::string> head, tail;
  for (int64_t i = 0; i < 6; ++i) head.push_back(element_text(a, i));
  for (int64_t i = a.size() - 6; i < a.size(); ++i) tail.push_back(element_text(a, i));
  return fmt::format("[{}, ..., {}] ({} elements, row-major; --out DIR saves them all)", fmt::join(head, ", "),
                     fmt::join(tail, ", "), a.size());
}

std::string type_text(const synk::Array& a) {
  return fmt::format("{}[{}]", synk::rt::dtype_name(a.dtype), fmt::join(a.shape, ", "));
}

// Prints `name: type = values`, or saves DIR/file and prints where it went.
void emit_value(const RunOptions& options, const std::string& label, const std::string& file, const synk::Array& a) {
  if (options.out_dir.empty()) {
    std::cout << label << ": " << type_text(a) << " = " << array_text(a) << "\n";
    return;
  }
  std::string path = (std::filesystem::path(options.out_dir) / file).string();
  synk::rt::npy::write(path, a.ref());
  std::cout << label << ": " << type_text(a) << " -> " << path << "\n";
}

// A value of dtype `from` (read from `file`) for `what`, of dtype `to`: unless --force-cast, only
// a safe conversion (numpy's rule), else a UsageError that starts with `where` (the option).
void check_cast(const RunOptions& options, const std::string& where, const std::string& file, synk::DType from,
                synk::DType to, const std::string& what) {
  if (options.force_cast || synk::rt::can_cast_safely(from, to)) return;
  throw UsageError(fmt::format("{}: '{}' holds {} values, which do not convert safely to {}, the dtype of {}; "
                               "pass --force-cast to convert anyway", where, file, synk::rt::dtype_name(from),
                               synk::rt::dtype_name(to), what));
}

// `synkc run FILE --fn NAME ...`: compiles FILE with the JIT, forks the ranks, calls the function
// once on the given .npy inputs and prints its outputs, then the new value of every shared
// variable the function updates.
int run_function(const DriverOptions& driver) {
  const RunOptions& options = driver.run;
  if (options.ranks < 1) throw UsageError(fmt::format("--ranks must be at least 1, got {}", options.ranks));
  if (options.num_slices < 1)
    throw UsageError(fmt::format("--num-slices must be at least 1, got {}", options.num_slices));
  std::string text = read_input(driver.input);
  std::string dir = std::filesystem::path(driver.input).parent_path().string();
  synk::jit::Module module = synk::jit::compile_string(text, {.base_dir = dir.empty() ? "." : dir}, driver.input);
  const synk::ir::Function* fn = module.ir().find_function(options.function);
  if (!fn) {
    throw UsageError(fmt::format("'{}' has no function '{}' (functions: {})", driver.input, options.function,
                                 fmt::join(module.function_names(), ", ")));
  }

  // Inputs, by name, each loaded with the parameter's dtype (safe casts only, unless --force-cast).
  std::vector<std::optional<synk::Data>> inputs(fn->params.size());
  for (const std::string& spec : options.args) {
    auto [name, file] = name_and_file(spec, "--arg");
    auto it = std::find_if(fn->params.begin(), fn->params.end(), [&](const auto& p) { return p.name == name; });
    if (it == fn->params.end()) {
      std::vector<std::string> names;
      for (const auto& p : fn->params) names.push_back(p.name);
      throw UsageError(fmt::format("--arg {}: function '{}' has no input '{}' (inputs: {})", spec, fn->name, name,
                                   names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
    size_t index = size_t(it - fn->params.begin());
    if (inputs[index]) throw UsageError(fmt::format("--arg: input '{}' is given twice", name));
    synk::DType dtype = synk::compiler::runtime_dtype(it->type.dtype);
    check_cast(options, fmt::format("--arg {}", spec), file, synk::rt::npy::read_header(file).dtype, dtype,
               fmt::format("input '{}' of function '{}'", name, fn->name));
    inputs[index] = synk::load_npy(file, dtype, {.name = name, .minibatch = it->role == synk::ir::Role::Minibatch,
                                                 .force_cast = options.force_cast});
  }
  std::vector<synk::Data> arguments;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) throw UsageError(fmt::format("missing --arg {}=FILE.npy for input '{}' of function '{}'",
                                                 fn->params[i].name, fn->params[i].name, fn->name));
    arguments.push_back(*inputs[i]);
  }
  // Shared variables' values, checked against their declarations before anything runs.
  std::vector<std::pair<std::string, synk::Array>> sets;
  const std::vector<std::string> names = module.shared_names();
  for (const std::string& spec : options.sets) {
    auto [name, file] = name_and_file(spec, "--set");
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw UsageError(fmt::format("--set {}: '{}' has no shared variable '{}' (shared variables: {})", spec,
                                   driver.input, name, names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    synk::Array value = synk::rt::npy::read(file);
    const synk::rt::SharedSpec& declared = module.shared(name).spec();
    std::string where = fmt::format("--set {}", spec);
    check_cast(options, where, file, value.dtype, declared.dtype, fmt::format("shared variable '{}'", name));
    synk::rt::conform_shared_value(declared, module.runtime_module().spec().symbols, value.ref(), options.force_cast,
                                   where);
    sets.emplace_back(name, std::move(value));
  }
  synk::CallOptions call;
  if (!options.batch.empty()) call.batch = parse_batch(options.batch);
  if (!options.batch_s.empty()) call.batch_s = parse_batch_s(options.batch_s);
  call.num_slices = options.num_slices;
  if (!options.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.out_dir, ec);
    if (ec) throw UsageError(fmt::format("cannot create '{}': {}", options.out_dir, ec.message()));
  }

  synk::Function function = module.function(options.function);   // compiled before the fork
  synk::fork(options.ranks);
  for (const auto& [name, value] : sets)
    for (int rank = 0; rank < options.ranks; ++rank) module.shared(name).set_value(rank, value.ref(), options.force_cast);
  synk::Outputs outputs = function(arguments, call);
  for (size_t i = 0; i < outputs.size(); ++i)
    emit_value(options, outputs.names()[i], outputs.names()[i] + ".npy", outputs[i]);
  for (const synk::ir::Update& update : fn->updates) {
    const std::string& name = module.ir().shareds.at(size_t(update.shared)).name;
    if (!options.all_ranks) {
      emit_value(options, "shared " + name, "shared." + name + ".npy", module.shared(name).get_value());
      continue;
    }
    for (int rank = 0; rank < options.ranks; ++rank)
      emit_value(options, fmt::format("shared {} (rank {})", name, rank), fmt::format("shared.{}.rank{}.npy", name, rank),
                 module.shared(name).get_value(rank));
  }
  std::cout << std::flush;
  synk::close();
  return kOk;
}

// Every subcommand of synkc: one entry each.
struct Subcommand {
  const char* name;
  const char* description;
  std::function<void(CLI::App&, DriverOptions&)> add_options;
  std::function<int(const DriverOptions&)> run;
};

std::vector<Subcommand> subcommands() {
  return {
      {"check", "Check FILE (syntax, names, dtypes, shapes, gradients); print nothing on success",
       [](CLI::App& app, DriverOptions& options) {
         app.add_option("FILE", options.input, "The .synk file")->required();
       },
       run_check},
      {"run", "Compile FILE and run one function on N ranks; print or save its outputs",
       [](CLI::App& app, DriverOptions& options) {
         RunOptions& run = options.run;
         app.add_option("FILE", options.input, "The .synk file")->required();
         app.add_option("--fn", run.function, "The function to call")->required()->type_name("NAME");
         app.add_option("--ranks", run.ranks, "Number of ranks (processes), at least 1")->capture_default_str();
         app.add_option("--arg", run.args, "An input: NAME=FILE.npy (one per input of the function)")
             ->type_name("NAME=FILE")->allow_extra_args(false);
         app.add_option("--set", run.sets, "Set a shared variable on every rank first: NAME=FILE.npy")
             ->type_name("NAME=FILE")->allow_extra_args(false);
         app.add_option("--batch", run.batch,
                        "Rows of the scattered inputs: K, START:STOP, i,j,k (\"5,\" is one index) or IDX.npy")
             ->type_name("ROWS");
         app.add_option("--batch-s", run.batch_s,
                        "Rows of the sliceable shared variables: START:STOP or i,j,k; ';' separates one per rank")
             ->type_name("ROWS");
         app.add_option("--num-slices", run.num_slices, "Slices per rank")->capture_default_str();
         app.add_option("--out", run.out_dir, "Save outputs as DIR/NAME.npy (and DIR/shared.NAME.npy) instead of printing")
             ->type_name("DIR");
         app.add_flag("--all-ranks", run.all_ranks, "Print every rank's copy of the updated shared variables");
         app.add_flag("--force-cast", run.force_cast,
                      "Convert --arg and --set values whose dtype does not convert safely (e.g. f64 to f32)");
       },
       run_function},
  };
}

int main_with_exit_codes(int argc, char** argv) {
  DriverOptions options;
  CLI::App app{"synkc: the synk compiler. Compiles .synk graph files for data-parallel execution.",
               "synkc"};
  app.set_version_flag("--version", kVersion);
  app.add_option("FILE", options.input, "The .synk file to compile");
  app.add_option("--emit", options.emit,
                 fmt::format("Print one stage of the compiler: {}", fmt::join(known_stages(), ", ")))
      ->type_name("STAGE");
  app.add_option("-o,--output", options.output, "Write the output to this file instead of stdout")
      ->type_name("FILE");
  app.add_flag("--print-after-all", options.print_after_all,
               "Print the IR to stderr after every compiler pass that the --emit stage runs (ir-grad and later; "
               "--emit=ast and ir run none)");
  ArtifactOptions& artifact = options.artifact;
  app.add_option("--header", artifact.header, "With -o libNAME.a: also write the module's C++ header")
      ->type_name("FILE");
  app.add_option("--main", artifact.main_driver, "Build an executable: this driver linked with the module (-o APP)")
      ->type_name("DRIVER.cpp");
  app.add_option("--target-cpu", artifact.target_cpu,
                 "CPU the artifact's kernels are compiled for (default: this host's, like the JIT)")
      ->type_name("CPU");
  app.add_option("--name", artifact.module_name, "C++ namespace and symbol prefix of the module (default: file stem)")
      ->type_name("NAME");
  app.add_option("--fn", artifact.functions, "Only this function in the artifact (repeatable; default: all)")
      ->type_name("NAME")->allow_extra_args(false);
  app.add_flag("--no-bundle", artifact.no_bundle,
               "-o libNAME.a holds only the module (link synk's libraries yourself; see --print-link-flags)");
  app.add_flag("--keep-temps", artifact.keep_temps, "Keep the artifact's build directory (its path is printed)");
  app.add_flag("--no-embed-data", artifact.no_embed_data,
               "Read the .npy files of load() initialisers from their paths at run time instead of building them in");
  app.add_option("--depfile", artifact.depfile,
                 "With an artifact: write its inputs (.synk and embedded .npy files) as a Makefile rule")
      ->type_name("FILE");
  app.add_flag("--print-link-flags", artifact.print_link_flags,
               "Print what a program links after libNAME.a (with --no-bundle: synk's libraries too)");
  app.require_subcommand(0, 1);

  std::vector<Subcommand> commands = subcommands();
  std::vector<CLI::App*> parsers;
  for (Subcommand& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    command.add_options(*sub, options);
    parsers.push_back(sub);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "synkc: error: " << e.what() << "\nrun 'synkc --help' for usage\n";
    return kUsageError;
  }

  for (size_t i = 0; i < commands.size(); ++i) {
    if (parsers[i]->parsed()) return commands[i].run(options);
  }
  return run_compile(options);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return main_with_exit_codes(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << synk::error_report(e, "synkc");
    return synk::exit_code(e);
  } catch (...) {
    std::cerr << "synkc: internal error: unknown exception\n";
    return synk::kExitInternalError;
  }
}
