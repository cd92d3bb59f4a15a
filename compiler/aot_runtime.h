// Forwarding header (kept for one release, until synk 0.3): "compiler/aot_runtime.h" moved to "synk/aot_module.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <synk/aot_module.h> instead.
#pragma once

#include "synk/aot_module.h"
