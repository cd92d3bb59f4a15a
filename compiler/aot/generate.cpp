// The texts of an ahead-of-time module (aot.h): kernel sources, host stub, header. The stub
// bakes the user's .synk text (so run-time messages quote its lines) with the absolute directory
// of its load() paths, exactly as jit::load_file reads it, and the bytes of those .npy files
// (unless asked not to); lowering that text again at run time
// (aot_runtime.cpp) reproduces the plan the kernels were compiled from, which the baked hash of
// each function's kernel source checks.
#include "compiler/aot/aot.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/source_hash.h"
#include "compiler/pipeline.h"
#include "compiler/backend/signature.h"
#include "compiler/cpu/codegen_cpu.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/cuda/codegen_cuda.h"
#include "compiler/lower.h"
#include "dsl/sema_optimizer.h"

namespace synk::compiler::aot {
namespace {

constexpr const char* kCxxKeywords[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
    "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
    "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
    "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
    "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
    "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
    "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "synk",
    // Macros and global names of the C and C++ headers the stub and the header include: a function
    // or module called like one gets an underscore too.
    "std", "main", "errno", "EOF", "NULL", "offsetof", "assert", "stdin", "stdout", "stderr", "abort", "exit",
    "malloc", "free", "memcpy", "size_t", "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t", "int8_t", "int16_t",
    "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "INT8_MIN", "INT8_MAX", "INT16_MIN",
    "INT16_MAX", "INT32_MIN", "INT32_MAX", "INT64_MIN", "INT64_MAX", "UINT8_MAX", "UINT16_MAX", "UINT32_MAX",
    "UINT64_MAX", "SIZE_MAX", "INT_MAX", "INT_MIN", "UINT_MAX", "LONG_MAX", "LONG_MIN", "CHAR_BIT", "FLT_MAX",
    "DBL_MAX", "RAND_MAX", "EXIT_SUCCESS", "EXIT_FAILURE", "BUFSIZ", "FILENAME_MAX", "SEEK_SET", "SEEK_CUR",
    "SEEK_END", "linux", "unix"};

// Names the header declares itself; a function with one of them gets an underscore.
constexpr const char* kHeaderNames[] = {"module", "shared", "load_all", "function_names",
                                        "shared_names", "save_checkpoint", "load_checkpoint"};

// A C++ string literal, one source line per literal piece (octal escapes never run on).
std::string string_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n\"\n    \"";
    } else if (c >= 0x20 && c < 0x7f && c != '?') {   // '?': no trigraph surprises
      out += char(c);
    } else {
      out += fmt::format("\\{:03o}", c);
    }
  }
  const std::string open_piece = "\"\n    \"";   // the text ended with a newline: no empty last piece
  if (out.size() > open_piece.size() && out.ends_with(open_piece)) {
    out.resize(out.size() - open_piece.size() + 1);
    return out;
  }
  return out + "\"";
}

// "sm_80", "sm_90a", "compute_90": an image's architecture in section and file names.
std::string image_tag(const CudaImage& image) {
  return fmt::format("{}_{}{}", image.ptx ? "compute" : "sm", image.sm, image.arch_specific ? "a" : "");
}

std::string entry_name(const std::string& function) {
  std::string name = cxx_identifier(function);
  if (std::find(std::begin(kHeaderNames), std::end(kHeaderNames), name) != std::end(kHeaderNames)) name += '_';
  return name;
}

// The training steps (`minimize`) whose gradient and update functions are both in this artifact:
// each gets an entry point `<function>_step()` returning a synk::TrainStep.
struct StepEntry {
  std::string entry, function, update, gradient_var;
  int64_t num_packs = 0;
  std::vector<std::pair<std::string, std::string>> hyper;   // (keyword, variable) for synk::HyperParameter
};

