// Forwarding header (kept for one release, until synk 0.3): "runtime/shared_variable.h" moved to "synk/shared_variable.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <synk/shared_variable.h> instead.
#pragma once

#include "synk/shared_variable.h"
