// Building ahead-of-time artifacts (aot.h): kernel objects from the in-process Clang, the stub
// and the user's driver from the system C++ compiler (the one CMake found when synk was built,
// or $CXX), then `ar` (with an MRI script that merges synk's own static libraries, so that the
// archive is self-contained) or the final link. Where synk's headers and libraries are depends
// on where this synkc runs from: its build tree (paths baked at configure time) or an install
// prefix (../include/synk and ../lib next to the executable, so an installed tree can move).
#include "compiler/aot/aot.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/llvm/aot_object.h"
#include "base/diagnostics.h"

#ifndef SYNK_AOT_CXX
#error "compiler/aot/CMakeLists.txt defines SYNK_AOT_* for this file"
#endif

namespace synk::compiler::aot {
namespace {

namespace fs = std::filesystem;

// Baked lists are '|'-separated (';' would split CMake's compile definitions).
std::vector<std::string> split_list(const std::string& text, char separator = '|') {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string::npos) end = text.size();
    if (end > start) items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

// Where synk's headers and static libraries are for this synkc.
struct Layout {
  std::vector<std::string> include_dirs;
  std::vector<std::string> synk_libs;     // in link order
  std::vector<std::string> system_libs;   // after them
};

const Layout& layout() {
  static const Layout l = [] {
    Layout l;
    std::error_code ec;
    fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
    bool in_build_tree = !ec && fs::equivalent(exe_dir, SYNK_AOT_BUILD_BIN_DIR, ec);
    if (in_build_tree) {
      l.include_dirs = {SYNK_AOT_SOURCE_DIR};
      l.synk_libs = split_list(SYNK_AOT_BUILD_LIBS);
    } else {
      fs::path prefix = exe_dir.parent_path();
      l.include_dirs = {(prefix / "include" / "synk").string()};
      for (const std::string& name : split_list(SYNK_AOT_INSTALL_LIBS))
        l.synk_libs.push_back((prefix / SYNK_AOT_INSTALL_LIBDIR / name).string());
    }
    l.system_libs = split_list(SYNK_AOT_SYSTEM_LIBS);
    return l;
  }();
  return l;
}

std::string cxx() {
  const char* env = std::getenv("CXX");
  return env && *env ? env : SYNK_AOT_CXX;
}

std::string quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@") == std::string::npos)
    return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CommandResult {
  int status = 0;
  std::string output;   // stdout and stderr together
};

CommandResult run_command(const std::vector<std::string>& argv, const std::string& stdin_file = "") {
  std::string command;
  for (const std::string& a : argv) command += (command.empty() ? "" : " ") + quote(a);
  if (!stdin_file.empty()) command += " < " + quote(stdin_file);
  command += " 2>&1";
  CommandResult result;
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) synk::internal_error(fmt::format("cannot run '{}': {}", command, std::strerror(errno)));
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (result.status == 127 && result.output.find("not found") != std::string::npos)
    result.output += fmt::format("(the C++ compiler is '{}'; set $CXX to use another)\n", cxx());
  return result;
}

// `shown_as`: the name in the error (the destination, when `path` is its temporary beside it).
void write_file(const fs::path& path, const std::string& text, const std::string& shown_as = {}) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!(out << text) || !out.flush())
    throw AotUserError(fmt::format("cannot write '{}': {}", shown_as.empty() ? path.string() : shown_as,
                                   std::strerror(errno)));
}

// Ctrl-C, SIGTERM or SIGHUP while a build directory exists: it is removed (by `rm -rf`, since
// only fork, exec and wait are safe in a handler), then the signal ends synkc as it would have.
constexpr int kInterruptSignals[] = {SIGINT, SIGTERM, SIGHUP};
char g_scratch_path[4096];
struct sigaction g_before[NSIG];

void remove_scratch_and_die(int sig) {
  if (g_scratch_path[0]) {
    const pid_t rm = ::fork();
    if (rm == 0) {
      ::execl("/bin/rm", "rm", "-rf", g_scratch_path, static_cast<char*>(nullptr));
      ::_exit(127);
    }
    if (rm > 0) ::waitpid(rm, nullptr, 0);
  }
  ::sigaction(sig, &g_before[sig], nullptr);
  ::raise(sig);
}

