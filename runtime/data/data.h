// synk::Data: an array in its own shared-memory segment, the input type of data-parallel calls
// (SEMANTICS section 8). Every rank maps the same allocation, so a call scatters rows without
// copying whole inputs: each rank reads only its own rows.
//
// A Data has a dtype and a number of dimensions fixed for life; its shape, contents and
// allocation change. Growing past the allocation re-allocates ceil(size * oversize) items
// (oversize in [1, 2]) and keeps the old contents as a prefix; shrinking re-views the same
// allocation; free_memory() is the only way to give memory back. Data is a handle: copies share
// the same array (like a numpy reference).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/call/descriptor.h"
#include "runtime/data/dtype.h"
#include "base/errors.h"

namespace synk {

using rt::DType;

struct DataOptions {
  std::string name;                 // used in error messages
  bool minibatch = false;           // read by position within the batch (SEMANTICS section 3)
  bool force_cast = false;          // convert any dtype, even unsafely
  double oversize = 1.0;            // allocation factor in [1, 2]
};

namespace rt { struct DataImpl; }

// A typed, writable view of a Data's elements (row-major). Valid until the Data re-allocates.
template <class T>
class View {
 public:
  View(T* data, std::vector<int64_t> shape) : data_(data), shape_(std::move(shape)) {}
  T* data() const { return data_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t size() const { return rt::shape_size(shape_); }
  T* begin() const { return data_; }
  T* end() const { return data_ + size(); }
  T& operator[](int64_t flat) const {
    if (flat < 0 || flat >= size())
      throw UsageError("View: flat index " + std::to_string(flat) + " out of range for " +
                       std::to_string(size()) + " elements");
    return data_[flat];
  }
  template <class... I>
  T& operator()(I... idx) const {
    const int64_t index[] = {int64_t(idx)...};
    return data_[offset(index, sizeof...(I))];
  }

 private:
  int64_t offset(const int64_t* index, size_t n) const {
    if (n != shape_.size())
      throw UsageError("View: " + std::to_string(n) + " indices given for an array of " +
                       std::to_string(shape_.size()) + (shape_.size() == 1 ? " dimension" : " dimensions"));
    int64_t off = 0;
    for (size_t k = 0; k < n; ++k) {
      if (index[k] < 0 || index[k] >= shape_[k])
        throw UsageError("View: index " + std::to_string(index[k]) + " out of range for axis " +
                         std::to_string(k) + " of length " + std::to_string(shape_[k]));
      off = off * shape_[k] + index[k];
    }
    return off;
  }
  T* data_;
  std::vector<int64_t> shape_;
};

class Data {
 public:
  Data() = default;   // an empty handle; most methods throw UsageError on it
  Data(DType dtype, int ndim, DataOptions options = {});

  bool valid() const { return impl_ != nullptr; }
  DType dtype() const;
  int ndim() const;
  const std::vector<int64_t>& shape() const;
  int64_t size() const;                 // number of elements
  int64_t length() const;               // shape[0]; a UsageError for a scalar
  int64_t alloc_size() const;           // items the allocation holds (>= size())
  const std::string& name() const;
  bool minibatch() const;
  void set_minibatch(bool minibatch);
  void set_name(std::string name);

  // Overwrites shape and contents. A dtype that converts safely is accepted; any other needs
  // force_cast. The number of dimensions must match.
  void set_value(const rt::ArrayRef& value, bool force_cast = false, double oversize = 1.0);
  template <class T>
  void set_value(const std::vector<T>& values, std::vector<int64_t> shape, bool force_cast = false,
                 double oversize = 1.0) {
    check_count(values.size(), shape);
    set_value(rt::ArrayRef{values.data(), rt::dtype_v<T>, std::move(shape)}, force_cast, oversize);
  }
  void set_length(int64_t length, double oversize = 1.0);
  void set_shape(std::vector<int64_t> shape, double oversize = 1.0);
  void free_memory();

  // Typed access; T must be exactly the Data's dtype (float for f32, ...).
  template <class T>
  View<T> view() const {
    check_typed(rt::dtype_v<T>);
    return View<T>(static_cast<T*>(raw()), shape());
  }
  template <class T, class... I>
  T& at(I... idx) const {
    return view<T>()(idx...);
  }

  rt::ArrayRef ref() const;             // points into the shared segment
  rt::Array to_array() const;           // a private copy
  void save_npy(const std::string& path) const;

  // Internals for the runtime.
  void* raw() const;
  const std::string& segment_name() const;   // empty while nothing is allocated
  uint64_t generation() const;
  uint64_t uid() const;
  bool same_as(const Data& other) const { return impl_ == other.impl_; }

 private:
  rt::DataImpl& impl() const;
  void check_typed(DType t) const;
  static void check_count(size_t count, const std::vector<int64_t>& shape);
  std::shared_ptr<rt::DataImpl> impl_;
};

// Factories in the spirit of the seeds' synk.data(...).
Data data(const rt::ArrayRef& value, DataOptions options = {});
Data data(const rt::ArrayRef& value, DType dtype, DataOptions options = {});
Data data(DType dtype, std::vector<int64_t> shape, DataOptions options = {});
template <class T>
Data data(const std::vector<T>& values, std::vector<int64_t> shape, DataOptions options = {}) {
  Data d(rt::dtype_v<T>, int(shape.size()), options);
  d.set_value(values, std::move(shape), options.force_cast, options.oversize);
  return d;
}
// Loads an .npy file; the Data takes the file's dtype, or `dtype` under the safe-cast rule.
Data load_npy(const std::string& path, DataOptions options = {});
Data load_npy(const std::string& path, DType dtype, DataOptions options = {});

}  // namespace synk
