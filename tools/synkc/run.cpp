// `synkc run`: one function of a .synk file on N ranks, through the JIT and the runtime; prints
// (or saves with --out DIR) its outputs and updated shared variables (see driver.h).
#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/diagnostics.h"
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
  while (std::getline(stream, item, ',')) {   // a trailing comma ends the list ("5," is {5})
    if (item.empty())
      throw UsageError(fmt::format("{}: '{}' has an empty item (two commas in a row, or one first)", option, text));
    list.push_back(parse_index(item, option));
  }
  return list;
}

bool is_npy_path(const std::string& text) { return text.size() > 4 && text.ends_with(".npy"); }

// --batch: K (rows [0, K)), A:B (rows [A, B)), i,j,k (an index list; "5," is the list {5}) or
// an .npy file of integer indices.
synk::Batch parse_batch(const std::string& text) {
  if (is_npy_path(text)) {
    // bool converts safely to i64, but a mask is not a list of row indices.
    const synk::DType held = synk::rt::npy::read_header(text).dtype;
    if (held != synk::DType::I64 && held != synk::DType::I32 && held != synk::DType::U8)
      throw synk::UsageError(fmt::format("--batch {}: the file holds {} values; a batch is a list of row indices "
                                         "(i64, i32 or u8){}", text, synk::rt::dtype_name(held),
                                         held == synk::DType::Bool ? " (for a mask, save np.flatnonzero(mask))" : ""));
    return synk::Batch(synk::load_npy(text, synk::DType::I64, {.name = "--batch"}));
  }
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
    // numpy's "nan" for every NaN (printf shows a negative one as "-nan").
    case synk::DType::F32: return std::isnan(a.data<float>()[i]) ? "nan" : fmt::format("{}", a.data<float>()[i]);
    case synk::DType::F64: return std::isnan(a.data<double>()[i]) ? "nan" : fmt::format("{}", a.data<double>()[i]);
    case synk::DType::I32: return fmt::format("{}", a.data<int32_t>()[i]);
    case synk::DType::I64: return fmt::format("{}", a.data<int64_t>()[i]);
    case synk::DType::U8: return fmt::format("{}", a.data<uint8_t>()[i]);
    case synk::DType::Bool: return a.data<uint8_t>()[i] ? "true" : "false";
    case synk::DType::F16:
    case synk::DType::BF16: break;   // reserved: never the dtype of a runtime array
  }
  synk::internal_error(fmt::format("synkc run: an array of reserved dtype {}", synk::dtype_name(a.dtype)));
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

// The new value of every shared variable `fn` updates: the master's copy, or every rank's.
// Every leader makes the call (a rank's copy on another node is an exchange); node 0 shows them.
void emit_updates(const RunOptions& options, synk::jit::Module& module, const synk::ir::Function& fn) {
  const bool shows = synk::node() == 0;
  for (const synk::ir::Update& update : fn.updates) {
    const std::string& name = module.ir().shareds.at(size_t(update.shared)).name;
    if (!options.all_ranks) {
      if (shows) emit_value(options, "shared " + name, "shared." + name + ".npy", module.shared(name).get_value());
      continue;
    }
    for (int rank = 0; rank < synk::size(); ++rank) {   // global ranks: every node's under mpirun
      const synk::Array value = module.shared(name).get_value(rank);
      if (shows)
        emit_value(options, fmt::format("shared {} (rank {})", name, rank),
                   fmt::format("shared.{}.rank{}.npy", name, rank), value);
    }
  }
}

// --checkpoint DIR is written after the call: a DIR that cannot be is refused before it.
void check_checkpoint_path(const std::string& dir) {
  if (dir.empty()) return;
  synk::detail::check_save_target(dir, "--checkpoint " + dir);   // what the save would refuse after the call
  const std::filesystem::path parent = synk::detail::checkpoint_directory(dir).parent_path();
  // The save creates a directory there: try it now (a read-only or special filesystem).
  std::string probe = ((parent.empty() ? std::filesystem::path(".") : parent) / ".synkc-probe-XXXXXX").string();
  if (!::mkdtemp(probe.data()))
    throw UsageError(fmt::format("--checkpoint {}: cannot create a directory in '{}': {}", dir,
                                 parent.empty() ? "." : parent.string(), std::strerror(errno)));
  ::rmdir(probe.c_str());
}

}  // namespace

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
    throw UsageError(fmt::format("'{}' has no function '{}'{} (functions: {})", driver.input, options.function,
                                 synk::did_you_mean(options.function, module.function_names()),
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

  check_checkpoint_path(options.checkpoint);
  synk::Function function = module.function(options.function);   // compiled before the fork
  // A training function runs its whole step (gradient, all-reduce, update), as train_step does.
  const std::vector<std::string> trains = module.train_step_names();
  std::optional<synk::TrainStep> step;
  if (std::find(trains.begin(), trains.end(), options.function) != trains.end())
    step = module.train_step(options.function);
  synk::fork(options.ranks);
  // After the fork: under mpirun node 0 reads the checkpoint and every rank of every node gets it.
  if (!options.resume.empty()) module.load_checkpoint(options.resume);
  if (options.resume.empty() || options.seed != 0) function.set_seed(options.seed);
  if (options.resume.empty() || options.step != 0) function.set_step(options.step);
  for (const auto& [name, value] : sets)
    for (int rank = 0; rank < synk::size(); ++rank)   // each leader writes the ranks it holds
      module.shared(name).set_value(rank, value.ref(), options.force_cast);
  synk::Outputs outputs = step ? (*step)(arguments, call) : function(arguments, call);
  // Saved before anything is printed: a reader that closes the pipe early (`| head`) ends synkc
  // with SIGPIPE while it prints, and the step it ran must not be lost.
  if (!options.checkpoint.empty()) module.save_checkpoint(options.checkpoint);   // node 0 writes it
  if (synk::node() == 0)   // under mpirun every leader has the same results: node 0 shows them
    for (size_t i = 0; i < outputs.size(); ++i)
      emit_value(options, outputs.names()[i], outputs.names()[i] + ".npy", outputs[i]);
  emit_updates(options, module, *fn);
  if (const synk::ir::Function* update = step ? module.ir().find_function(step->update().name()) : nullptr)
    emit_updates(options, module, *update);
  std::cout << std::flush;
  synk::close();
  return kOk;
}

}  // namespace synkc