void watch_interrupts(const std::string& path) {
  if (path.size() >= sizeof g_scratch_path) return;
  std::memcpy(g_scratch_path, path.c_str(), path.size() + 1);
  struct sigaction sa {};
  sa.sa_handler = &remove_scratch_and_die;
  sigemptyset(&sa.sa_mask);
  for (int sig : kInterruptSignals) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;   // the program's own
    g_before[sig] = current;
    ::sigaction(sig, &sa, nullptr);
  }
}

void unwatch_interrupts() {
  for (int sig : kInterruptSignals) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == &remove_scratch_and_die)
      ::sigaction(sig, &g_before[sig], nullptr);
  }
  g_scratch_path[0] = '\0';
}

// A private build directory, removed at the end unless kept (or something failed inside synk),
// and on Ctrl-C.
class ScratchDir {
 public:
  explicit ScratchDir(bool keep) : keep_(keep) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = fmt::format("{}/synkc-aot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!::mkdtemp(pattern.data())) synk::internal_error(fmt::format("cannot create {}: {}", pattern, std::strerror(errno)));
    path_ = pattern;
    if (keep_) std::cerr << "synkc: keeping the build directory " << path_ << "\n";
    else watch_interrupts(path_.string());
  }
  ~ScratchDir() {
    unwatch_interrupts();
    std::error_code ec;
    if (!keep_) fs::remove_all(path_, ec);
  }
  void keep() {
    keep_ = true;
    unwatch_interrupts();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool keep_;
};

std::vector<std::string> compile_flags() {
  std::vector<std::string> flags = {"-std=c++20", "-O2", "-fPIC"};
  for (const std::string& dir : layout().include_dirs) flags.push_back("-I" + dir);
  return flags;
}

// Kernel objects and the compiled stub; returns the object paths.
// A synkc copied away from its build tree or installation finds neither: say so, rather than let
// the C++ compiler fail on the generated code's first #include.
void require_synk_headers() {
  for (const std::string& dir : layout().include_dirs)
    if (std::error_code ec; fs::exists(fs::path(dir) / "synk" / "aot_module.h", ec)) return;
  throw AotUserError(fmt::format("synkc cannot find synk's headers (looked for synk/aot_module.h in {}): run the "
                                 "synkc of a build tree, or of an installation (bin/ beside include/synk and lib/)",
                                 fmt::join(layout().include_dirs, ", ")));
}

std::vector<std::string> build_objects(const AotModule& module, const AotOptions& options, ScratchDir& dir) {
  require_synk_headers();
  std::vector<std::string> objects;
  for (size_t f = 0; f < module.kernels.size(); ++f) {
    const AotKernels& k = module.kernels[f];
    if (k.symbols.empty()) continue;
    fs::path path = dir.path() / fmt::format("{}_kernels{}.o", module.name, f);
    std::vector<char> object = compile_object_for_cpu(k.source, options.target_cpu,
                                                      fmt::format("synk_{}_{}", module.name, k.function),
                                                      (dir.path() / fmt::format("scratch{}.o", f)).string());
    write_file(path, std::string(object.begin(), object.end()));
    objects.push_back(path.string());
  }
  // The GPU images, where the stub's .incbin finds them (the assembler's -I).
  for (const AotKernels& k : module.kernels)
    for (size_t i = 0; i < k.cuda.images.size(); ++i)
      write_file(dir.path() / k.gpu_files.at(i),
                 std::string(k.cuda.images[i].bytes(), k.cuda.images[i].byte_count()));
  fs::path stub = dir.path() / (module.name + "_stub.cpp");
  fs::path stub_object = dir.path() / (module.name + "_stub.o");
  write_file(stub, module.stub);
  std::vector<std::string> argv = {cxx()};
  for (const std::string& flag : compile_flags()) argv.push_back(flag);
  argv.push_back("-Wa,-I," + dir.path().string());
  for (const std::string& a : {std::string("-c"), stub.string(), std::string("-o"), stub_object.string()}) argv.push_back(a);
  CommandResult result = run_command(argv);
  if (result.status != 0) {
    dir.keep();
    synk::internal_error(fmt::format("the C++ compiler failed on synk's generated stub for module '{}' (saved to {}):\n{}",
                                    module.name, stub.string(), result.output));
  }
  objects.push_back(stub_object.string());
  return objects;
}

}  // namespace