// The synk::HyperParameter list of a step, as C++ (the keyword's range spelled as synk::HyperRange,
// where lr may be 0 at run time: Positive becomes NonNegative, as in jit::Module::train_step).
std::string hyper_list(const StepEntry& step) {
  std::vector<std::string> items;
  for (const auto& [keyword, variable] : step.hyper) {
    const char* range = dsl::hyper_parameter_range(keyword) == dsl::HyperRange::Unit ? "Unit" : "NonNegative";
    items.push_back(fmt::format("{{{}, shared({}).var(), synk::HyperRange::{}}}", string_literal(keyword),
                                string_literal(variable), range));
  }
  return fmt::format("{{{}}}", fmt::join(items, ", "));
}

std::vector<StepEntry> step_entries(const ir::Module& module, const std::vector<const ir::Function*>& functions) {
  auto compiled = [&](const std::string& name) {
    return std::any_of(functions.begin(), functions.end(), [&](const ir::Function* f) { return f->name == name; });
  };
  std::vector<StepEntry> steps;
  for (const ir::TrainStep& step : module.train_steps) {
    const ir::Optimizer& opt = module.optimizers.at(size_t(step.optimizer));
    if (!compiled(step.function) || !compiled(opt.update_function()) || opt.gradient < 0) continue;
    std::string entry = entry_name(step.function + "_step");
    // A function's entry point of that name exists: no accessor rather than a clash.
    if (std::any_of(functions.begin(), functions.end(), [&](const ir::Function* f) { return entry_name(f->name) == entry; }))
      continue;
    steps.push_back({entry, step.function, opt.update_function(), module.shareds.at(size_t(opt.gradient)).name,
                     opt.num_packs, dsl::hyper_parameter_variables(opt)});
  }
  return steps;
}

// "x: f32[n, 10] scatter" for the comment over each entry point.
std::string signature_comment(const ir::Module& module, const ir::Function& fn) {
  std::vector<std::string> inputs, outputs, updates;
  for (const ir::Param& p : fn.params)
    inputs.push_back(fmt::format("{}: {} {}", p.name, ir::type_str(p.type), ir::role_name(p.role)));
  for (const ir::Output& o : fn.outputs)
    outputs.push_back(fmt::format("{}: {} ({})", o.name, ir::type_str(fn.node(o.node).type), ir::mode_name(o.mode)));
  for (const ir::Update& u : fn.updates) {
    const ir::SharedVar& v = module.shareds.at(size_t(u.shared));
    updates.push_back(fmt::format("{}: {} ({})", v.name, ir::type_str(v.type), ir::mode_name(u.mode)));
  }
  std::string text = fmt::format("// {}({})\n//   -> {}\n", fn.name, fmt::join(inputs, ", "),
                                 outputs.empty() ? std::string("no outputs") : fmt::format("{}", fmt::join(outputs, ", ")));
  if (!updates.empty()) text += fmt::format("//   updates {}\n", fmt::join(updates, ", "));
  return text;
}

std::string make_header(const std::string& name, const std::string& source_name, const ir::Module& module,
                        const std::vector<const ir::Function*>& functions) {
  std::string h = fmt::format(
      "// Generated by synkc from {0}\n"
      "// The typed entry points of module '{1}' (ahead of time; no LLVM at run time). Link the archive\n"
      "// synkc wrote with this header, then what `synkc --print-link-flags` prints.\n"
      "// Every function is built and registered with the runtime on first use (before or after\n"
      "// synk::fork()); {1}::load_all() does it for all of them at once.\n"
      "#pragma once\n\n#include <string>\n#include <vector>\n\n#include \"synk/aot_module.h\"\n#include \"synk/checkpoint.h\"\n#include \"synk/train_step.h\"\n\n"
      "namespace {1} {{\n\n",
      source_name, name);
  for (const ir::Function* fn : functions)
    h += signature_comment(module, *fn) + fmt::format("synk::Function {}();\n\n", entry_name(fn->name));
  for (const StepEntry& step : step_entries(module, functions))
    h += fmt::format("// Training step: {}(), the all-reduce of {} weighted by each rank's rows, {}() as one call "
                     "(synk::TrainStep).\n"
                     "synk::TrainStep {}();\n\n", step.function, step.gradient_var, step.update, step.entry);
  std::vector<std::string> shareds;
  for (const ir::SharedVar& v : module.shareds) shareds.push_back(fmt::format("{}: {}", v.name, ir::type_str(v.type)));
  h += fmt::format("// Shared variables: {}.\n", shareds.empty() ? std::string("none") : fmt::format("{}", fmt::join(shareds, ", ")));
  h += "// A UsageError for an unknown name (listing the module's shared variables).\n"
       "synk::aot::Shared shared(const std::string& name);\n"
       "synk::Module module();   // the runtime's handle on the shared variables\n"
       "void load_all();\n"
       "std::vector<std::string> function_names();\n"
       "std::vector<std::string> shared_names();\n"
       "// Checkpoints (synk/checkpoint.h): every shared variable but the sliceable ones, and the\n"
       "// functions' random state; a load restores them on every rank.\n"
       "void save_checkpoint(const std::string& dir, const synk::CheckpointMetadata& metadata = {});\n"
       "synk::CheckpointMetadata load_checkpoint(const std::string& dir);\n\n";
  h += fmt::format("}}  // namespace {}\n", name);
  return h;
}

