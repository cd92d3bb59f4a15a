// Command-line checks shared by the examples (CLI11 validators): each rejects a value with a
// message that names what the option takes and what it got ("must be an integer >= 1, got '0'"),
// where CLI11's own range checks print their bounds as 300-digit numbers.
#pragma once

#include <cmath>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace synk_examples {

// A CLI11 check for integer options: "must be at least N, got X".
inline CLI::Validator at_least(int64_t minimum, int64_t maximum = INT64_MAX) {
  return CLI::Validator(
      [minimum, maximum](std::string& text) -> std::string {
        try {
          size_t used = 0;
          long long value = std::stoll(text, &used);
          if (used == text.size() && value >= minimum && value <= maximum) return {};
        } catch (const std::exception&) {
        }
        if (maximum == INT64_MAX) return fmt::format("must be an integer >= {}, got '{}'", minimum, text);
        return fmt::format("must be an integer from {} to {}, got '{}'", minimum, maximum, text);
      },
      maximum == INT64_MAX ? fmt::format(">= {}", minimum) : fmt::format("{} to {}", minimum, maximum));
}

// A CLI11 check for uint64_t options (CLI11 itself takes "-1" as 2^64 - 1).
inline CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          size_t used = 0;
          if (!text.empty() && text[0] != '-' && (std::stoull(text, &used), used == text.size())) return {};
        } catch (const std::exception&) {
        }
        return fmt::format("must be an integer from 0 to 2^64 - 1, got '{}'", text);
      },
      "UINT");
}

// A CLI11 check for real options: a finite number in [lo, hi] (hi excluded when `open_high`).
inline CLI::Validator in_range(double lo, bool open_low, double hi, bool open_high, const std::string& what) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        try {
          size_t used = 0;
          double value = std::stod(text, &used);
          bool ok = used == text.size() && std::isfinite(value) && (open_low ? value > lo : value >= lo) &&
                    (open_high ? value < hi : value <= hi);
          if (ok) return {};
        } catch (const std::exception&) {
        }
        return fmt::format("must be {}, got '{}'", what, text);
      },
      what);
}

// Parses the command line. --help: prints it, returns 0. A mistake: prints "NAME: error: ..." and
// where to find the usage, returns 2 (the examples' status for a bad command line). Else nullopt.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const std::string& name) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "{}: error: {}\nrun '{} --help' for usage\n", name, e.what(), name);
    return 2;
  }
  return std::nullopt;
}

}  // namespace synk_examples