std::string include_flags() {
  std::vector<std::string> flags;
  for (const std::string& dir : layout().include_dirs) flags.push_back("-I" + quote(dir));
  return fmt::format("{}", fmt::join(flags, " "));
}

std::string link_flags(bool bundle) {
  std::vector<std::string> flags;
  if (!bundle)
    for (const std::string& lib : layout().synk_libs) flags.push_back(quote(lib));
  for (const std::string& lib : layout().system_libs) flags.push_back(quote(lib));
  return fmt::format("{}", fmt::join(flags, " "));
}

// Copies the archive and writes the header beside their destinations, then renames both into
// place: an output that cannot be written (a directory, no permission) leaves neither behind. Such
// a path is a bad argument, a UsageError (exit 2), as for --emit -o.
void publish_outputs(const fs::path& archive, const std::string& archive_path, const std::string& header_path,
                     const std::string& header) {
  const std::string suffix = fmt::format(".synkc-tmp-{}", ::getpid());
  std::vector<std::pair<fs::path, fs::path>> staged;   // temporary -> destination
  auto discard = [&] {
    std::error_code ignored;
    for (const auto& [temp, target] : staged) fs::remove(temp, ignored);
  };
  try {
    if (!header_path.empty()) {
      std::error_code ec1, ec2;
      if (fs::weakly_canonical(archive_path, ec1) == fs::weakly_canonical(header_path, ec2) && !ec1 && !ec2)
        throw UsageError(fmt::format("-o {} and --header {} name the same file", archive_path, header_path));
    }
    for (const std::string& path : {archive_path, header_path}) {
      std::error_code ec;
      if (!path.empty() && fs::is_directory(path, ec))
        throw UsageError(fmt::format("cannot write '{}': it is a directory", path));
    }
    const fs::path archive_temp = archive_path + suffix;
    std::error_code ec;
    staged.emplace_back(archive_temp, archive_path);
    fs::copy_file(archive, archive_temp, fs::copy_options::overwrite_existing, ec);
    if (ec) throw UsageError(fmt::format("cannot write '{}': {}", archive_path, ec.message()));
    if (!header_path.empty()) {
      staged.emplace_back(header_path + suffix, header_path);
      try {
        write_file(staged.back().first, header, header_path);
      } catch (const AotUserError& e) {   // an output path: a usage error
        throw UsageError(e.what());
      }
    }
    for (const auto& [temp, target] : staged) {
      fs::rename(temp, target, ec);
      if (ec) throw UsageError(fmt::format("cannot write '{}': {}", target.string(), ec.message()));
    }
  } catch (...) {
    discard();
    throw;
  }
}

void build_library(const AotModule& module, const std::string& archive_path, const std::string& header_path,
                   const AotOptions& options) {
  ScratchDir dir(options.keep_temps);
  std::vector<std::string> objects = build_objects(module, options, dir);
  // Into a scratch archive first, renamed at the end: a failure never leaves half an archive.
  fs::path scratch = dir.path() / "out.a";
  CommandResult result;
  if (options.bundle) {
    std::string script = "create " + scratch.string() + "\n";
    for (const std::string& object : objects) script += "addmod " + object + "\n";
    for (const std::string& lib : layout().synk_libs) script += "addlib " + lib + "\n";
    script += "save\nend\n";
    write_file(dir.path() / "archive.mri", script);
    result = run_command({"ar", "-M"}, (dir.path() / "archive.mri").string());
  } else {
    std::vector<std::string> argv = {"ar", "rcs", scratch.string()};
    argv.insert(argv.end(), objects.begin(), objects.end());
    result = run_command(argv);
  }
  // synk's libraries carry debug information (most of their size): a bundled archive drops it.
  if (result.status == 0 && result.output.empty() && options.bundle) result = run_command({"strip", "--strip-debug", scratch.string()});
  if (result.status != 0 || !result.output.empty()) {
    dir.keep();
    synk::internal_error(fmt::format("ar failed building {} (files in {}):\n{}", archive_path, dir.path().string(), result.output));
  }
  publish_outputs(scratch, archive_path, header_path, module.header);
}

