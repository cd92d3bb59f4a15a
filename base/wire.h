// A minimal binary encoding for what crosses process boundaries through shared memory (call
// descriptors, module specifications, store entries): fixed-width little-endian scalars and
// length-prefixed strings/vectors. Both ends are the same binary, so no versioning is needed;
// the reader still checks every length so a corrupt buffer is an error, never a crash.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/errors.h"

namespace synk::rt::wire {

class Writer {
 public:
  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(std::string_view s) {
    pod<uint64_t>(s.size());
    buf_.append(s);
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    pod<uint64_t>(v.size());
    buf_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  const std::string& bytes() const { return buf_; }
  std::string take() { return std::move(buf_); }
  void clear() { buf_.clear(); }

 private:
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(std::string_view bytes) : buf_(bytes) {}
  template <class T>
  T pod() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, buf_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string str() {
    uint64_t n = pod<uint64_t>();
    need(n);
    std::string s(buf_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  template <class T>
  std::vector<T> vec() {
    uint64_t n = pod<uint64_t>();
    if (n > buf_.size()) throw InternalError("wire: corrupt vector length");
    need(n * sizeof(T));
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), buf_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  // Like str(), into `out` (keeping its capacity).
  void str_into(std::string& out) {
    uint64_t n = pod<uint64_t>();
    need(n);
    out.assign(buf_.data() + pos_, n);
    pos_ += n;
  }
  // Like vec(), into `out` (keeping its capacity: decoders that run per command reuse buffers).
  template <class T>
  void vec_into(std::vector<T>& out) {
    static_assert(std::is_trivially_copyable_v<T>);
    uint64_t n = pod<uint64_t>();
    if (n > buf_.size()) throw InternalError("wire: corrupt vector length");
    need(n * sizeof(T));
    out.resize(n);
    if (n) std::memcpy(out.data(), buf_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
  }
  bool done() const { return pos_ == buf_.size(); }

 private:
  void need(uint64_t n) const {
    if (n > buf_.size() - pos_) throw InternalError("wire: truncated buffer");
  }
  std::string_view buf_;
  size_t pos_ = 0;
};

}  // namespace synk::rt::wire
