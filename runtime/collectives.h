// Forwarding header (kept for one release, until synk 0.3): "runtime/collectives.h" moved to "synk/collectives.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <synk/collectives.h> instead.
#pragma once

#include "synk/collectives.h"
