// The error hierarchy's few out-of-line pieces (see errors.h).
#include "base/errors.h"

#include <string_view>

#include <fmt/format.h>

namespace synk {

void internal_error(const std::string& message) { throw InternalError(message); }

LocatedUserError::LocatedUserError(SourceLoc loc, const std::string& message)
    : UserError(loc.valid() ? "line " + std::to_string(loc.line) + ", column " + std::to_string(loc.col) + ": " + message
                            : message,
                loc, message) {}

int exit_code(const std::exception& e) {
  if (dynamic_cast<const UsageError*>(&e)) return kExitUsageError;
  if (dynamic_cast<const UserError*>(&e) || dynamic_cast<const RankError*>(&e)) return kExitUserError;
  return kExitInternalError;
}

std::string error_report(const std::exception& e, const std::string& tool) {
  std::string message = e.what();
  if (message.empty() || message.back() != '\n') message += '\n';
  if (exit_code(e) == kExitInternalError) return tool + ": internal error: " + message;
  std::string_view first_line(message.data(), message.find('\n'));
  if (first_line.find(": error: ") != std::string_view::npos) return message;
  return tool + ": error: " + message;
}

void refuse_nul_in_path(const std::string& path, const std::string& what) {
  const size_t nul = path.find('\0');
  if (nul == std::string::npos) return;
  throw UsageError(fmt::format("{}: the path '{}\\0{}' holds a NUL byte, which no file name can hold", what,
                               path.substr(0, nul), path.substr(nul + 1)));
}

}  // namespace synk
