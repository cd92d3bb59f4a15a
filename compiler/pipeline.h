// The compiler's pipeline, named once: module preparation (the front end, then training-step
// expansion) and the ordered list of stages that `synkc --emit`, `synkc check` and
// `--print-after-all` walk. The JIT (synk/jit.cpp), synkc, the AOT generator (aot/generate.cpp)
// and the AOT loader (synk/aot_module.cpp) all get their modules from prepare_module.
#pragma once

#include <string>
#include <vector>

#include "dsl/frontend.h"
#include "ir/ir.h"

namespace synk::compiler {

// Text -> a module ready to lower: parse, analyze (base_dir resolves relative load() paths; ""
// is "."), expand training steps. Throws synk::UserError with every diagnostic in source order.
// `warnings`, when given, receives the warnings of a module that compiled (formatted like errors,
// "" when there are none): the JIT prints them where the user compiles, not where a worker or an
// AOT module reads the same text again.
ir::Module prepare_module(const std::string& source_name, const std::string& text, const std::string& base_dir,
                          std::string* warnings = nullptr, dsl::LoadFiles load_files = dsl::LoadFiles::Checked);

// The preparation step alone, for a module the front end has already produced.
void prepare_module(ir::Module& module);

// Every stage in pipeline order: the front end's (ast, ir), the AOT artifact's texts (stub, header:
// aot/generate.cpp), then the compiler's (emit_stages(), emit.h).
const std::vector<std::string>& pipeline_stages();

}  // namespace synk::compiler
