// docs/jit.md cannot drift from the code: its complete example must be examples/intro.cpp as it
// is (CTest runs that program on two ranks and checks its output), and its shared-variable
// walkthrough, repeated here statement by statement, must give the values the page shows.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "synk/jit.h"

namespace {

std::string read(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The first fenced block of `language` in a Markdown text.
std::string first_block(const std::string& markdown, const std::string& language) {
  std::string fence = "```" + language + "\n";
  size_t start = markdown.find(fence);
  if (start == std::string::npos) return "<no " + language + " block>";
  start += fence.size();
  return markdown.substr(start, markdown.find("```\n", start) - start);
}

TEST(JitDoc, TheCompleteExampleIsExamplesIntroCpp) {
  std::string program = read(SYNK_SOURCE_DIR "/examples/intro.cpp");
  // The file ends with the CHECK lines its test uses; the page shows everything before them.
  size_t checks = program.find("\n// CHECK");
  ASSERT_NE(checks, std::string::npos);
  std::string shown = first_block(read(SYNK_SOURCE_DIR "/docs/jit.md"), "cpp");
  EXPECT_EQ(shown, program.substr(0, checks)) << "docs/jit.md no longer shows examples/intro.cpp verbatim";
}

TEST(JitDoc, TheSynkBlockIsExamplesIntroSynk) {
  std::string synk = read(SYNK_SOURCE_DIR "/examples/intro.synk");
  std::string shown = first_block(read(SYNK_SOURCE_DIR "/docs/jit.md"), "synk");
  EXPECT_NE(synk.find(shown), std::string::npos) << shown;
}

TEST(JitDoc, TheSharedVariableWalkthroughGivesTheValuesShown) {
  synk::fork(2);
  synk::jit::Module mod = synk::jit::load_file(SYNK_SOURCE_DIR "/examples/shared_variable.synk");
  synk::Function f = mod.function("f");
  synk::jit::Shared s = mod.shared("s");
  synk::Data x = synk::data<float>({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2}, {.name = "x"});
  f({x});
  EXPECT_EQ(s.values<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(s.values<float>(1), (std::vector<float>{7, 7}));
  EXPECT_EQ(synk::to_vector<float>(synk::gather(s.var(), 1)), (std::vector<float>{3, 3, 7, 7}));
  synk::all_reduce(s.var(), "sum");
  EXPECT_EQ(s.values<float>(1), (std::vector<float>{10, 10}));
  s.set_value<float>({1, 1}, {2});
  s.set_value<float>(1, {1, 1}, {2});
  EXPECT_EQ(s.values<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(s.values<float>(1), (std::vector<float>{1, 1}));
  synk::close();
}

}  // namespace
