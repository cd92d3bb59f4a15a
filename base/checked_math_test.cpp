// Tests of the checked size arithmetic: products that fit, products that overflow at the last
// dimension or in the byte count, zero dimensions (no overflow whatever the others are), negative
// dimensions, decimal parsing at the int64 limit, and the exact sizes the messages print.
#include <gtest/gtest.h>

#include "base/checked_math.h"

using namespace synk;

TEST(CheckedMath, ElementsAndBytes) {
  EXPECT_EQ(checked_elements(std::vector<int64_t>{}), 1);
  EXPECT_EQ(checked_elements(std::vector<int64_t>{3, 4}), 12);
  EXPECT_EQ(checked_elements(std::vector<int64_t>{3037000499, 3037000499}), int64_t(3037000499) * 3037000499);
  EXPECT_FALSE(checked_elements(std::vector<int64_t>{3037000500, 3037000500}));
  EXPECT_FALSE(checked_elements(std::vector<int64_t>{int64_t(1) << 62, 4}));
  EXPECT_FALSE(checked_elements(std::vector<int64_t>{4611686018427387905, 4}))
      << "the .npy header that used to allocate 16 bytes";
  EXPECT_EQ(checked_elements(std::vector<int64_t>{int64_t(1) << 62, int64_t(1) << 62, 0}), 0)
      << "a zero dimension empties the array whatever the others are";
  EXPECT_FALSE(checked_elements(std::vector<int64_t>{3, -1}));
  EXPECT_EQ(checked_shape_bytes(std::vector<int64_t>{(int64_t(1) << 61) - 1}, 4), ((int64_t(1) << 61) - 1) * 4);
  EXPECT_FALSE(checked_shape_bytes(std::vector<int64_t>{(int64_t(1) << 61) + 1}, 8)) << "synk::data(I64, {2^61+1})";
  EXPECT_FALSE(checked_shape_bytes(std::vector<int64_t>{int64_t(1) << 62}, 4)) << "f32[2^62]";
  EXPECT_EQ(checked_bytes(INT64_MAX, 1), INT64_MAX);
  EXPECT_FALSE(checked_bytes(-1, 4));
  EXPECT_EQ(checked_add(INT64_MAX - 1, 1), INT64_MAX);
  EXPECT_FALSE(checked_add(INT64_MAX, 1));
  EXPECT_FALSE(checked_mul(INT64_MIN, -1));
}

TEST(CheckedMath, ParseDecimal) {
  EXPECT_EQ(parse_decimal("0"), 0);
  EXPECT_EQ(parse_decimal("9223372036854775807"), INT64_MAX);
  EXPECT_FALSE(parse_decimal("9223372036854775808"));
  EXPECT_FALSE(parse_decimal("99999999999999999999"));
  EXPECT_FALSE(parse_decimal(""));
  EXPECT_FALSE(parse_decimal("12a"));
  EXPECT_FALSE(parse_decimal("-1"));
}

TEST(CheckedMath, MessagesNameTheExactSize) {
  EXPECT_EQ(describe_oversize(std::vector<int64_t>{int64_t(1) << 62}, 4),
            "18446744073709551616 bytes (more than the 9223372036854775807 bytes an array can have)");
  EXPECT_EQ(describe_oversize(std::vector<int64_t>{3037000500, 3037000500}, 1, "elements"),
            "9223372037000250000 elements (more than the 9223372036854775807 elements an array can have)");
  EXPECT_EQ(describe_oversize(std::vector<int64_t>{INT64_MAX, INT64_MAX, INT64_MAX}, 8),
            "more than 2^128 bytes (far more than the 9223372036854775807 bytes an array can have)");
  EXPECT_EQ(describe_oversize(std::vector<int64_t>{2, -3}, 4), "a negative dimension (-3)");
}
