// Forwarding header (kept for one release, until synk 0.3): "runtime/data.h" moved to "runtime/data/data.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <runtime/data/data.h> instead.
#pragma once

#include "runtime/data/data.h"
