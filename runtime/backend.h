// Forwarding header (kept for one release, until synk 0.3): "runtime/backend.h" moved to "runtime/group/backend.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <runtime/group/backend.h> instead.
#pragma once

#include "runtime/group/backend.h"
