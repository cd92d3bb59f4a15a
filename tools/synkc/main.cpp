// synkc, the synk compiler driver.
//   synkc check FILE                  run the whole front end and the gradients; silent on success
//   synkc FILE --emit=STAGE [-o OUT]  print one stage: ast, ir, or any stage of compiler/emit.h
//   synkc FILE --emit=STAGE --print-after-all   also dump the IR after every pass to stderr
//   synkc run FILE --fn NAME --ranks N --arg x=X.npy ...   run one function on N ranks, print
//                                     (or with --out DIR save) its outputs and updated variables
//   synkc FILE -o libNAME.a [--header NAME.h]   ahead-of-time static library (compiler/aot/aot.h)
//   synkc FILE -o libNAME.so                    loadable library (synk.load_library in Python)
//   synkc FILE --main DRIVER.cpp -o APP         the driver linked with the module
//   (artifacts build in the .npy files of load() initialisers unless --no-embed-data; --depfile FILE
//   lists what they were built from)
//   synkc --print-link-flags [--no-bundle]      what to link after libNAME.a
//   synkc info                        what synk finds on this machine (info.cpp)
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

#include "tools/synkc/driver.h"

namespace synkc {
namespace {

constexpr const char* kVersion = "synkc (synk) " SYNK_VERSION;

// Every subcommand of synkc: one entry each.
struct Subcommand {
  const char* name;
  const char* description;
  std::function<void(CLI::App&, DriverOptions&)> add_options;
  std::function<int(const DriverOptions&)> run;
  bool takes_file = true;
};

// A directory option given as "" is a mistake, not "none" (--checkpoint "" used to save nothing).
const CLI::Validator not_empty(
    [](const std::string& value) { return value.empty() ? std::string("must name a directory") : std::string(); },
    "", "not empty");   // no description: the help shows the option's own type name, DIR, once

std::vector<Subcommand> subcommands() {
  return {
      {"check", "Check FILE (syntax, names, dtypes, shapes, gradients); print nothing on success",
       [](CLI::App& app, DriverOptions& options) { app.add_option("FILE", options.subcommand_input, "The .synk file"); },
       run_check},
      {"run", "Compile FILE and run one function on N ranks; print or save its outputs",
       [](CLI::App& app, DriverOptions& options) {
         RunOptions& run = options.run;
         app.add_option("FILE", options.subcommand_input, "The .synk file");
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
         app.add_option("--seed", run.seed, "Seed of the function's random ops (uniform, normal, dropout, ...)")
             ->capture_default_str();
         app.add_option("--step", run.step, "Step counter of the function's random ops")->capture_default_str();
         app.add_flag("--all-ranks", run.all_ranks, "Print every rank's copy of the updated shared variables");
         app.add_option("--resume", run.resume,
                        "Load a checkpoint first (every shared variable but the sliceable ones, on every rank; "
                        "--set and --seed/--step apply after it)")
             ->type_name("DIR")
             ->check(not_empty);
         app.add_option("--checkpoint", run.checkpoint, "Save a checkpoint after the call")
             ->type_name("DIR")
             ->check(not_empty);
         app.add_flag("--force-cast", run.force_cast,
                      "Convert --arg and --set values whose dtype does not convert safely (e.g. f64 to f32)");
       },
       run_function},
      {"info", "Print what synk finds on this machine: CPU, JIT target, BLAS kernels, oneDNN, GPUs, /dev/shm, "
               "kernel cache",
       [](CLI::App&, DriverOptions&) {}, run_info, false},
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
  app.add_option("-o,--output", options.output, "Write the output to this file instead of stdout; without --emit, build an artifact: libNAME.a "
                 "(static library), libNAME.so (loadable library: synk.load_library), or with --main an executable")
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
  app.add_option("--cuda-arch", artifact.cuda_arch,
                 "GPU architectures of the artifact's CUBINs, comma-separated (80,sm_90,sm_90a), plus PTX of the "
                 "newest; 'none' for a CPU-only artifact (default: 80,90 when NVRTC is available; --emit=ptx: "
                 "PTX for the newest)")
      ->type_name("LIST");
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
    if (!parsers[i]->parsed()) continue;
    // FILE may come before the subcommand too (`synkc model.synk check`), as the usage line shows.
    if (!options.input.empty() && !options.subcommand_input.empty()) {
      std::cerr << "synkc: error: FILE given twice ('" << options.input << "' before '" << commands[i].name << "', '"
                << options.subcommand_input << "' after it)\n";
      return kUsageError;
    }
    if (!commands[i].takes_file) {
      if (!options.input.empty()) {
        std::cerr << "synkc: error: '" << commands[i].name << "' takes no FILE (got '" << options.input << "')\n";
        return kUsageError;
      }
      return commands[i].run(options);
    }
    if (options.input.empty()) options.input = options.subcommand_input;
    if (options.input.empty()) {
      std::cerr << "synkc: error: FILE is required (synkc " << commands[i].name << " FILE ...)\nrun 'synkc "
                << commands[i].name << " --help' for usage\n";
      return kUsageError;
    }
    return commands[i].run(options);
  }
  return run_compile(options);
}

}  // namespace
}  // namespace synkc

int main(int argc, char** argv) {
  try {
    return synkc::main_with_exit_codes(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << synk::error_report(e, "synkc");
    // `synkc run` may have forked (and, under mpirun, joined the other leaders, which met the same
    // error): end the group as a finished program does, not as a crashed one.
    try {
      synk::close();
    } catch (const std::exception&) {
    }
    return synk::exit_code(e);
  } catch (...) {
    std::cerr << "synkc: internal error: unknown exception\n";
    return synk::kExitInternalError;
  }
}
