// The value of every pointwise op on scalars, in one place: constant folding uses it directly,
// and the C++ code generator emits code with the same meaning (tests check the two agree).
// Floats are carried as double and rounded to float after each f32 op; integers as int64 and
// wrapped to their dtype (two's complement); bool as 0/1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"

namespace synk::compiler {

struct Scalar {
  ir::DType dtype = ir::DType::F32;
  double f = 0;      // float dtypes
  int64_t i = 0;     // integer dtypes and bool
  double as_double() const { return ir::is_float(dtype) ? f : double(i); }
};

// Rounds / wraps a value into `dtype`'s range.
Scalar make_scalar(ir::DType dtype, double f, int64_t i);

// Integer power with wrap-around; a negative exponent gives 1 for base 1, +-1 for base -1,
// and 0 otherwise (as C integer division 1/a^|b| would).
int64_t integer_pow(int64_t base, int64_t exponent, ir::DType dtype);

// The value of `op` (pointwise) with result dtype `result`; nullopt where the result is not
// defined by this table (a float-to-integer cast of NaN or out of range), so the op is left
// for run time.
std::optional<Scalar> eval_pointwise(ir::Op op, ir::DType result, const std::vector<Scalar>& args);

// The same meaning as C text, shared by the CPU and CUDA preludes (codegen_cpu_prelude.cpp,
// codegen_cuda_prelude.cpp), which define SYNK_INLINE first: add, sub, mul, neg, abs, max, min
// and pow for every dtype. Only the float power differs between the two targets: `float_pow` and
// `double_pow` name the functions synk_pow_f32 / synk_pow_f64 call ("__builtin_powf" on the CPU,
// "powf" in CUDA).
std::string scalar_prelude(std::string_view float_pow, std::string_view double_pow);

// The part of both preludes that comes after each target's synk_exp_f32 / synk_exp_f64: the
// overflow-free sigmoid and the checked float-to-integer casts. `float_abs` and `double_abs`
// name the absolute-value functions ("__builtin_fabsf" on the CPU, "fabsf" in CUDA).
std::string sigmoid_and_cast_prelude(std::string_view float_abs, std::string_view double_abs);

// After sigmoid_and_cast_prelude in both preludes: softplus, binary_cross_entropy_with_logits,
// sign, and numpy's floor division and remainder (base/numpy_math.h's formulas in C).
std::string math_prelude();

}  // namespace synk::compiler
