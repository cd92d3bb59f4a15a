// Files that keep what a compiler rejected (generated source, a compile log), so that the
// internal error raised about it can name them: Clang/LLVM failures (jit.cpp) and NVRTC failures
// (nvrtc.cpp) both write them here, under one naming scheme.
#pragma once

#include <string>
#include <string_view>

namespace synk::compiler {

// Writes `text` to <dir>/<name>-<n>.<extension>, where <dir> is a directory private to this
// process, made by mkdtemp as $TMPDIR (else /tmp)/synk-failed-<pid>-XXXXXX (mode 0700, a random
// name: nobody else can have created it or planted a link in it), <name> is `name_hint` with
// every character other than letters, digits and '_' replaced by '_', and <n> counts the files
// this process wrote. The file is created with O_EXCL | O_NOFOLLOW (mode 0600). Returns the path,
// or "<could not write PATH: reason>". Never throws for a file that cannot be written (the error
// being reported matters more).
std::string save_failure_file(std::string_view text, std::string_view name_hint, std::string_view extension);

}  // namespace synk::compiler
