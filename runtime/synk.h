// Forwarding header (kept for one release, until synk 0.3): "runtime/synk.h" moved to "synk/synk.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <synk/synk.h> instead.
#pragma once

#include "synk/synk.h"
