// Files that keep what a compiler rejected (generated source, a compile log), so that the
// internal error raised about it can name them: Clang/LLVM failures (jit.cpp) and NVRTC failures
// (nvrtc.cpp) both write them here, under one naming scheme.
#pragma once

#include <string>
#include <string_view>

namespace synk::compiler {

// Writes `text` to $TMPDIR (else /tmp)/synk-failed-<name>-<pid>-<n>.<extension>, where <name> is
// `name_hint` with every character other than letters, digits and '_' replaced by '_', and <n>
// counts the files this process wrote. Returns the path, or "<could not write PATH>". Never throws
// for a file that cannot be written (the error being reported matters more).
std::string save_failure_file(std::string_view text, std::string_view name_hint, std::string_view extension);

}  // namespace synk::compiler
