// synk::SharedVariable: one shared variable of a module by name, as the JIT API
// (jit::Module::shared) and synkc's ahead-of-time modules (<module>::shared) hand it out: its
// master copy or any rank's copy, typed access, and the runtime handle for collectives.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "synk/core.h"

namespace synk {

class SharedVariable {
 public:
  // `name` must be a shared variable of `module` (callers check; the runtime's calls name it).
  SharedVariable(Module module, std::string name) : module_(std::move(module)), name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  const rt::SharedSpec& spec() const { return module_.spec().shareds.at(size_t(module_.index_of(name_))); }
  // The runtime's handle, for collectives: synk::all_reduce(mod.shared("g").var(), "avg").
  Var var() const { return module_.var(name_); }

  Array get_value() const { return module_.get_value(name_); }
  Array get_value(int rank) const { return module_.get_value(rank, name_); }
  // The master's (or one rank's) elements as T, which must be the variable's dtype.
  template <class T>
  std::vector<T> values(int rank = 0) const { return to_vector<T>(get_value(rank)); }

  // The master's copy only, after synk::fork(); set_value_all changes every rank's (one broadcast).
  void set_value(const ArrayRef& value, bool force_cast = false) { module_.set_value(name_, value, force_cast); }
  void set_value_all(const ArrayRef& value, bool force_cast = false) { module_.set_value_all(name_, value, force_cast); }
  template <class T>
  void set_value_all(const std::vector<T>& values, std::vector<int64_t> shape, bool force_cast = false) {
    set_value_all(ArrayRef{values.data(), rt::dtype_v<T>, std::move(shape)}, force_cast);
  }
  void set_value(int rank, const ArrayRef& value, bool force_cast = false) {
    module_.set_value(rank, name_, value, force_cast);
  }
  // The same from an Array (what get_value returns): v.set_value_all(w.get_value()).
  void set_value(const Array& value, bool force_cast = false) { set_value(value.ref(), force_cast); }
  void set_value_all(const Array& value, bool force_cast = false) { set_value_all(value.ref(), force_cast); }
  void set_value(int rank, const Array& value, bool force_cast = false) { set_value(rank, value.ref(), force_cast); }
  template <class T>
  void set_value(const std::vector<T>& values, std::vector<int64_t> shape, bool force_cast = false) {
    module_.set_value(name_, values, std::move(shape), force_cast);
  }
  template <class T>
  void set_value(int rank, const std::vector<T>& values, std::vector<int64_t> shape, bool force_cast = false) {
    module_.set_value(rank, name_, values, std::move(shape), force_cast);
  }

 private:
  Module module_;
  std::string name_;
};

}  // namespace synk
