// Type and shape inference for one Graph IR operation, shared by semantic analysis (sema.cpp),
// the C++ expression builder and the verifier, so that every producer of IR agrees on what each
// op accepts and yields. Everything here is pure: operand types in, result type or a user-facing
// message out (no locations; callers add them). Symbolic dimensions are rigid: `n` equals only
// `n`, never `10` or `m`.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace synk::dsl {

// A user-facing error message (no location) or the inferred type.
struct InferResult {
  std::optional<ir::TensorType> type;
  std::string error;
  bool ok() const { return type.has_value(); }
};

// The larger of the two in bool < u8 < i32 < i64 < f32 < f64 (reserved dtypes rank above f32
// and below f64 only so that the function is total; sema rejects them earlier).
ir::DType promote(ir::DType a, ir::DType b);

// numpy broadcasting: shapes align on the right; dimensions are compatible when equal or when
// one is the static size 1. On failure returns nullopt and, when `error` is given, writes
// "cannot broadcast shapes [n, 10] and [3]".
std::optional<ir::Shape> broadcast_shapes(const ir::Shape& a, const ir::Shape& b,
                                          std::string* error);

// Result type of `op` applied to operands of these types with these attributes. `requested` is
// the dtype/shape the op is asked to produce where the op needs one (Cast: dtype; Reshape:
// shape with at most one -1 size meaning "infer"; OneHot: dtype; BroadcastTo, Random: shape); else null.
// Operand dtypes must already be promoted by the caller for binary pointwise ops.
// Leaves (Input, SharedRead, Constant) take their type from `requested` (Constant: rank 0).
// Reductions and ArgMax expect attrs.axes already normalized (sorted, unique, non-negative; see
// normalize_axes); an empty axes list reduces nothing. Transpose expects a full attrs.perm.
// Grad: operands are the loss, then the variables' values (types of their SharedReads).
InferResult infer_type(ir::Op op, std::span<const ir::TensorType> operands, const ir::Attrs& attrs,
                       const ir::TensorType* requested);

// ---- Helpers shared by sema, the builder and the verifier -------------------------------

// nullopt when a value of type `t` can exist: its static dimensions times its element size fit
// in int64 bytes (symbolic dimensions are bound at run time and checked there). Otherwise the
// message, e.g. "f32[4611686018427387904] is too large: it would take 18446744073709551616
// bytes (more than the 9223372036854775807 bytes an array can have)". infer_type() applies it
// to every result; sema to every declared type.
std::optional<std::string> size_error(const ir::TensorType& t);

// Maps a possibly negative axis into [0, rank). nullopt (and a message such as
// "axis 2 is out of range for rank 2") when it is out of range.
std::optional<int64_t> normalize_axis(int64_t axis, size_t rank, std::string* error);

// Normalizes every axis, then sorts; a repeated axis (after normalization) is an error
// ("axis 1 appears twice").
std::optional<std::vector<int64_t>> normalize_axes(std::span<const int64_t> axes, size_t rank,
                                                   std::string* error);

// All axes 0..rank-1 (what a reduction without `axis=` reduces).
std::vector<int64_t> all_axes(size_t rank);

// Number of elements as a static product times a sorted multiset of symbols: [n, 10, m] is
// {10, {m, n}}. Two shapes hold the same number of elements for every binding of the symbols
// exactly when these are equal (or when both static products are 0).
struct ElementCount {
  int64_t fixed = 1;
  std::vector<std::string> symbols;  // sorted
  bool overflow = false;             // the static product does not fit in int64
  friend bool operator==(const ElementCount&, const ElementCount&) = default;
};
ElementCount element_count(const ir::Shape& shape);
std::string element_count_str(const ElementCount& c);   // "10*n", "1", "m*n"

// Resolves a reshape target that may contain one -1 ("infer"). The result holds only sizes
// and symbols; an error explains a count mismatch or an inferred size that is not a single
// dimension (e.g. 10*n).
std::optional<ir::Shape> resolve_reshape(const ir::Shape& from, const ir::Shape& to,
                                         std::string* error);

// True when `t` is a numeric (non-bool) dtype.
bool is_numeric(ir::DType t);

}  // namespace synk::dsl
