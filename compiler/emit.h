// The compiler's stages as text, for `synkc FILE --emit=STAGE` and `--print-after-all`.
// The front-end stages (ast, ir) are printed by the driver directly; every later stage
// (ir-grad, ir-fused, cpp, cuda, ptx) is produced here from the typed IR; ptx is the CUDA program
// compiled by NVRTC (what an artifact's forward-compatible image holds).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace synk::compiler {

struct EmitOptions {
  bool print_after_all = false;   // dump the IR after every pass to `pass_dump` (stderr in synkc)
  std::ostream* pass_dump = nullptr;
  int ptx_arch = 0;               // --emit=ptx: compute_<ptx_arch> (0: the newest default architecture)
};

// The stages emit() accepts, in pipeline order.
const std::vector<std::string>& emit_stages();

// Writes `stage` of `module` to `out`. Throws synk::UserError for an unknown stage.
void emit(const ir::Module& module, const std::string& stage, std::ostream& out,
          const EmitOptions& options);

// What `synkc check` runs after the front end: the stages that can still find errors in the
// user's program (training-step expansion and gradients, i.e. what --emit=ir-grad runs), their
// output discarded. Throws synk::UserError (a synk::LocatedUserError where the construct is known).
void check_program(const ir::Module& module);

}  // namespace synk::compiler
