// The per-process registry (see registry.h).
#include "runtime/group/registry.h"

#include <fmt/format.h>

#include "base/wire.h"

namespace synk::rt {

Registry& Registry::instance() {
  static Registry* registry = new Registry();   // never destroyed: workers exit without unwinding
  return *registry;
}

std::string function_key(int32_t id) { return fmt::format("fn/{}", id); }
std::string module_key(int32_t id) { return fmt::format("mod/{}", id); }

std::string encode_function_entry(const FunctionEntry& entry) {
  wire::Writer w;
  w.pod(entry.module);
  w.str(entry.kind);
  w.str(entry.payload);
  return w.take();
}

void decode_function_entry(std::string_view bytes, FunctionEntry* entry) {
  wire::Reader r(bytes);
  entry->module = r.pod<int32_t>();
  entry->kind = r.str();
  entry->payload = r.str();
}

}  // namespace synk::rt