// The load() files built into the stub: each file's bytes by the assembler's .incbin (no C++
// text of the data, however large), registered with the runtime's .npy reader under the path the
// module's load() names, so the program reads them from memory (aot_runtime.h, embed_data).
std::string embedded_data(const std::string& name, const std::vector<std::string>& files, bool library) {
  if (files.empty()) return {};
  std::string rows;   // a loadable library's table (load_library registers the files)
  std::string s = "// The .npy files of the module's load() initialisers, built in (synkc --no-embed-data reads\n"
                  "// them from their paths at run time instead).\n";
  for (size_t i = 0; i < files.size(); ++i) {
    std::string path;   // as an assembler string
    for (char c : files[i]) {
      if (c == '"' || c == '\\') path += '\\';
      path += c;
    }
    const std::string begin = fmt::format("synk_{}__data{}", name, i), end = begin + "_end";
    const std::string assembly = fmt::format(
        ".pushsection .rodata.{0},\"a\",@progbits\n.balign 64\n.globl {0}\n.hidden {0}\n{0}:\n.incbin \"{2}\"\n"
        ".globl {1}\n.hidden {1}\n{1}:\n.popsection\n", begin, end, path);
    s += fmt::format("__asm__({});\nextern \"C\" const char {}[], {}[];\n", string_literal(assembly), begin, end);
    if (library)
      rows += fmt::format("    {{{}, {}, {}}},\n", string_literal(files[i]), begin, end);
    else
      s += fmt::format("[[maybe_unused]] const bool kEmbedded{} = synk::aot::embed_data({}, {}, {});\n", i,
                       string_literal(files[i]), begin, end);
  }
  if (library) s += fmt::format("const synk::aot::EmbeddedFile kData[] = {{\n{}}};\n", rows);
  return s + "\n";
}

// The function's CUDA program compiled for every listed architecture (NVRTC, the kernel cache).
void add_gpu_images(const ir::Module& module, const KernelPlan& plan, const std::string& module_name,
                    const AotOptions& options, AotKernels& k) {
  CudaProgram program = generate_cuda_program(module, plan);
  k.has_gpu = true;
  const bool any_kernel = std::any_of(program.launches.begin(), program.launches.end(),
                                      [](const CudaKernelLaunch& l) { return l.kind != CudaLaunchKind::Blas; });
  if (any_kernel) {
    k.cuda = compile_cuda_images(program.source, "synk_" + k.function, options.cuda_archs, options.cuda_arch_specific);
  } else {
    k.cuda.function = "synk_" + k.function;
    k.cuda.source_hash = synk::source_hash(program.source);
  }
  for (const CudaImage& image : k.cuda.images)
    k.gpu_files.push_back(fmt::format("{}.{}.{}.{}", module_name, k.function, image_tag(image), image.ptx ? "ptx" : "cubin"));
}

