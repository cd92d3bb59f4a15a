// Source files, diagnostics and their formatting (the contract is base/diagnostics.h).
// A diagnostic prints as `path:LINE:COL: error: MESSAGE`, then the source line, then a caret under
// the column. Columns count bytes (a tab is one column, like clang); the caret line copies the
// tabs of the source line so that the caret lands under the right character in any tab width.
// A very long line (a minified or binary file) is quoted as a window around the column.
#include "base/diagnostics.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <fmt/format.h>

namespace synk {

SourceFile::SourceFile(std::string path, std::string text)
    : path_(std::move(path)), text_(std::move(text)) {
  if (text_.starts_with("\xEF\xBB\xBF")) text_.erase(0, 3);   // a UTF-8 byte-order mark
  line_starts_.push_back(0);
  // A line ends at '\n', '\r\n' or a lone '\r' (old Mac files; the lexer ends comments there too).
  for (size_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n' || (text_[i] == '\r' && (i + 1 == text_.size() || text_[i + 1] != '\n')))
      line_starts_.push_back(i + 1);
  }
}

std::string_view SourceFile::line_text(uint32_t line) const {
  if (line == 0 || line > line_starts_.size()) return {};
  size_t begin = line_starts_[line - 1];
  size_t end = line < line_starts_.size() ? line_starts_[line] - 1 : text_.size();
  std::string_view text(text_.data() + begin, end - begin);
  // Files with Windows line endings: the '\r' is not part of what people see on the line.
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  return text;
}

SourceLoc SourceFile::loc_at(size_t offset) const {
  offset = std::min(offset, text_.size());
  // The last line start that is <= offset.
  auto next = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  size_t line_index = static_cast<size_t>(next - line_starts_.begin()) - 1;
  return SourceLoc{static_cast<uint32_t>(line_index + 1),
                   static_cast<uint32_t>(offset - line_starts_[line_index] + 1)};
}

void DiagnosticEngine::error(SourceLoc loc, std::string message) {
  if (stopped_) return;
  if (error_count_ >= kErrorLimit) {
    stopped_ = true;
    diagnostics_.push_back({Severity::Error, SourceLoc{}, fmt::format("too many errors ({}); stopping", kErrorLimit)});
    return;
  }
  diagnostics_.push_back({Severity::Error, loc, std::move(message)});
  ++error_count_;
}

void DiagnosticEngine::warning(SourceLoc loc, std::string message) {
  if (stopped_) return;
  diagnostics_.push_back({Severity::Warning, loc, std::move(message)});
}

void DiagnosticEngine::note(SourceLoc loc, std::string message) {
  if (stopped_) return;
  diagnostics_.push_back({Severity::Note, loc, std::move(message)});
}

void DiagnosticEngine::print(std::ostream& out) const {
  for (const Diagnostic& d : diagnostics_) out << format_diagnostic(file_, d);
}

static const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

static bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The whitespace that puts a caret under byte column `col` of `line`: tabs stay tabs, every other
// character becomes one space (UTF-8 continuation bytes add nothing, so a multi-byte character
// counts once on screen).
static std::string caret_prefix(std::string_view line, uint32_t col) {
  std::string prefix;
  size_t width = col > 0 ? col - 1 : 0;
  for (size_t i = 0; i < width; ++i) {
    if (i >= line.size()) {
      prefix += ' ';
    } else if (line[i] == '\t') {
      prefix += '\t';
    } else if (!is_continuation_byte(line[i])) {
      prefix += ' ';
    }
  }
  return prefix;
}

// The source line as quoted under a diagnostic, and the caret line below it. A line of more than
// kMaxQuotedColumns bytes is cut to that many around `col` (never inside a UTF-8 character), with
// "..." where it was cut; the caret stays under the same character.
static std::pair<std::string, std::string> quoted_line(std::string_view line, uint32_t col) {
  if (line.size() <= kMaxQuotedColumns) return {std::string(line), caret_prefix(line, col)};
  size_t at = std::min<size_t>(col > 0 ? col - 1 : 0, line.size());
  size_t begin = at > kMaxQuotedColumns / 2 ? at - kMaxQuotedColumns / 2 : 0;
  size_t end = std::min(line.size(), begin + kMaxQuotedColumns);
  begin = end - std::min(end, kMaxQuotedColumns);
  while (begin > 0 && begin < line.size() && is_continuation_byte(line[begin])) --begin;
  while (end < line.size() && is_continuation_byte(line[end])) --end;
  std::string head = begin > 0 ? "..." : "", tail = end < line.size() ? "..." : "";
  std::string_view window = line.substr(begin, end - begin);
  return {head + std::string(window) + tail,
          std::string(head.size(), ' ') + caret_prefix(window, static_cast<uint32_t>(at - begin + 1))};
}

std::string format_diagnostic(const SourceFile& file, const Diagnostic& d) {
  const char* severity = severity_name(d.severity);
  if (!d.loc.valid()) return fmt::format("{}: {}: {}\n", file.path(), severity, d.message);
  auto [line, caret] = quoted_line(file.line_text(d.loc.line), d.loc.col);
  return fmt::format("{}:{}:{}: {}: {}\n{}\n{}^\n", file.path(), d.loc.line, d.loc.col, severity,
                     d.message, line, caret);
}

std::string format_diagnostics_in_source_order(const DiagnosticEngine& diags) {
  // A group is one error or warning with the notes that follow it; groups are stably sorted by
  // their first location so that stages reporting in different orders still read top to bottom.
  struct Group {
    SourceLoc loc;
    size_t first = 0, end = 0;
  };
  const std::vector<Diagnostic>& all = diags.diagnostics();
  std::vector<Group> groups;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].severity == Severity::Note && !groups.empty()) {
      groups.back().end = i + 1;
      continue;
    }
    groups.push_back({all[i].loc, i, i + 1});
  }
  auto key = [](SourceLoc loc) {
    // Diagnostics without a location (whole-file problems) go last.
    return std::pair(loc.valid() ? loc.line : UINT32_MAX, loc.col);
  };
  std::stable_sort(groups.begin(), groups.end(),
                   [&](const Group& a, const Group& b) { return key(a.loc) < key(b.loc); });
  std::string text;
  for (const Group& group : groups) {
    for (size_t i = group.first; i < group.end; ++i) text += format_diagnostic(diags.file(), all[i]);
  }
  return text;
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

void throw_in_source(const SourceFile& file, const LocatedUserError& e) {
  if (!e.loc().valid()) throw e;
  throw UserError(format_diagnostic(file, {Severity::Error, e.loc(), e.message()}), e.loc(), e.message());
}

std::string did_you_mean(std::string_view wrong, const std::vector<std::string>& candidates) {
  auto same_ignoring_case = [&](const std::string& c) {
    return c.size() == wrong.size() && std::equal(c.begin(), c.end(), wrong.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
           });
  };
  for (const std::string& c : candidates)   // 'W' for 'w': the case is the likeliest slip
    if (same_ignoring_case(c)) return "; did you mean '" + c + "'?";
  if (wrong.size() < 2) return "";   // every one-letter name is one edit from every other
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(1, std::min<size_t>(2, wrong.size() / 2));
  for (const std::string& c : candidates) {   // the first of the closest
    const size_t d = edit_distance(wrong, c);
    if (d < best_distance || (d == best_distance && !best)) best = &c, best_distance = d;
  }
  return best ? "; did you mean '" + *best + "'?" : "";
}

}  // namespace synk