void build_loadable_library(const AotModule& module, const std::string& path, const AotOptions& options) {
  ScratchDir dir(options.keep_temps);
  std::vector<std::string> objects = build_objects(module, options, dir);
  // Only the LibraryDef is exported: two libraries' kernels never meet in one namespace.
  write_file(dir.path() / "exports.map", fmt::format("{{ global: {}; local: *; }};\n", kLibraryEntrySymbol));
  std::vector<std::string> argv = {cxx(), "-shared", "-Wl,--no-undefined", "-Wl,--as-needed",
                                   "-Wl,--version-script=" + (dir.path() / "exports.map").string()};
  argv.insert(argv.end(), objects.begin(), objects.end());
  // The kernels call BLAS, oneDNN and libm (--as-needed drops the rest); synk's own libraries are
  // the loading program's.
  for (const std::string& lib : layout().system_libs)
    if (!lib.ends_with(".a")) argv.push_back(lib);
  argv.push_back("-lm");
  fs::path scratch = dir.path() / "out.so";
  for (const std::string& a : {std::string("-o"), scratch.string()}) argv.push_back(a);
  CommandResult result = run_command(argv);
  if (result.status != 0) {
    dir.keep();
    synk::internal_error(fmt::format("linking the loadable library {} failed (files in {}):\n{}", path,
                                    dir.path().string(), result.output));
  }
  std::error_code ec;
  fs::copy_file(scratch, path, fs::copy_options::overwrite_existing, ec);
  if (ec) throw UsageError(fmt::format("cannot write '{}': {}", path, ec.message()));
}

void build_executable(const AotModule& module, const std::string& driver_path, const std::string& output_path,
                      const AotOptions& options) {
  std::error_code ec;
  if (!fs::is_regular_file(driver_path, ec))
    throw AotUserError(fmt::format("cannot read the driver '{}': {}", driver_path,
                                   fs::exists(driver_path, ec) ? "not a regular file" : std::strerror(ENOENT)));
  ScratchDir dir(options.keep_temps);
  std::vector<std::string> objects = build_objects(module, options, dir);
  write_file(dir.path() / (module.name + ".h"), module.header);
  fs::path driver_object = dir.path() / "driver.o";
  std::vector<std::string> argv = {cxx()};
  for (const std::string& flag : compile_flags()) argv.push_back(flag);
  argv.push_back("-I" + dir.path().string());
  if (const char* extra = std::getenv("CXXFLAGS"))
    for (const std::string& flag : split_list(std::string(extra), ' ')) argv.push_back(flag);
  for (const std::string& a : {std::string("-c"), driver_path, std::string("-o"), driver_object.string()}) argv.push_back(a);
  CommandResult result = run_command(argv);
  if (result.status != 0)
    throw AotUserError(fmt::format("the driver '{}' does not compile:\n{}", driver_path, result.output));
  argv = {cxx(), driver_object.string()};
  argv.insert(argv.end(), objects.begin(), objects.end());
  for (const std::string& lib : layout().synk_libs) argv.push_back(lib);
  for (const std::string& lib : layout().system_libs) argv.push_back(lib);
  fs::path scratch = dir.path() / "app";
  argv.push_back("-o");
  argv.push_back(scratch.string());
  result = run_command(argv);
  if (result.status != 0)
    throw AotUserError(fmt::format("linking '{}' with module '{}' failed:\n{}", driver_path, module.name, result.output));
  fs::copy_file(scratch, output_path, fs::copy_options::overwrite_existing, ec);
  if (ec) throw UsageError(fmt::format("cannot write '{}': {}", output_path, ec.message()));
}

}  // namespace synk::compiler::aot
