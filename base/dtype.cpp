// Names, sizes and the safe-cast rule of the one type vocabulary (see dtype.h).
#include "base/dtype.h"

#include "base/enum_names.h"

namespace synk {

namespace {
constexpr EnumName<DType> kDTypeNames[] = {
    {DType::F32, "f32"}, {DType::F64, "f64"},   {DType::I32, "i32"}, {DType::I64, "i64"},
    {DType::U8, "u8"},   {DType::Bool, "bool"}, {DType::F16, "f16"}, {DType::BF16, "bf16"},
};
constexpr EnumName<Role> kRoleNames[] = {
    {Role::Scatter, "scatter"}, {Role::Broadcast, "bcast"}, {Role::Minibatch, "minibatch"},
};
constexpr EnumName<ReduceMode> kModeNames[] = {
    {ReduceMode::Avg, "avg"}, {ReduceMode::Sum, "sum"},       {ReduceMode::Prod, "prod"}, {ReduceMode::Max, "max"},
    {ReduceMode::Min, "min"}, {ReduceMode::Gather, "gather"}, {ReduceMode::None, "none"},
};
}  // namespace

const char* dtype_name(DType t) { return enum_name(kDTypeNames, t); }

std::optional<DType> dtype_from_name(std::string_view name) { return enum_from_name(kDTypeNames, name); }

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

const char* role_name(Role r) { return enum_name(kRoleNames, r); }

const char* mode_name(ReduceMode m) { return enum_name(kModeNames, m); }

std::optional<ReduceMode> mode_from_name(std::string_view name) { return enum_from_name(kModeNames, name); }

}  // namespace synk
