// Shared-variable initialisation, value checks and ModuleSpec encoding (see shared_vars.h).
#include "runtime/data/shared_vars.h"

#include <cmath>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "runtime/data/dtype.h"
#include "base/errors.h"
#include "runtime/data/npy.h"
#include "base/wire.h"

namespace synk::rt {

void fill_init(Array& out, const InitSpec& init) {
  int64_t n = out.size();
  visit_dtype(out.dtype, [&]<class T>() {
    T* p = out.data<T>();
    auto put = [&](int64_t i, double v) {
      if constexpr (std::is_same_v<T, bool>) p[i] = v != 0.0;
      else p[i] = static_cast<T>(v);
    };
    switch (init.kind) {
      case InitSpec::Kind::Zeros: for (int64_t i = 0; i < n; ++i) put(i, 0.0); break;
      case InitSpec::Kind::Ones: for (int64_t i = 0; i < n; ++i) put(i, 1.0); break;
      case InitSpec::Kind::Constant: for (int64_t i = 0; i < n; ++i) put(i, init.a); break;
      case InitSpec::Kind::Uniform: {
        SplitMix64 rng(init.seed);
        for (int64_t i = 0; i < n; ++i) put(i, init.a + (init.b - init.a) * rng.uniform());
        break;
      }
      case InitSpec::Kind::Normal: {
        SplitMix64 rng(init.seed);
        for (int64_t i = 0; i < n; ++i) {
          double u1 = rng.uniform(), u2 = rng.uniform();
          double z = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
          put(i, init.a + init.b * z);
        }
        break;
      }
      case InitSpec::Kind::Load: case InitSpec::Kind::FromMaster:
        throw InternalError("fill_init called for a load() initialiser");
    }
  });
}

void validate_module(const ModuleSpec& spec) {
  std::set<std::string> names;
  for (const SharedSpec& s : spec.shareds) {
    if (s.name.empty()) throw UsageError("module: a shared variable has an empty name");
    if (!names.insert(s.name).second)
      throw UsageError(fmt::format("module: shared variable '{}' is declared twice", s.name));
    if (s.dims.size() > 16)
      throw UsageError(fmt::format("module: shared variable '{}' has {} dimensions (at most 16)",
                                   s.name, s.dims.size()));
    for (const DimSpec& d : s.dims) {
      if (d.symbol >= 0 && size_t(d.symbol) >= spec.symbols.size())
        throw UsageError(fmt::format("module: shared variable '{}' uses symbol #{} but the module "
                                     "declares {} symbols", s.name, d.symbol, spec.symbols.size()));
      if (d.symbol < 0 && d.size < 0)
        throw UsageError(fmt::format("module: shared variable '{}' has a negative dimension {}",
                                     s.name, d.size));
    }
    if (s.sliceable && s.dims.empty())
      throw UsageError(fmt::format("module: sliceable shared variable '{}' needs at least one "
                                   "dimension (its rows)", s.name));
    if (s.init.kind == InitSpec::Kind::Load && s.init.path.empty())
      throw UsageError(fmt::format("module: shared variable '{}' loads from an empty path", s.name));
  }
}

std::vector<Array> initial_values(const ModuleSpec& spec) {
  validate_module(spec);
  std::vector<int64_t> bound(spec.symbols.size(), -1);
  std::vector<Array> values(spec.shareds.size());
  // Loads first: they bind symbols.
  for (size_t v = 0; v < spec.shareds.size(); ++v) {
    const SharedSpec& s = spec.shareds[v];
    if (s.init.kind != InitSpec::Kind::Load && s.init.kind != InitSpec::Kind::FromMaster) continue;
    std::string where = fmt::format("shared variable '{}' = load(\"{}\")", s.name, s.init.path);
    Array file;
    if (s.init.kind == InitSpec::Kind::Load) file = npy::read(s.init.path);
    else file.resize(s.dtype, s.init.shape);
    if (file.shape.size() != s.dims.size())
      throw UsageError(fmt::format("{}: declared {} with {} dimensions, the file holds shape {}",
                                   where, spec_string(s, spec.symbols), s.dims.size(),
                                   shape_string(file.shape)));
    for (size_t k = 0; k < s.dims.size(); ++k) {
      const DimSpec& d = s.dims[k];
      int64_t got = file.shape[k];
      if (d.symbol < 0 && d.size != got)
        throw UsageError(fmt::format("{}: declared {}, the file holds shape {}", where,
                                     spec_string(s, spec.symbols), shape_string(file.shape)));
      if (d.symbol >= 0) {
        if (bound[d.symbol] >= 0 && bound[d.symbol] != got)
          throw UsageError(fmt::format("{}: symbol '{}' is {} here but {} elsewhere", where,
                                       spec.symbols[d.symbol], got, bound[d.symbol]));
        bound[d.symbol] = got;
      }
    }
    values[v] = conform_shared_value(s, spec.symbols, file.ref(), false, where);
  }
  for (size_t v = 0; v < spec.shareds.size(); ++v) {
    const SharedSpec& s = spec.shareds[v];
    if (s.init.kind == InitSpec::Kind::Load || s.init.kind == InitSpec::Kind::FromMaster) continue;
    std::vector<int64_t> shape;
    for (const DimSpec& d : s.dims)
      shape.push_back(d.symbol >= 0 ? std::max<int64_t>(bound[d.symbol], 0) : d.size);
    try {
      values[v].resize(s.dtype, shape);
    } catch (const UserError& e) {   // too large to allocate: say which variable
      throw UserError(fmt::format("shared variable '{}' ({}): {}", s.name, spec_string(s, spec.symbols), e.what()));
    }
    fill_init(values[v], s.init);
  }
  return values;
}

Array conform_shared_value(const SharedSpec& spec, const std::vector<std::string>& symbols,
                           const ArrayRef& value, bool force_cast, const std::string& where) {
  if (value.shape.size() != spec.dims.size())
    throw UsageError(fmt::format("{}: expected a value with {} ({}), received shape {}",
                                 where, dimensions_text(spec.dims.size()), spec_string(spec, symbols),
                                 shape_string(value.shape)));
  for (size_t k = 0; k < spec.dims.size(); ++k) {
    if (value.shape[k] < 0)
      throw UsageError(fmt::format("{}: negative dimension in shape {}", where, shape_string(value.shape)));
    if (spec.dims[k].symbol < 0 && spec.dims[k].size != value.shape[k])
      throw UsageError(fmt::format("{}: expected shape {}, received {} (axis {} must be {})", where,
                                   spec_string(spec, symbols), shape_string(value.shape), k,
                                   spec.dims[k].size));
  }
  if (!force_cast && !can_cast_safely(value.dtype, spec.dtype))
    throw UsageError(fmt::format("{}: expected dtype {} (or one that converts safely to it), "
                                 "received {}; pass force_cast=true to convert anyway",
                                 where, dtype_name(spec.dtype), dtype_name(value.dtype)));
  Array out;
  out.resize(spec.dtype, value.shape);
  int64_t n = out.size();
  if (n == 0) return out;
  if (value.dtype == spec.dtype) std::memcpy(out.bytes.data(), value.data, out.bytes.size());
  else convert_elements(value.data, value.dtype, out.bytes.data(), spec.dtype, n);
  return out;
}

std::string encode_module(const ModuleSpec& spec) {
  wire::Writer w;
  w.pod<uint64_t>(spec.symbols.size());
  for (const std::string& s : spec.symbols) w.str(s);
  w.pod<uint64_t>(spec.shareds.size());
  for (const SharedSpec& s : spec.shareds) {
    w.str(s.name);
    w.pod(s.dtype);
    w.vec(s.dims);
    w.pod(s.init.kind);
    w.pod(s.init.a);
    w.pod(s.init.b);
    w.pod(s.init.seed);
    w.str(s.init.path);
    w.vec(s.init.shape);
    w.pod<uint8_t>(s.sliceable);
  }
  return w.take();
}

ModuleSpec decode_module(std::string_view bytes) {
  wire::Reader r(bytes);
  ModuleSpec spec;
  uint64_t nsym = r.pod<uint64_t>();
  for (uint64_t i = 0; i < nsym; ++i) spec.symbols.push_back(r.str());
  uint64_t nsh = r.pod<uint64_t>();
  for (uint64_t i = 0; i < nsh; ++i) {
    SharedSpec s;
    s.name = r.str();
    s.dtype = r.pod<DType>();
    s.dims = r.vec<DimSpec>();
    s.init.kind = r.pod<InitSpec::Kind>();
    s.init.a = r.pod<double>();
    s.init.b = r.pod<double>();
    s.init.seed = r.pod<uint64_t>();
    s.init.path = r.str();
    s.init.shape = r.vec<int64_t>();
    s.sliceable = r.pod<uint8_t>() != 0;
    spec.shareds.push_back(std::move(s));
  }
  if (!r.done()) throw InternalError("decode_module: trailing bytes");
  return spec;
}

}  // namespace synk::rt
