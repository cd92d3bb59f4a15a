// synkc, the synk compiler driver.
//   synkc check FILE                  run the whole front end; silent on success
//   synkc FILE --emit=STAGE [-o OUT]  print one stage: ast, ir, or any stage of compiler/emit.h
//   synkc FILE --emit=STAGE --print-after-all   also dump the IR after every pass to stderr
// Exit status: 0 success; 1 the user's program is wrong (every diagnostic on stderr, in source
// order, with the source line and a caret); 2 the command line is wrong (unknown option or stage,
// missing or unreadable input); 3 synk itself failed (an internal error; never a crash).
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

#include "compiler/emit.h"
#include "dsl/frontend.h"
#include "dsl/parser.h"

namespace {

using synk::dsl::DiagnosticEngine;
using synk::dsl::SourceFile;

constexpr const char* kVersion = "synkc (synk) " SYNK_VERSION;

enum ExitCode : int { kOk = 0, kUserError = 1, kUsageError = 2, kInternalError = 3 };

// A command-line problem: reported as `synkc: error: ...`, exit status 2.
struct UsageError {
  std::string message;
};

// Everything the command line can say; each subcommand reads what it needs.
struct DriverOptions {
  std::string input;
  std::string emit;              // empty: no output, just check
  std::string output;            // empty: stdout
  bool print_after_all = false;
};

// The stages `--emit` accepts: the front end's own, then whatever the compiler provides.
std::vector<std::string> known_stages() {
  std::vector<std::string> stages = {"ast", "ir"};
  for (const std::string& stage : synk::compiler::emit_stages()) stages.push_back(stage);
  return stages;
}

std::string read_input(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UsageError{fmt::format("cannot read '{}': {}", path, std::strerror(EISDIR))};
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw UsageError{fmt::format("cannot read '{}': {}", path, std::strerror(errno))};
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  bool failed = std::ferror(file);
  int error = errno;
  std::fclose(file);
  if (failed) throw UsageError{fmt::format("cannot read '{}': {}", path, std::strerror(error))};
  return text;
}

// One run of the front end over one file. Stops at the first stage with errors, after printing
// every diagnostic of that stage (syntax errors stop before semantic analysis, whose messages on a
// partial tree would only be follow-on errors).
class FrontEnd {
 public:
  explicit FrontEnd(const std::string& path) : file_(path, read_input(path)), diags_(file_) {}

  bool parse() {
    program_ = synk::dsl::parse_program(file_, diags_);
    return report();
  }
  bool analyze() {
    std::string base_dir = std::filesystem::path(file_.path()).parent_path().string();
    module_ = synk::dsl::analyze(program_, diags_, base_dir.empty() ? "." : base_dir);
    if (!module_ && !diags_.has_errors()) synk::dsl::internal_error("analyze failed without a diagnostic");
    return report() && module_.has_value();
  }
  const synk::ast::Program& program() const { return program_; }
  const synk::ir::Module& module() const { return *module_; }

 private:
  // Prints what has not been printed yet (warnings too); false when there were errors.
  bool report() {
    if (diags_.diagnostics().size() > printed_) {
      std::cerr << synk::dsl::format_diagnostics_in_source_order(diags_);
      // Later stages append; a second report prints only their diagnostics.
      printed_ = diags_.diagnostics().size();
    }
    return !diags_.has_errors();
  }

  SourceFile file_;
  DiagnosticEngine diags_;
  synk::ast::Program program_;
  std::optional<synk::ir::Module> module_;
  size_t printed_ = 0;
};

// Produces the requested stage's text. Artifact outputs that are not text on stdout (an object
// file, a shared library) will branch off here too.
int write_output(const DriverOptions& options, FrontEnd& front_end, std::ostream& out) {
  if (options.emit == "ast") {
    out << synk::dsl::print_ast(front_end.program());
    return kOk;
  }
  if (!front_end.analyze()) return kUserError;
  if (options.emit.empty()) return kOk;
  if (options.emit == "ir") {
    out << synk::dsl::print_module(front_end.module());
    return kOk;
  }
  synk::compiler::EmitOptions emit_options;
  emit_options.print_after_all = options.print_after_all;
  emit_options.pass_dump = &std::cerr;
  synk::compiler::emit(front_end.module(), options.emit, out, emit_options);
  return kOk;
}

// `synkc FILE [--emit=STAGE] [-o OUT]`: the default command.
int run_compile(const DriverOptions& options) {
  if (options.input.empty()) throw UsageError{"no input file (run 'synkc --help' for usage)"};
  if (!options.emit.empty()) {
    std::vector<std::string> stages = known_stages();
    if (std::find(stages.begin(), stages.end(), options.emit) == stages.end()) {
      throw UsageError{fmt::format("unknown stage '{}' for --emit (known stages: {})", options.emit,
                                   fmt::join(stages, ", "))};
    }
  }
  FrontEnd front_end(options.input);
  if (!front_end.parse()) return kUserError;
  // Text goes to a buffer first: a failed compile never truncates an existing output file.
  std::ostringstream text;
  int status = write_output(options, front_end, text);
  if (status != kOk) return status;
  if (options.output.empty()) {
    std::cout << text.str() << std::flush;
  } else {
    std::ofstream file(options.output, std::ios::binary | std::ios::trunc);
    if (!(file << text.str()) || !file.flush()) {
      throw UsageError{fmt::format("cannot write '{}': {}", options.output, std::strerror(errno))};
    }
  }
  return kOk;
}

// `synkc check FILE`: the whole front end, no output.
int run_check(const DriverOptions& options) {
  FrontEnd front_end(options.input);
  if (!front_end.parse() || !front_end.analyze()) return kUserError;
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
      {"check", "Check FILE (syntax, names, dtypes, shapes); print nothing on success",
       [](CLI::App& app, DriverOptions& options) {
         app.add_option("FILE", options.input, "The .synk file")->required();
       },
       run_check},
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
               "Print the IR after every compiler pass to stderr");
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
  } catch (const UsageError& e) {
    std::cerr << "synkc: error: " << e.message << "\n";
    return kUsageError;
  } catch (const synk::dsl::UserError& e) {
    std::string message = e.what();
    if (!message.empty() && message.back() != '\n') message += '\n';
    std::cerr << (message.find(": error: ") != std::string::npos ? "" : "synkc: error: ") << message;
    return kUserError;
  } catch (const synk::dsl::InternalError& e) {
    std::cerr << "synkc: internal error: " << e.what() << "\n";
    return kInternalError;
  } catch (const std::exception& e) {
    std::cerr << "synkc: internal error: " << e.what() << "\n";
    return kInternalError;
  } catch (...) {
    std::cerr << "synkc: internal error: unknown exception\n";
    return kInternalError;
  }
}
