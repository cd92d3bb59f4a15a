// The one vocabulary of element types, argument roles and reduction modes that every part of
// synk speaks: the language and the Graph IR (ir::DType is this type), the compiler, the
// descriptor the runtime executes (rt::DType is this type too), and synkc. Also the one
// safe-cast rule (SEMANTICS section 8, numpy's "safe" casting) and the spellings used in messages.
// f16 and bf16 are parsed and typed by the language but reserved: the runtime rejects them
// (is_runtime_dtype), with the error at the boundary where they would cross.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace synk {

enum class DType : uint8_t { F32, F64, I32, I64, U8, Bool, F16, BF16 };

const char* dtype_name(DType t);                           // "f32", "bool", "bf16", ...
// The language's spellings only ("f32", ..., "bf16").
std::optional<DType> dtype_from_name(std::string_view name);
size_t dtype_size(DType t);                                // bytes per element
bool is_float(DType t);                                    // F32 F64 F16 BF16
bool is_integer(DType t);                                  // I32 I64 U8 (not Bool)
bool is_reserved(DType t);                                 // F16 BF16: typed, not executable
inline bool is_runtime_dtype(DType t) { return !is_reserved(t); }

// Whether every value of `from` is exactly representable in `to`: bool to anything; u8 to i32,
// i64, f32, f64; i32 to i64, f64; i64 to f64; f32 to f64; every type to itself.
bool can_cast_safely(DType from, DType to);

// How a function input reaches the ranks (SEMANTICS sections 3-4).
enum class Role : uint8_t { Scatter, Broadcast, Minibatch };
const char* role_name(Role r);                             // "scatter", "bcast", "minibatch"

// How an output (or an update, across slices) is combined (SEMANTICS section 5).
enum class ReduceMode : uint8_t { Avg, Sum, Prod, Max, Min, Gather, None };
const char* mode_name(ReduceMode m);                       // "avg", ..., "none"
std::optional<ReduceMode> mode_from_name(std::string_view name);

}  // namespace synk
