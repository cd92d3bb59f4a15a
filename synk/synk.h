// synk's public C++ API in one include (docs/api.md): the process group, modules, data, functions
// and calls (synk/core.h), collectives on shared variables (synk/collectives.h), training steps
// (synk/train_step.h) and checkpoints (synk/checkpoint.h). The JIT (synk/jit.h) and AOT modules (synk/aot_module.h) have their own.
#pragma once

#include "synk/core.h"
#include "synk/checkpoint.h"
#include "synk/collectives.h"
#include "synk/train_step.h"
