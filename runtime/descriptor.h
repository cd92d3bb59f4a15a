// Forwarding header (kept for one release, until synk 0.3): "runtime/descriptor.h" moved to "runtime/call/descriptor.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <runtime/call/descriptor.h> instead.
#pragma once

#include "runtime/call/descriptor.h"
