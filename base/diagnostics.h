// Source text, source locations, and the diagnostic engine shared by every front-end stage.
// A diagnostic prints as `file:line:col: error: message`, then the source line and a caret, so
// editors jump to it and people see it. The error types are base/errors.h.
#pragma once

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"

namespace synk {

// The text of one source file. A leading UTF-8 byte-order mark is dropped, as compilers do: it is
// not part of the program, and columns on the first line count from what follows it.
class SourceFile {
 public:
  SourceFile(std::string path, std::string text);
  const std::string& path() const { return path_; }
  const std::string& text() const { return text_; }
  // The text of a 1-based line without its newline; empty when out of range.
  std::string_view line_text(uint32_t line) const;
  SourceLoc loc_at(size_t offset) const;

 private:
  std::string path_;
  std::string text_;
  std::vector<size_t> line_starts_;
};

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity = Severity::Error;
  SourceLoc loc;
  std::string message;
};

// Collects diagnostics for one source file. Stages report and keep going; callers check
// has_errors() between stages so that one mistake gives one message, not a cascade. After
// kErrorLimit errors, the next one is replaced by "too many errors (N); stopping" (without a
// location, so it prints last) and everything reported later is dropped; the lexer then ends the
// file early, so that a large file that is not a program costs little.
class DiagnosticEngine {
 public:
  static constexpr size_t kErrorLimit = 20;
  explicit DiagnosticEngine(const SourceFile& file) : file_(file) {}
  void error(SourceLoc loc, std::string message);
  void warning(SourceLoc loc, std::string message);
  void note(SourceLoc loc, std::string message);
  bool has_errors() const { return error_count_ > 0; }
  // True once an error beyond kErrorLimit was dropped: stages may stop early.
  bool error_limit_reached() const { return stopped_; }
  size_t error_count() const { return error_count_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  const SourceFile& file() const { return file_; }
  // Prints every diagnostic in the order reported, with source line and caret.
  void print(std::ostream& out) const;

 private:
  const SourceFile& file_;
  std::vector<Diagnostic> diagnostics_;
  size_t error_count_ = 0;
  bool stopped_ = false;
};

// Formats one diagnostic exactly as DiagnosticEngine::print does. A source line longer than
// kMaxQuotedColumns is quoted as a window around the column, cut ends marked "...".
constexpr size_t kMaxQuotedColumns = 200;
std::string format_diagnostic(const SourceFile& file, const Diagnostic& d);

// A later stage's located error (the gradient pass, lowering) as the front end's diagnostics read:
// throws a UserError holding format_diagnostic's text for `file`; one without a location is thrown
// as it is.
[[noreturn]] void throw_in_source(const SourceFile& file, const LocatedUserError& e);

// "; did you mean 'x'?" for a candidate that differs from `wrong` only in case, else for the one
// closest by edit distance within a small distance (1, or 2 for names of 4 letters and more; none
// for a one-letter name, which is one edit from every other); "" when none is that close. For
// messages about unknown names (variables, operations, functions, rules, hyper-parameters).
std::string did_you_mean(std::string_view wrong, const std::vector<std::string>& candidates);

// Every diagnostic of `diags` formatted as format_diagnostic does, ordered by location (each
// error keeps the notes that follow it; diagnostics without a location go last).
std::string format_diagnostics_in_source_order(const DiagnosticEngine& diags);

}  // namespace synk