// The GPU images of function `f`, each in its own section (.incbin of the file build.cpp writes
// next to the stub), and their table.
std::string embedded_gpu_images(const std::string& name, size_t f, const AotKernels& k) {
  if (k.cuda.images.empty()) return {};
  std::string s, rows;
  for (size_t i = 0; i < k.cuda.images.size(); ++i) {
    const CudaImage& image = k.cuda.images[i];
    const std::string begin = fmt::format("synk_{}__gpu{}_{}", name, f, i), end = begin + "_end";
    const std::string assembly = fmt::format(
        ".pushsection .synk_gpu.{0}.{1}.{2},\"a\",@progbits\n.balign 64\n.globl {3}\n.hidden {3}\n{3}:\n"
        ".incbin \"{5}\"\n.globl {4}\n.hidden {4}\n{4}:\n.popsection\n",
        name, k.function, image_tag(image), begin, end, k.gpu_files[i]);
    s += fmt::format("__asm__({});\nextern \"C\" const char {}[], {}[];\n", string_literal(assembly), begin, end);
    const char* kind = image.ptx ? "Ptx" : image.arch_specific ? "ArchSpecificCubin" : "Cubin";
    rows += fmt::format("    {{{}, synk::aot::GpuImageKind::{}, {}, {}, {}}},\n", image.sm, kind, image.min_driver, begin, end);
  }
  return s + fmt::format("const synk::aot::GpuImage kGpuImages{}[] = {{\n{}}};\n", f, rows);
}

