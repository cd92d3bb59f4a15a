// Names, sizes and the safe-cast rule of the one type vocabulary (see dtype.h).
#include "base/dtype.h"

namespace synk {

namespace {
constexpr DType kAll[] = {DType::F32, DType::F64, DType::I32, DType::I64,
                          DType::U8,  DType::Bool, DType::F16, DType::BF16};
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::Bool: return "bool";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType t : kAll)
    if (name == dtype_name(t)) return t;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
    case DType::U8: case DType::Bool: return 1;
    case DType::F16: case DType::BF16: return 2;
  }
  return 0;
}

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}
bool is_integer(DType t) { return t == DType::I32 || t == DType::I64 || t == DType::U8; }
bool is_reserved(DType t) { return t == DType::F16 || t == DType::BF16; }

bool can_cast_safely(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  switch (from) {
    case DType::U8: return to == DType::I32 || to == DType::I64 || to == DType::F32 || to == DType::F64;
    case DType::I32: return to == DType::I64 || to == DType::F64;
    case DType::I64: return to == DType::F64;
    case DType::F32: return to == DType::F64;
    default: return false;
  }
}

const char* role_name(Role r) {
  switch (r) {
    case Role::Scatter: return "scatter";
    case Role::Broadcast: return "bcast";
    case Role::Minibatch: return "minibatch";
  }
  return "?";
}

const char* mode_name(ReduceMode m) {
  switch (m) {
    case ReduceMode::Avg: return "avg";
    case ReduceMode::Sum: return "sum";
    case ReduceMode::Prod: return "prod";
    case ReduceMode::Max: return "max";
    case ReduceMode::Min: return "min";
    case ReduceMode::Gather: return "gather";
    case ReduceMode::None: return "none";
  }
  return "?";
}

std::optional<ReduceMode> mode_from_name(std::string_view name) {
  for (ReduceMode m : {ReduceMode::Avg, ReduceMode::Sum, ReduceMode::Prod, ReduceMode::Max,
                       ReduceMode::Min, ReduceMode::Gather, ReduceMode::None})
    if (name == mode_name(m)) return m;
  return std::nullopt;
}

}  // namespace synk
