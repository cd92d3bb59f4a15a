// Forwarding header (kept for one release, until synk 0.3): "compiler/synk_jit.h" moved to "synk/jit.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <synk/jit.h> instead.
#pragma once

#include "synk/jit.h"
