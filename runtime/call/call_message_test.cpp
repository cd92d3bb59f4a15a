// Tests of the Call command's message (call_message.h): every field survives encode + decode, and
// a truncated, padded or corrupted message is an InternalError, never a message with wrong fields.
#include <gtest/gtest.h>

#include <random>

#include "base/errors.h"
#include "runtime/call/call_message.h"

using namespace synk;
using namespace synk::rt;

namespace {

CallMessage random_message(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto list = [&] {
    return IndexListRef{pick(0, 1) ? "synk-seg" + std::to_string(pick(0, 999)) : "", uint64_t(pick(0, 1 << 20)),
                        pick(0, 1) ? DType::I64 : DType::I32, pick(0, 1000)};
  };
  CallMessage m;
  m.function = int32_t(pick(0, 100));
  m.num_slices = pick(1, 8);
  m.micro_shard_rows = pick(0, 1) ? pick(1, 512) : 0;
  m.world_ranks = int32_t(pick(0, 64));
  m.rank_offset = int32_t(pick(0, 63));
  m.has_scattered = pick(0, 1);
  m.has_sliceable = pick(0, 1);
  m.empty_call = pick(0, 1);
  m.positions = pick(0, 1 << 30);
  m.select = RowSelection::Kind(pick(0, 3));
  m.select_start = pick(-5, 5000);
  m.select_list = list();
  for (int64_t i = pick(0, 5); i > 0; --i) {
    InputRef in{InputUse(pick(0, 2)), DType(pick(0, 5)), {}, pick(0, 1) ? "" : "synk-in" + std::to_string(i)};
    for (int64_t d = pick(0, 4); d > 0; --d) in.shape.push_back(pick(0, 100));
    m.inputs.push_back(in);
  }
  for (int64_t i = pick(0, 3); i > 0; --i) m.sliceable_slots.push_back(int32_t(pick(0, 9)));
  for (int64_t r = pick(0, 4); r > 0; --r)
    m.shared_rows.push_back(SharedRowsRef{RowSelection::Kind(pick(0, 3)), pick(0, 99), pick(0, 99), list()});
  for (int64_t i = pick(0, 3); i > 0; --i) m.outputs.push_back(int32_t(pick(0, 9)));
  if (pick(0, 1)) {   // a streamed gradient (gradient_stream.h), weighted or not
    m.stream.update = int32_t(pick(0, 3));
    m.stream.bucket_bytes = uint64_t(pick(1, 1 << 22));
    m.stream.total_bytes = uint64_t(pick(0, 1 << 30));
    m.stream.dtype = pick(0, 1) ? DType::F32 : DType::F64;
    m.stream.staging = "synk-coll" + std::to_string(pick(0, 99));
    for (int64_t r = pick(0, 1) ? pick(2, 5) : 0; r > 0; --r) m.stream.rank_scale.push_back(double(pick(1, 50)) / 97);
  }
  return m;
}

TEST(CallMessage, EveryFieldSurvivesARoundTrip) {
  std::mt19937_64 rng(20261125);
  for (int trial = 0; trial < 500; ++trial) {
    CallMessage m = random_message(rng);
    CallMessage back = decode_call_message(encode_call_message(m));
    ASSERT_EQ(back, m) << "trial " << trial;
  }
}

TEST(CallMessage, AChangedFieldChangesTheEncoding) {
  std::mt19937_64 rng(7);
  CallMessage m = random_message(rng);
  CallMessage other = m;
  other.select_list.offset += 8;
  EXPECT_NE(encode_call_message(m), encode_call_message(other));
}

TEST(CallMessage, TruncatedMessagesAreInternalErrors) {
  std::mt19937_64 rng(11);
  std::string bytes = encode_call_message(random_message(rng));
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(decode_call_message(std::string_view(bytes).substr(0, n)), InternalError) << "length " << n;
}

TEST(CallMessage, TrailingBytesAreAnInternalError) {
  std::mt19937_64 rng(13);
  std::string bytes = encode_call_message(random_message(rng)) + "x";
  EXPECT_THROW(decode_call_message(bytes), InternalError);
}

TEST(CallMessage, AnUnknownEnumValueIsAnInternalError) {
  CallMessage m;
  std::string bytes = encode_call_message(m);
  // The row-selection kind follows function, num_slices, micro_shard_rows, world_ranks,
  // rank_offset, three flags and positions.
  size_t at = sizeof(int32_t) + 2 * sizeof(int64_t) + 2 * sizeof(int32_t) + 3 + sizeof(int64_t);
  bytes[at] = char(9);
  EXPECT_THROW(decode_call_message(bytes), InternalError);
}

}  // namespace
