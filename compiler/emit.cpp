// Placeholder until the pass pipeline lands: no stage after `ir` exists yet, and saying so is
// the honest answer. Replaced by the compiler's real emit() (owner: the code-generation work).
#include "compiler/emit.h"

namespace synk::compiler {

const std::vector<std::string>& emit_stages() {
  static const std::vector<std::string> stages;
  return stages;
}

void emit(const ir::Module&, const std::string& stage, std::ostream&, const EmitOptions&) {
  throw dsl::UserError("--emit=" + stage + " is not implemented yet");
}

}  // namespace synk::compiler