std::string make_stub(const std::string& name, const std::string& source_name, const std::string& base_dir,
                      const std::string& text, const ir::Module& module, const std::vector<const ir::Function*>& functions,
                      const std::vector<AotKernels>& kernels, const std::vector<std::string>& embedded_files,
                      bool library) {
  std::string s = fmt::format(
      "// Generated by synkc from {0}\n"
      "// The host stub of module '{1}': the .synk text, the table of linked kernels and the hash of each\n"
      "// function's kernel source; synk/aot_module.h builds the functions from them at first use.\n"
      "#include <string>\n#include <vector>\n\n#include \"synk/aot_module.h\"\n#include \"synk/train_step.h\"\n\n",
      source_name, name);
  for (const AotKernels& k : kernels)
    for (const std::string& sym : k.linked_symbols)
      s += fmt::format("extern \"C\" int64_t {}(void* const* bufs, const int64_t* syms, int64_t* err);\n", sym);
  // The stub's own names live in <name>_stub, which the entry points name in full: a function of
  // the module may be called kModule, and the module itself too.
  s += fmt::format("\nnamespace {{\nnamespace {}_stub {{\n\n", name);
  s += embedded_data(name, embedded_files, library);
  s += fmt::format("const char kText[] =\n    {};\n\n", string_literal(text));
  std::vector<std::string> tables;
  for (size_t f = 0; f < kernels.size(); ++f) {
    const AotKernels& k = kernels[f];
    if (!k.symbols.empty()) {
      s += fmt::format("const synk::aot::KernelSymbol kKernels{}[] = {{\n", f);
      for (size_t i = 0; i < k.symbols.size(); ++i)
        s += fmt::format("    {{\"{}\", &{}}},\n", k.symbols[i], k.linked_symbols[i]);
      s += "};\n";
    }
    s += embedded_gpu_images(name, f, k);
    std::string gpu;   // the GPU version: its CUDA source hash and images
    if (k.has_gpu)
      gpu = fmt::format(", 0x{:016x}ull, {}, {}", k.cuda.source_hash,
                        k.cuda.images.empty() ? "nullptr" : fmt::format("kGpuImages{}", f), k.cuda.images.size());
    tables.push_back(fmt::format("    {{\"{}\", 0x{:016x}ull, {}, {}{}}},", k.function, synk::source_hash(k.source),
                                 k.symbols.empty() ? "nullptr" : fmt::format("kKernels{}", f), k.symbols.size(), gpu));
  }
  if (!tables.empty()) s += fmt::format("const synk::aot::FunctionTable kFunctions[] = {{\n{}\n}};\n", fmt::join(tables, "\n"));
  s += fmt::format("\nconst synk::aot::ModuleDef kModule = {{\"{}\", {}, {}, kText, {}, {}}};\n", name,
                   string_literal(source_name), string_literal(base_dir), tables.empty() ? "nullptr" : "kFunctions",
                   tables.size());
  if (library)   // registered by load_library; the library refers to no symbol of synk
    return s + fmt::format(
                   "const synk::aot::LibraryDef kLibrary = {{synk::aot::kLibraryAbi, sizeof(synk::aot::ModuleDef), "
                   "&kModule, {}, {}}};\n\n}}  // namespace {}_stub\n}}  // namespace\n\n"
                   "extern \"C\" __attribute__((visibility(\"default\"))) const synk::aot::LibraryDef* {}() {{\n"
                   "  return &{}_stub::kLibrary;\n}}\n",
                   embedded_files.empty() ? "nullptr" : "kData", embedded_files.size(), name, kLibraryEntrySymbol, name);
  s += fmt::format("[[maybe_unused]] const bool kRegistered = synk::aot::register_module(&kModule);\n\n"
                   "}}  // namespace {0}_stub\n}}  // namespace\n\nnamespace {0} {{\n\n", name);
  const std::string def = "::" + name + "_stub::kModule";
  for (const ir::Function* fn : functions)
    s += fmt::format("synk::Function {}() {{ return synk::aot::function({}, {}); }}\n", entry_name(fn->name), def,
                     string_literal(fn->name));
  s += fmt::format(
      "synk::aot::Shared shared(const std::string& name) {{ return synk::aot::shared({0}, name); }}\n"
      "synk::Module module() {{ return synk::aot::runtime_module({0}); }}\n"
      "void load_all() {{ synk::aot::load_all({0}); }}\n"
      "std::vector<std::string> function_names() {{ return synk::aot::function_names({0}); }}\n"
      "std::vector<std::string> shared_names() {{ return synk::aot::shared_names({0}); }}\n"
      "void save_checkpoint(const std::string& dir, const synk::CheckpointMetadata& metadata) {{\n"
      "  synk::aot::save_checkpoint({0}, dir, metadata);\n}}\n"
      "synk::CheckpointMetadata load_checkpoint(const std::string& dir) {{\n"
      "  return synk::aot::load_checkpoint({0}, dir);\n}}\n\n", def);
  for (const StepEntry& step : step_entries(module, functions))
    s += fmt::format("synk::TrainStep {}() {{\n  return synk::aot::train_step({}, synk::TrainStep({}, {}(), shared({}).var(), "
                     "{}(), {},\n                                                         {}));\n}}\n",
                     step.entry, def, string_literal(step.function), entry_name(step.function),
                     string_literal(step.gradient_var), entry_name(step.update), step.num_packs, hyper_list(step));
  s += fmt::format("}}  // namespace {}\n", name);
  return s;
}

}  // namespace

std::string cxx_identifier(const std::string& name) {
  std::string id;
  for (char c : name) id += (std::isalnum((unsigned char)c) || c == '_') ? c : '_';
  if (id.empty() || std::isdigit((unsigned char)id[0])) id = "_" + id;
  if (std::find(std::begin(kCxxKeywords), std::end(kCxxKeywords), id) != std::end(kCxxKeywords)) id += '_';
  return id;
}

std::string module_name_from_path(const std::string& path) {
  return cxx_identifier(std::filesystem::path(path).stem().string());
}

static std::string absolute_base_dir(const std::string& source_name) {
  namespace fs = std::filesystem;
  std::string dir = fs::path(source_name).parent_path().string();
  std::string base_dir = fs::absolute(dir.empty() ? fs::path(".") : fs::path(dir)).lexically_normal().string();
  if (base_dir.size() > 1 && base_dir.back() == '/') base_dir.pop_back();
  return base_dir;
}

