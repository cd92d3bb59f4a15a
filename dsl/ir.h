// Forwarding header (kept for one release, until synk 0.3): "dsl/ir.h" moved to "ir/ir.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <ir/ir.h> instead.
#pragma once

#include "ir/ir.h"
