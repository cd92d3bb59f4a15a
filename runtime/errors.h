// Forwarding header (kept for one release, until synk 0.3): "runtime/errors.h" moved to "base/errors.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <base/errors.h> instead.
#pragma once

#include "base/errors.h"
