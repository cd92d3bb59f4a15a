// The 64-bit FNV-1a hash of a text. Stable across builds and machines: synkc bakes it into AOT
// stubs and the AOT loader compares it with the hash of the source it regenerates, so the two
// sides (compiler/aot and synk/aot_module) share this one definition.
#pragma once

#include <cstdint>
#include <string_view>

namespace synk {

constexpr uint64_t source_hash(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace synk
