// synk's one error hierarchy, used by the language, the compiler, the runtime and synkc alike.
// The kinds are kept apart so that callers can react differently, and so that a program's exit
// status says whose fault it was (exit_code, the one place where kinds map to statuses):
//
//   Error (std::runtime_error)
//   +-- UserError          the program is wrong (a .synk file, a built module, a value it
//   |   |                  computes on): exit 1. Messages are complete and user-facing.
//   |   +-- LocatedUserError   ... at a known place in the source (line and column)
//   +-- UsageError         the caller passed something wrong (an argument, a dtype, an index, a
//   |   |                  command-line option): caught on the master before any worker moves;
//   |   |                  exit 2. Messages name the argument, the expected and the received value.
//   |   +-- ScatteredRowError  ... a bad value in one scattered row, renumbered by the call engine
//   +-- RankError          something failed inside one or more ranks while running (an exception
//   |                      in a compiled function, an allocation, a dead worker): exit 1
//   +-- InternalError      a bug in synk itself (a broken invariant); please report it: exit 3
//
// Errors of loaded libraries (the CUDA driver's CudaError, ...) are kinds of these.
#pragma once

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace synk {

// 1-based line and column; line 0 means "no location" (e.g. IR built from C++).
struct SourceLoc {
  uint32_t line = 0;
  uint32_t col = 0;
  bool valid() const { return line != 0; }
  friend bool operator==(const SourceLoc&, const SourceLoc&) = default;
};

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user's program is wrong. The message is complete and user-facing. When it holds the front
// end's diagnostics, loc() and message() are the first error's place and text (its own line,
// without the source line and caret); otherwise loc() is invalid and message() empty.
class UserError : public Error {
 public:
  using Error::Error;
  UserError(const std::string& text, SourceLoc first, std::string first_message)
      : Error(text), loc_(first), message_(std::move(first_message)) {}
  SourceLoc loc() const { return loc_; }
  const std::string& message() const { return message_; }

 private:
  SourceLoc loc_;
  std::string message_;
};

// A user error found after the front end (e.g. by the gradient pass) at a known place in the
// source. what() reads "line L, column C: message" for callers without the source; a driver that
// has the SourceFile formats it as a diagnostic (file:line:col, source line and caret).
class LocatedUserError : public UserError {
 public:
  LocatedUserError(SourceLoc loc, const std::string& message);
};

// The caller's fault: a wrong argument, a wrong dtype, an index out of range, an unknown name...
// Messages name the argument, the expected and the received value.
class UsageError : public Error {
 public:
  using Error::Error;
};

// A bad value in one scattered row, found by a compiled function, which numbers the row within
// the rows it was given (one rank's share, one slice of it). The call engine catches it and
// reports the row in the caller's terms: its position among the call's scattered rows and the
// input row it came from. what() reads `before` + "row N" + `after`.
class ScatteredRowError : public UsageError {
 public:
  ScatteredRowError(std::string before, int64_t row, std::string after)
      : UsageError(before + "row " + std::to_string(row) + after),
        before_(std::move(before)), after_(std::move(after)), row_(row) {}
  const std::string& before() const { return before_; }
  const std::string& after() const { return after_; }
  int64_t row() const { return row_; }

 private:
  std::string before_, after_;
  int64_t row_;
};

// A failure inside one or more ranks (an exception in run(), an allocation failure, a worker that
// died). `ranks` lists the ranks that failed, in increasing order.
class RankError : public Error {
 public:
  RankError(const std::string& message, std::vector<int> ranks, bool group_lost = false)
      : Error(message), ranks_(std::move(ranks)), group_lost_(group_lost) {}
  const std::vector<int>& ranks() const { return ranks_; }
  // True when the process group was shut down because of this error (a worker died): the next
  // call needs a new synk::fork().
  bool group_lost() const { return group_lost_; }

 private:
  std::vector<int> ranks_;
  bool group_lost_;
};

// A bug in synk (an invariant that did not hold). Never caused by user input alone.
class InternalError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void internal_error(const std::string& message);

// Stamps file:line on the internal error a failed invariant raises.
#define SYNK_CHECK(cond, msg)                                                                     \
  do {                                                                                            \
    if (!(cond)) ::synk::internal_error(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " + (msg)); \
  } while (0)

// Process exit statuses, the same for synkc, `synkc run` and the examples: 0 success, 1 a user
// error or a failure inside a rank, 2 a usage error (bad command line or argument), 3 a bug.
inline constexpr int kExitUserError = 1;
inline constexpr int kExitUsageError = 2;
inline constexpr int kExitInternalError = 3;
int exit_code(const std::exception& e);

// Throws UsageError when `path` holds a NUL byte, which the system would take as the end of a
// shorter path (Python's open() refuses such a path too). `what` names the call.
void refuse_nul_in_path(const std::string& path, const std::string& what);

// What a command-line tool prints for an exception that ended it: "TOOL: error: MESSAGE" (or
// "TOOL: internal error: ..." for a bug), ending in a newline. A message whose first line is
// already a rendered diagnostic ("file.synk:3:7: error: ...") is printed as it is.
std::string error_report(const std::exception& e, const std::string& tool);

}  // namespace synk
