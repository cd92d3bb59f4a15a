// What the parts of synkc share: the options the command line fills, the exit codes, reading the
// input file, and each subcommand's entry point (compile.cpp: the default command and `check`;
// run.cpp: `synkc run`; info.cpp: `synkc info`; main.cpp: the command line and the error report).
#pragma once

#include <string>
#include <vector>

#include "base/errors.h"

namespace synkc {

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
  uint64_t seed = 0, step = 0;           // --seed, --step: the random state of the call
  std::string resume;                    // --resume DIR: load this checkpoint first
  std::string checkpoint;                // --checkpoint DIR: save one after the call
};

// Ahead-of-time artifacts (-o libNAME.a, --main, --emit=stub|header).
struct ArtifactOptions {
  std::string header;             // --header FILE (with -o libNAME.a)
  std::string main_driver;        // --main DRIVER.cpp (with -o APP)
  std::string target_cpu;         // empty: the host's
  std::string module_name;        // empty: the file's stem
  std::vector<std::string> functions;   // empty: every function
  std::string depfile;            // --depfile FILE: the artifact's inputs, as a Makefile rule
  std::string cuda_arch;          // --cuda-arch LIST: GPU architectures ("none": CPU only; empty: the default)
  bool no_bundle = false;
  bool keep_temps = false;
  bool no_embed_data = false;
  bool print_link_flags = false;
};

// Everything the command line can say; each subcommand reads what it needs.
struct DriverOptions {
  std::string input;
  std::string subcommand_input;   // FILE after a subcommand (synkc check FILE); input is the one before it
  std::string emit;              // empty: no output, just check
  std::string output;            // empty: stdout
  bool print_after_all = false;
  RunOptions run;
  ArtifactOptions artifact;
};

// The stages `--emit` accepts, in pipeline order (compiler/pipeline.h).
const std::vector<std::string>& known_stages();

// The whole file; a UsageError naming it when it cannot be read.
std::string read_input(const std::string& path);

// `synkc FILE [--emit=STAGE] [-o OUT]`, artifacts included.
int run_compile(const DriverOptions& options);
// `synkc check FILE`.
int run_check(const DriverOptions& options);
// `synkc run FILE --fn NAME ...`.
int run_function(const DriverOptions& driver);
// `synkc info` (info.cpp).
int run_info(const DriverOptions& driver);

}  // namespace synkc
