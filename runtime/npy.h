// Forwarding header (kept for one release, until synk 0.3): "runtime/npy.h" moved to "runtime/data/npy.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <runtime/data/npy.h> instead.
#pragma once

#include "runtime/data/npy.h"
