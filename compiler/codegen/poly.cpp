// Polynomials over symbolic dimensions (see cpu_poly.h).
#include "compiler/codegen/poly.h"

#include <algorithm>

#include <fmt/format.h>

namespace synk::compiler {

Poly Poly::constant(int64_t c) {
  Poly p;
  if (c != 0) p.terms_.push_back(Term{c, {}});
  return p;
}

Poly Poly::symbol(const std::string& name) {
  Poly p;
  p.terms_.push_back(Term{1, {name}});
  return p;
}

Poly Poly::dim(const ir::Dim& d) { return d.is_symbolic() ? symbol(d.symbol) : constant(d.size); }

Poly Poly::product(const ir::Shape& shape, size_t begin, size_t end) {
  Poly p = constant(1);
  for (size_t i = begin; i < end && i < shape.size(); ++i) p = p * dim(shape[i]);
  return p;
}

void Poly::normalize() {
  for (Term& t : terms_) std::sort(t.symbols.begin(), t.symbols.end());
  std::sort(terms_.begin(), terms_.end(), [](const Term& a, const Term& b) { return a.symbols < b.symbols; });
  std::vector<Term> merged;
  for (Term& t : terms_) {
    if (!merged.empty() && merged.back().symbols == t.symbols) merged.back().coef += t.coef;
    else merged.push_back(std::move(t));
  }
  merged.erase(std::remove_if(merged.begin(), merged.end(), [](const Term& t) { return t.coef == 0; }), merged.end());
  terms_ = std::move(merged);
}

Poly Poly::operator+(const Poly& o) const {
  Poly p = *this;
  p.terms_.insert(p.terms_.end(), o.terms_.begin(), o.terms_.end());
  p.normalize();
  return p;
}

Poly Poly::operator*(const Poly& o) const {
  Poly p;
  for (const Term& a : terms_)
    for (const Term& b : o.terms_) {
      Term t{a.coef * b.coef, a.symbols};
      t.symbols.insert(t.symbols.end(), b.symbols.begin(), b.symbols.end());
      p.terms_.push_back(std::move(t));
    }
  p.normalize();
  return p;
}

bool Poly::operator==(const Poly& o) const {
  if (terms_.size() != o.terms_.size()) return false;
  for (size_t i = 0; i < terms_.size(); ++i)
    if (terms_[i].coef != o.terms_[i].coef || terms_[i].symbols != o.terms_[i].symbols) return false;
  return true;
}

bool Poly::is_constant(int64_t c) const {
  if (c == 0) return terms_.empty();
  return terms_.size() == 1 && terms_[0].symbols.empty() && terms_[0].coef == c;
}

std::string Poly::c_expr() const {
  if (terms_.empty()) return "(int64_t)0";
  std::string s;
  for (const Term& t : terms_) {
    std::string term = t.symbols.empty() || t.coef != 1 ? fmt::format("(int64_t){}", t.coef) : "";
    for (const std::string& sym : t.symbols) term += (term.empty() ? "" : " * ") + std::string("s_") + sym;
    s += (s.empty() ? "" : " + ") + term;
  }
  return terms_.size() > 1 ? "(" + s + ")" : s;
}

std::vector<Poly> row_major_strides(const ir::Shape& shape) {
  std::vector<Poly> strides(shape.size());
  Poly acc = Poly::constant(1);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = acc;
    acc = acc * Poly::dim(shape[i]);
  }
  return strides;
}

}  // namespace synk::compiler
