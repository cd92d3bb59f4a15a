// Forwarding header (kept for one release, until synk 0.3): "runtime/train_step.h" moved to "synk/train_step.h" in the
// layout of synk 0.2 (docs/architecture.md). Include <synk/train_step.h> instead.
#pragma once

#include "synk/train_step.h"
