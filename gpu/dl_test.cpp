// SymbolTable (dl.h) against a library every machine has (libm): names, alternative names,
// optional entry points, and the first missing required one as the error.
#include "gpu/dl.h"

#include <gtest/gtest.h>

namespace synk::rt::cuda {
namespace {

void* libm() {
  static void* handle = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  return handle;
}

TEST(SymbolTable, ResolvesNamesAndTheFirstDefinedAlternative) {
  ASSERT_NE(libm(), nullptr);
  SymbolTable table(libm(), "libm.so.6");
  double (*cosine)(double) = nullptr;
  double (*sine)(double) = nullptr;
  table.resolve(cosine, "cos");
  table.resolve(sine, {"synk_no_such_sin_v2", "sin"});
  EXPECT_TRUE(table.ok());
  EXPECT_EQ(table.error(), "");
  ASSERT_NE(cosine, nullptr);
  ASSERT_NE(sine, nullptr);
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  EXPECT_DOUBLE_EQ(sine(0.0), 0.0);
}

TEST(SymbolTable, TheFirstMissingRequiredEntryPointIsTheError) {
  SymbolTable table(libm(), "libm.so.6");
  double (*a)(double) = nullptr;
  double (*b)(double) = nullptr;
  double (*c)(double) = nullptr;
  table.resolve(a, "synk_optional_entry", /*required=*/false);
  EXPECT_TRUE(table.ok()) << "an optional entry point that is missing is no failure";
  table.resolve(b, {"synk_first_missing", "synk_first_missing_v2"});
  table.resolve(c, "synk_second_missing");
  EXPECT_FALSE(table.ok());
  EXPECT_EQ(table.error(), "libm.so.6 has no entry point synk_first_missing");
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(b, nullptr);
}

}  // namespace
}  // namespace synk::rt::cuda
