// Sizes, strides and offsets over symbolic dimensions, as polynomials with integer
// coefficients (10*n, n*m + 3). The CPU code generator uses them to decide at compile time
// which loop dimensions can be merged (stride[k] == stride[k+1] * size[k+1] for every array)
// and which inner strides are 0 or 1, and prints them as C expressions over `s_<symbol>`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace synk::compiler {

class Poly {
 public:
  Poly() = default;                                   // zero
  static Poly constant(int64_t c);
  static Poly symbol(const std::string& name);
  static Poly dim(const ir::Dim& d);
  static Poly product(const ir::Shape& shape, size_t begin, size_t end);   // dims [begin, end)

  Poly operator+(const Poly& o) const;
  Poly operator*(const Poly& o) const;
  Poly operator*(int64_t c) const { return *this * constant(c); }
  bool operator==(const Poly& o) const;
  bool operator!=(const Poly& o) const { return !(*this == o); }
  bool is_zero() const { return terms_.empty(); }
  bool is_constant(int64_t c) const;
  // C expression of type int64_t; symbols print as s_<name>.
  std::string c_expr() const;

 private:
  struct Term {
    int64_t coef = 0;
    std::vector<std::string> symbols;   // sorted, with repetition
  };
  void normalize();
  std::vector<Term> terms_;
};

// Row-major strides of a contiguous array of this shape.
std::vector<Poly> row_major_strides(const ir::Shape& shape);

}  // namespace synk::compiler