AotModule generate(const std::string& source_name, const std::string& text, const AotOptions& options) {
  return generate(prepare_module(source_name, text, absolute_base_dir(source_name)), source_name, text, options);
}

AotModule generate(const ir::Module& module, const std::string& source_name, const std::string& text,
                   const AotOptions& options) {
  const std::string base_dir = absolute_base_dir(source_name);

  AotModule result;
  result.name = options.module_name.empty() ? module_name_from_path(source_name) : options.module_name;
  if (result.name != cxx_identifier(result.name))
    throw synk::UserError(fmt::format("module name '{}' cannot name a C++ namespace: it is not an identifier, or "
                                      "is a C++ keyword or a name of the C and C++ headers (try '{}')",
                                      result.name, cxx_identifier(result.name)));
  // A training function selected with --fn brings its optimizer's update function: its step
  // (NAME_step()) needs both.
  std::vector<std::string> wanted = options.functions;
  for (const ir::TrainStep& t : module.train_steps)
    if (std::find(options.functions.begin(), options.functions.end(), t.function) != options.functions.end())
      wanted.push_back(module.optimizers.at(size_t(t.optimizer)).update_function());
  std::vector<const ir::Function*> functions;
  for (const ir::Function& fn : module.functions)
    if (options.functions.empty() || std::find(wanted.begin(), wanted.end(), fn.name) != wanted.end())
      functions.push_back(&fn);
  std::map<std::string, std::string> entries;   // C++ entry point -> its function
  for (const ir::Function* f : functions)
    if (auto [it, fresh] = entries.emplace(entry_name(f->name), f->name); !fresh)
      throw synk::UserError(fmt::format("functions '{}' and '{}' would both be {}::{}() in the C++ header (a C++ "
                                        "keyword or a name of the header's own gets a '_' added): rename one",
                                        it->second, f->name, result.name, it->first));
  for (const ir::Function* f : functions) {
    const ir::Function& fn = *f;
    KernelPlan plan = lower(module, fn, cpu_lower_options());
    (void)make_signature(module, fn, plan);   // a dtype the runtime lacks is an error now, not at run time
    AotKernels k;
    k.function = fn.name;
    k.source = generate_cpu_source(module, plan, result.name);
    for (const Kernel& kernel : plan.kernels) {
      if (kernel_is_library_call(plan, kernel)) continue;
      k.symbols.push_back(kernel_symbol(plan, kernel));
      k.linked_symbols.push_back(kernel_symbol(plan, kernel, result.name));
    }
    if (!options.cuda_archs.empty()) add_gpu_images(module, lower(module, fn), result.name, options, k);
    result.kernels.push_back(std::move(k));
  }
  // Every load() of the module (the runtime makes every shared variable of a module, whichever
  // functions the artifact holds), with its path as the runtime will read it (module_spec
  // resolves it against base_dir alike).
  if (options.embed_data)
    for (const ir::SharedVar& v : with_absolute_load_paths(module, base_dir).shareds) {
      const auto* load = std::get_if<ir::InitLoad>(&v.init);
      if (!load || std::find(result.data_files.begin(), result.data_files.end(), load->path) != result.data_files.end())
        continue;
      // The front end found the file; what the assembler needs beyond that is checked here, so
      // that it is the user's error, not a failed stub.
      std::ifstream file(load->path, std::ios::binary);
      if (!file || load->path.find('\n') != std::string::npos)
        throw synk::UserError(fmt::format("shared variable '{}' = load(\"{}\"): cannot read '{}' to build it into the "
                                         "artifact{} (or pass --no-embed-data to read it at run time)",
                                         v.name, load->path, load->path,
                                         file ? ": a newline in the path" : fmt::format(": {}", std::strerror(errno))));
      result.data_files.push_back(load->path);
    }
  result.header = make_header(result.name, source_name, module, functions);
  result.stub = make_stub(result.name, source_name, base_dir, text, module, functions, result.kernels,
                          result.data_files, options.loadable_library);
  return result;
}

}  // namespace synk::compiler::aot
