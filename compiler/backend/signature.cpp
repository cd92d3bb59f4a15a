// The host half every backend shares: a compiled function's runtime signature and a module's
// runtime description, made from the IR (see signature.h).
#include "compiler/backend/signature.h"

#include <algorithm>
#include <filesystem>
#include <variant>

namespace synk::compiler {

namespace {

std::vector<rt::DimSpec> dims_of(const ir::Shape& shape, const std::vector<std::string>& symbols) {
  std::vector<rt::DimSpec> dims;
  for (const ir::Dim& d : shape) {
    rt::DimSpec spec{d.size, -1};
    if (d.is_symbolic()) {
      auto it = std::find(symbols.begin(), symbols.end(), d.symbol);
      spec.symbol = int32_t(it - symbols.begin());
    }
    dims.push_back(spec);
  }
  return dims;
}

}  // namespace

DType runtime_dtype(DType t) {
  if (is_runtime_dtype(t)) return t;
  throw synk::UserError(std::string("dtype ") + dtype_name(t) + " is reserved: the runtime cannot hold it yet");
}

// The name, runtime dtype and dims of an input, output or shared variable of type `t`.
template <class Spec>
Spec tensor_spec(const std::string& name, const ir::TensorType& t, const std::vector<std::string>& symbols) {
  Spec spec;
  spec.name = name;
  spec.dtype = runtime_dtype(t.dtype);
  spec.dims = dims_of(t.shape, symbols);
  return spec;
}

rt::FunctionSignature make_signature(const ir::Module& module, const ir::Function& fn, const KernelPlan& plan) {
  rt::FunctionSignature sig;
  sig.name = fn.name;
  sig.symbols = plan.symbols;
  for (const ir::Param& p : fn.params) {
    rt::InputSpec in = tensor_spec<rt::InputSpec>(p.name, p.type, sig.symbols);
    in.role = p.role;
    sig.inputs.push_back(std::move(in));
  }
  sig.shareds_read = plan.shareds_read;
  for (const ir::Output& o : fn.outputs) {
    const ir::TensorType& t = plan.function.node(plan.function.outputs.at(sig.outputs.size()).node).type;
    rt::OutputSpec out = tensor_spec<rt::OutputSpec>(o.name, t, sig.symbols);
    out.mode = o.mode;
    sig.outputs.push_back(std::move(out));
  }
  for (const ir::Update& u : fn.updates) sig.updates.push_back(rt::UpdateSpec{int32_t(u.shared), u.mode});
  (void)module;
  return sig;
}

rt::ModuleSpec make_module_spec(const ir::Module& module) {
  rt::ModuleSpec spec;
  for (const ir::SharedVar& s : module.shareds)
    for (const ir::Dim& d : s.type.shape)
      if (d.is_symbolic() && std::find(spec.symbols.begin(), spec.symbols.end(), d.symbol) == spec.symbols.end())
        spec.symbols.push_back(d.symbol);
  for (const ir::SharedVar& s : module.shareds) {
    rt::SharedSpec sh = tensor_spec<rt::SharedSpec>(s.name, s.type, spec.symbols);
    sh.sliceable = s.sliceable;
    std::visit([&](const auto& init) {
      using T = std::decay_t<decltype(init)>;
      if constexpr (std::is_same_v<T, ir::InitZeros>) sh.init.kind = rt::InitSpec::Kind::Zeros;
      if constexpr (std::is_same_v<T, ir::InitOnes>) sh.init.kind = rt::InitSpec::Kind::Ones;
      if constexpr (std::is_same_v<T, ir::InitConstant>) { sh.init.kind = rt::InitSpec::Kind::Constant; sh.init.a = init.value; }
      if constexpr (std::is_same_v<T, ir::InitNormal>) {
        sh.init.kind = rt::InitSpec::Kind::Normal; sh.init.seed = init.seed; sh.init.a = init.mean; sh.init.b = init.stddev;
      }
      if constexpr (std::is_same_v<T, ir::InitUniform>) {
        sh.init.kind = rt::InitSpec::Kind::Uniform; sh.init.seed = init.seed; sh.init.a = init.low; sh.init.b = init.high;
      }
      if constexpr (std::is_same_v<T, ir::InitLoad>) { sh.init.kind = rt::InitSpec::Kind::Load; sh.init.path = init.path; }
    }, s.init);
    spec.shareds.push_back(std::move(sh));
  }
  return spec;
}

ir::Module with_absolute_load_paths(const ir::Module& module, const std::string& base_dir) {
  namespace fs = std::filesystem;
  ir::Module out = module;
  fs::path base = base_dir.empty() ? fs::current_path() : fs::absolute(base_dir);
  for (ir::SharedVar& s : out.shareds) {
    auto* load = std::get_if<ir::InitLoad>(&s.init);
    if (!load) continue;
    fs::path p(load->path);
    load->path = (p.is_absolute() ? p : base / p).lexically_normal().string();
  }
  return out;
}

rt::ModuleSpec module_spec(const ir::Module& module, const std::string& base_dir) {
  return make_module_spec(with_absolute_load_paths(module, base_dir));
}

}  // namespace synk::compiler
