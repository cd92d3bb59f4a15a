// IR <-> runtime descriptor mappings (see bridge.h). The enum orders of the two sides match by
// contract (runtime/descriptor.h says so); the switches below still spell every case out so that
// a new enumerator on either side is a compile warning here rather than a silent mismatch.
#include "compiler/bridge.h"

#include <filesystem>

#include "compiler/cpu_function.h"
#include "dsl/diagnostics.h"
#include "runtime/dtype.h"

namespace synk::compiler {

rt::DType runtime_dtype(ir::DType t) {
  switch (t) {
    case ir::DType::F32: return rt::DType::F32;
    case ir::DType::F64: return rt::DType::F64;
    case ir::DType::I32: return rt::DType::I32;
    case ir::DType::I64: return rt::DType::I64;
    case ir::DType::U8: return rt::DType::U8;
    case ir::DType::Bool: return rt::DType::Bool;
    case ir::DType::F16:
    case ir::DType::BF16: break;
  }
  throw dsl::UserError(std::string("dtype ") + ir::dtype_name(t) + " is reserved: the runtime cannot hold it yet");
}

ir::DType ir_dtype(rt::DType t) {
  switch (t) {
    case rt::DType::F32: return ir::DType::F32;
    case rt::DType::F64: return ir::DType::F64;
    case rt::DType::I32: return ir::DType::I32;
    case rt::DType::I64: return ir::DType::I64;
    case rt::DType::U8: return ir::DType::U8;
    case rt::DType::Bool: return ir::DType::Bool;
  }
  dsl::internal_error("ir_dtype: unknown runtime dtype " + std::to_string(int(t)));
}

rt::Role runtime_role(ir::Role r) {
  switch (r) {
    case ir::Role::Scatter: return rt::Role::Scatter;
    case ir::Role::Broadcast: return rt::Role::Broadcast;
    case ir::Role::Minibatch: return rt::Role::Minibatch;
  }
  dsl::internal_error("runtime_role: unknown role " + std::to_string(int(r)));
}

rt::ReduceMode runtime_mode(ir::ReduceMode m) {
  switch (m) {
    case ir::ReduceMode::Avg: return rt::ReduceMode::Avg;
    case ir::ReduceMode::Sum: return rt::ReduceMode::Sum;
    case ir::ReduceMode::Prod: return rt::ReduceMode::Prod;
    case ir::ReduceMode::Max: return rt::ReduceMode::Max;
    case ir::ReduceMode::Min: return rt::ReduceMode::Min;
    case ir::ReduceMode::Gather: return rt::ReduceMode::Gather;
    case ir::ReduceMode::None: return rt::ReduceMode::None;
  }
  dsl::internal_error("runtime_mode: unknown mode " + std::to_string(int(m)));
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
  // The field-by-field mapping lives beside the signature builder (cpu_function.cpp); both must
  // agree on symbol numbering, so there is one copy of it.
  return make_module_spec(with_absolute_load_paths(module, base_dir));
}

rt::Array to_array(const dsl::HostTensor& tensor) {
  rt::Array a;
  a.resize(runtime_dtype(tensor.dtype), tensor.shape);
  if (int64_t(tensor.data.size()) != a.size())
    dsl::internal_error("to_array: a HostTensor of shape " + rt::shape_string(tensor.shape) + " holds " +
                        std::to_string(tensor.data.size()) + " values");
  rt::convert_elements(tensor.data.data(), rt::DType::F64, a.bytes.data(), a.dtype, a.size());
  return a;
}

dsl::HostTensor to_host_tensor(const rt::ArrayRef& array) {
  dsl::HostTensor t;
  t.dtype = ir_dtype(array.dtype);
  t.shape = array.shape;
  t.data.resize(size_t(array.size()));
  rt::convert_elements(array.data, array.dtype, t.data.data(), rt::DType::F64, array.size());
  return t;
}

}  // namespace synk::compiler
