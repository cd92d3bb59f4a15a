// The spelling of an enum's values in one table that serves both directions: value to name (for
// messages and printers) and name to value (for parsers of flags and source text). One table per
// enum keeps the two directions from drifting apart, which two hand-written switches can.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace synk {

template <class Enum>
struct EnumName {
  Enum value;
  const char* name;
};

// The name of `value`, or `fallback` for a value the table does not list (a corrupt or
// out-of-range enum, e.g. one read from a file or cast from an int).
template <class Enum, size_t N>
constexpr const char* enum_name(const EnumName<Enum> (&table)[N], Enum value, const char* fallback = "?") {
  for (const EnumName<Enum>& entry : table)
    if (entry.value == value) return entry.name;
  return fallback;
}

template <class Enum, size_t N>
constexpr std::optional<Enum> enum_from_name(const EnumName<Enum> (&table)[N], std::string_view name) {
  for (const EnumName<Enum>& entry : table)
    if (name == entry.name) return entry.value;
  return std::nullopt;
}

}  // namespace synk
