// What the builder's tests share (builder_test.cpp, builder_dnn_test.cpp): a file's text, the
// examples' directory, and the comparison of a built module with the front end's.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "dsl/frontend.h"

namespace synk::dsl::testing {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::filesystem::path examples_dir() { return std::filesystem::path(SYNK_SOURCE_DIR) / "examples"; }

// Structural equality (ir::structurally_equal), both modules printed when they differ.
inline void expect_same_module(const ir::Module& built, const ir::Module& parsed) {
  std::string difference;
  EXPECT_TRUE(ir::structurally_equal(built, parsed, &difference))
      << difference << "\n--- builder:\n" << print_module(built) << "--- front end:\n" << print_module(parsed);
}

}  // namespace synk::dsl::testing
