// The collectives layer's implementation of the overlapped gradient all-reduce
// (runtime/call/gradient_stream.h; the helper thread is in bucket_stream.cpp).
#pragma once

namespace synk::rt {

// Registers the helper with the call engine and its stop with the group's teardown. Called once,
// from a namespace-scope initialiser of exec.cpp (so every program with collectives has it in
// every rank, forked or not); returns true.
bool register_bucket_stream();

}  // namespace synk::rt
