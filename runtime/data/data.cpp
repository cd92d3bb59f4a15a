// synk::Data (see data.h): the shared-memory allocation, the safe-cast rule, re-allocation with
// oversize, and .npy load/save.
#include "runtime/data/data.h"

#include <atomic>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "base/checked_math.h"
#include "runtime/data/npy.h"
#include "runtime/group/shm.h"

namespace synk {

namespace rt {
struct DataImpl {
  uint64_t uid = 0;
  DType dtype = DType::F32;
  int ndim = 0;
  std::vector<int64_t> shape;
  bool minibatch = false;
  std::string name;
  shm::Segment segment;
  int64_t alloc_items = 0;
  uint64_t generation = 0;

  ~DataImpl() { release(); }

  std::string label() const { return name.empty() ? std::string("Data") : "Data '" + name + "'"; }

  void release() {
    if (segment.valid()) {
      std::string n = segment.name();
      segment.reset();
      shm::announce_retired(n);
    }
    alloc_items = 0;
    ++generation;
  }

  // Makes room for the `items` elements of `shape` (checked by elements_of); keeps the first
  // `keep_bytes` bytes of the old contents. `where` starts the messages.
  void reserve(int64_t items, const std::vector<int64_t>& shape, double oversize, size_t keep_bytes,
               const std::string& where) {
    if (items <= alloc_items) return;
    const size_t elem = dtype_size(dtype);
    const double grown = std::ceil(double(items) * oversize);
    int64_t want = grown < 9.0e18 ? std::max(items, int64_t(grown)) : items;
    std::optional<int64_t> bytes = checked_bytes(want, elem);
    if (!bytes) bytes = checked_bytes(want = items, elem);   // no room to oversize: the exact size
    if (!bytes)
      throw UsageError(fmt::format("{}: shape {} of {} needs {}", where, rt::shape_string(shape), dtype_name(dtype),
                                   describe_oversize(shape, elem)));
    shm::Segment fresh = shm::Segment::create(
        shm::unique_name(shm::process_prefix(), "d"), size_t(*bytes),
        fmt::format("{}: shape {} of {}{}", where, rt::shape_string(shape), dtype_name(dtype),
                    want > items ? fmt::format(" (with oversize {})", oversize) : std::string()));
    if (keep_bytes && segment.valid())
      std::memcpy(fresh.data(), segment.data(), std::min(keep_bytes, segment.size()));
    release();
    segment = std::move(fresh);
    alloc_items = want;
  }
};
}  // namespace rt

namespace {

std::atomic<uint64_t> g_next_uid{1};

void check_oversize(double oversize, const std::string& where) {
  if (!(oversize >= 1.0 && oversize <= 2.0))
    throw UsageError(fmt::format("{}: oversize must be in [1, 2], received {}", where, oversize));
}

void check_shape(const std::vector<int64_t>& shape, const std::string& where) {
  for (int64_t d : shape)
    if (d < 0)
      throw UsageError(fmt::format("{}: shape {} has a negative dimension", where,
                                   rt::shape_string(shape)));
}

// The element count of a shape check_shape accepted; a UsageError when it does not fit.
int64_t elements_of(const std::vector<int64_t>& shape, DType dtype, const std::string& where) {
  std::optional<int64_t> n = checked_elements(shape);
  if (!n)
    throw UsageError(fmt::format("{}: shape {} of {} needs {}", where, rt::shape_string(shape), rt::dtype_name(dtype),
                                 describe_oversize(shape, rt::dtype_size(dtype))));
  return *n;
}

}  // namespace

Data::Data(DType dtype, int ndim, DataOptions options) {
  if (ndim < 0 || ndim > 16)
    throw UsageError(fmt::format("synk::data: ndim must be in [0, 16], received {}", ndim));
  check_oversize(options.oversize, "synk::data");
  impl_ = std::make_shared<rt::DataImpl>();
  impl_->uid = g_next_uid.fetch_add(1);
  impl_->dtype = dtype;
  impl_->ndim = ndim;
  impl_->shape.assign(size_t(ndim), 0);
  impl_->minibatch = options.minibatch;
  impl_->name = std::move(options.name);
}

rt::DataImpl& Data::impl() const {
  if (!impl_) throw UsageError("use of an empty synk::Data handle (create it with synk::data(...))");
  return *impl_;
}

DType Data::dtype() const { return impl().dtype; }
int Data::ndim() const { return impl().ndim; }
const std::vector<int64_t>& Data::shape() const { return impl().shape; }
int64_t Data::size() const { return rt::shape_size(impl().shape); }
int64_t Data::alloc_size() const { return impl().alloc_items; }
const std::string& Data::name() const { return impl().name; }
bool Data::minibatch() const { return impl().minibatch; }
void Data::set_minibatch(bool minibatch) { impl().minibatch = minibatch; }
void Data::set_name(std::string name) { impl().name = std::move(name); }
void* Data::raw() const { return impl().segment.data(); }
const std::string& Data::segment_name() const { return impl().segment.name(); }
uint64_t Data::generation() const { return impl().generation; }
uint64_t Data::uid() const { return impl().uid; }

int64_t Data::length() const {
  if (impl().ndim == 0)
    throw UsageError(fmt::format("{}: length() of a 0-dimensional array", impl().label()));
  return impl().shape[0];
}

void Data::check_typed(DType t) const {
  if (t != impl().dtype)
    throw UsageError(fmt::format("{}: typed access as {} but the dtype is {}", impl().label(),
                                 rt::dtype_name(t), rt::dtype_name(impl().dtype)));
}

void Data::check_count(size_t count, const std::vector<int64_t>& shape) {
  check_shape(shape, "Data::set_value");
  std::optional<int64_t> n = checked_elements(shape);
  if (!n || int64_t(count) != *n)
    throw UsageError(fmt::format("Data::set_value: {} values given for shape {} ({} elements)", count,
                                 rt::shape_string(shape),
                                 n ? std::to_string(*n) : describe_oversize(shape, 1, "elements")));
}

void Data::set_value(const rt::ArrayRef& value, bool force_cast, double oversize) {
  rt::DataImpl& d = impl();
  std::string where = d.label() + ": set_value";
  check_oversize(oversize, where);
  check_shape(value.shape, where);
  if (int(value.shape.size()) != d.ndim)
    throw UsageError(fmt::format(
        "{}: expected a value with {}, received {} (shape {}); the number of "
        "dimensions of a Data is fixed",
        where, rt::dimensions_text(size_t(d.ndim)), value.shape.size(), rt::shape_string(value.shape)));
  if (!force_cast && !rt::can_cast_safely(value.dtype, d.dtype))
    throw UsageError(fmt::format(
        "{}: expected dtype {} (or one that converts safely to it), received {}; pass "
        "force_cast=true to convert anyway",
        where, rt::dtype_name(d.dtype), rt::dtype_name(value.dtype)));
  int64_t n = elements_of(value.shape, d.dtype, where);
  d.reserve(n, value.shape, oversize, 0, where);
  if (n > 0) {
    if (value.dtype == d.dtype) std::memcpy(d.segment.data(), value.data, size_t(n) * dtype_size(d.dtype));
    else rt::convert_elements(value.data, value.dtype, d.segment.data(), d.dtype, n);
  }
  d.shape = value.shape;
}

void Data::set_shape(std::vector<int64_t> shape, double oversize) {
  rt::DataImpl& d = impl();
  std::string where = d.label() + ": set_shape";
  check_oversize(oversize, where);
  check_shape(shape, where);
  if (int(shape.size()) != d.ndim)
    throw UsageError(fmt::format("{}: expected {}, received {} (shape {})", where,
                                 rt::dimensions_text(size_t(d.ndim)), shape.size(), rt::shape_string(shape)));
  d.reserve(elements_of(shape, d.dtype, where), shape, oversize, size_t(rt::shape_size(d.shape)) * dtype_size(d.dtype),
            where);
  d.shape = std::move(shape);
}

void Data::set_length(int64_t length, double oversize) {
  rt::DataImpl& d = impl();
  if (d.ndim == 0)
    throw UsageError(fmt::format("{}: set_length on a 0-dimensional array", d.label()));
  if (length < 0)
    throw UsageError(fmt::format("{}: set_length: length must be >= 0, received {}", d.label(), length));
  std::vector<int64_t> shape = d.shape;
  shape[0] = length;
  set_shape(std::move(shape), oversize);
}

void Data::free_memory() {
  rt::DataImpl& d = impl();
  d.release();
  d.shape.assign(size_t(d.ndim), 0);
}

rt::ArrayRef Data::ref() const { return rt::ArrayRef{raw(), dtype(), shape()}; }

rt::Array Data::to_array() const {
  rt::Array a;
  a.resize(dtype(), shape());
  if (!a.bytes.empty()) std::memcpy(a.bytes.data(), raw(), a.bytes.size());
  return a;
}

void Data::save_npy(const std::string& path) const { rt::npy::write(path, ref()); }

Data data(const rt::ArrayRef& value, DataOptions options) {
  return data(value, value.dtype, std::move(options));
}

Data data(const rt::ArrayRef& value, DType dtype, DataOptions options) {
  Data d(dtype, int(value.shape.size()), options);
  d.set_value(value, options.force_cast, options.oversize);
  return d;
}

Data data(DType dtype, std::vector<int64_t> shape, DataOptions options) {
  Data d(dtype, int(shape.size()), options);
  d.set_shape(std::move(shape), options.oversize);
  return d;
}

namespace {

// The file read once: its header, then its elements from the same open file.
Data load_npy_as(rt::npy::Reader& file, const std::string& path, DType dtype, DataOptions options) {
  const rt::npy::Header& h = file.header();
  if (options.name.empty()) options.name = path;
  Data d(dtype, int(h.shape.size()), options);
  if (h.dtype == dtype) {
    d.set_shape(h.shape, options.oversize);
    if (d.size() > 0) file.read_data(d.raw());
  } else {
    rt::Array a = file.read();
    d.set_value(a.ref(), options.force_cast, options.oversize);
  }
  return d;
}

}  // namespace

Data load_npy(const std::string& path, DataOptions options) {
  rt::npy::Reader file(path);
  return load_npy_as(file, path, file.header().dtype, std::move(options));
}

Data load_npy(const std::string& path, DType dtype, DataOptions options) {
  rt::npy::Reader file(path);
  return load_npy_as(file, path, dtype, std::move(options));
}

}  // namespace synk
