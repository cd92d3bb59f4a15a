// Shared variables (state that every rank holds its own copy of, in private memory): their
// reproducible initialisation from InitSpec (docs/language.md: a splitmix64 stream, 53-bit
// uniforms, Box-Muller with one value per pair, row-major), the checks a new value must pass, and
// the binary encoding of a ModuleSpec that carries a module to workers forked before it existed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/call/descriptor.h"

namespace synk::rt {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }   // in [0, 1)

 private:
  uint64_t state_;
};

// Fills `out` (already sized) as `init` says; Load is not handled here (see initial_values).
void fill_init(Array& out, const InitSpec& init);

// Checks a ModuleSpec (unique names, valid dims and symbols, float-only random inits are fine on
// any dtype); throws UsageError.
void validate_module(const ModuleSpec& spec);

// The initial value of every shared variable: Load initialisers first (they bind the symbols of
// their dimensions to the file's sizes), then the others; a symbol no file binds has size 0.
std::vector<Array> initial_values(const ModuleSpec& spec);

// Checks `value` against shared variable `spec` (dtype under the safe-cast rule unless
// force_cast, number of dimensions, fixed sizes) and returns it converted to the declared dtype.
// `where` starts every error message.
Array conform_shared_value(const SharedSpec& spec, const std::vector<std::string>& symbols,
                           const ArrayRef& value, bool force_cast, const std::string& where);

std::string encode_module(const ModuleSpec& spec);
ModuleSpec decode_module(std::string_view bytes);

}  // namespace synk::rt
