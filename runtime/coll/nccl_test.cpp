// The NCCL transport: the types coll_nccl.h mirrors match nccl.h (checked at compile time where
// the header is installed), libnccl.so.2 loads through dlopen, the unique id travels through the
// group's store to every rank, and (on a machine with one GPU per rank) all_reduce and reduce over
// NCCL give the same answers as the shared-memory algorithm. Parts that need the library or a GPU
// skip with the reason when it is missing.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/coll/nccl.h"
#include "runtime/call/registry.h"
#include "synk/synk.h"
#include "runtime/testing.h"

#if defined(SYNK_HAVE_NCCL_HEADER)
#include <nccl.h>

namespace nccl = synk::rt::nccl;
static_assert(nccl::kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(nccl::UniqueId) == sizeof(ncclUniqueId));
static_assert(nccl::kSuccess == ncclSuccess);
static_assert(int(nccl::Int8) == ncclInt8 && int(nccl::Uint8) == ncclUint8 && int(nccl::Int32) == ncclInt32 &&
              int(nccl::Uint32) == ncclUint32 && int(nccl::Int64) == ncclInt64 && int(nccl::Uint64) == ncclUint64 &&
              int(nccl::Float16) == ncclFloat16 && int(nccl::Float32) == ncclFloat32 &&
              int(nccl::Float64) == ncclFloat64 && int(nccl::Bfloat16) == ncclBfloat16);
static_assert(int(nccl::Sum) == ncclSum && int(nccl::Prod) == ncclProd && int(nccl::Max) == ncclMax &&
              int(nccl::Min) == ncclMin && int(nccl::Avg) == ncclAvg);
static_assert(sizeof(ncclDataType_t) == sizeof(nccl::DataType) && sizeof(ncclRedOp_t) == sizeof(nccl::RedOp));
// The function types: the mirrored pointers accept NCCL's own functions.
static_assert(std::is_same_v<decltype(&ncclAllReduce),
                             ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)>);
static_assert(std::is_same_v<decltype(&ncclCommInitRank), ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int)>);
#endif

using namespace synk;

namespace {

TEST(Nccl, MirroredTypesWereCheckedAgainstTheHeader) {
#if defined(SYNK_HAVE_NCCL_HEADER)
  SUCCEED() << "static_asserts above compared coll_nccl.h with nccl.h " << NCCL_MAJOR << "." << NCCL_MINOR;
#else
  GTEST_SKIP() << "nccl.h not found at configure time: the mirrored types were not compared";
#endif
}

// Every dtype a shared variable can have maps to NCCL's type of the same width and kind.
TEST(Nccl, EveryDtypeHasItsNcclType) {
  EXPECT_EQ(nccl::data_type(DType::F32), nccl::Float32);
  EXPECT_EQ(nccl::data_type(DType::F64), nccl::Float64);
  EXPECT_EQ(nccl::data_type(DType::I32), nccl::Int32);
  EXPECT_EQ(nccl::data_type(DType::I64), nccl::Int64);
  EXPECT_EQ(nccl::data_type(DType::U8), nccl::Uint8);
  EXPECT_EQ(nccl::data_type(DType::Bool), nccl::Uint8);
  EXPECT_EQ(nccl::data_type(DType::F16), nccl::Float16);
  EXPECT_EQ(nccl::data_type(DType::BF16), nccl::Bfloat16);
}

TEST(Nccl, LibraryLoadsAndDrawsUniqueIdsWithoutAGpu) {
  std::string why;
  if (!rt::nccl::library_available(&why)) GTEST_SKIP() << why;
  const rt::nccl::Api& api = rt::nccl::api();
  EXPECT_GE(api.version, 20700);
  std::printf("[NCCL %d from %s]\n", api.version, api.path.c_str());
  rt::nccl::UniqueId a{}, b{};
  ASSERT_EQ(api.GetUniqueId(&a), rt::nccl::kSuccess);
  ASSERT_EQ(api.GetUniqueId(&b), rt::nccl::kSuccess);
  EXPECT_NE(std::memcmp(a.internal, b.internal, sizeof a.internal), 0) << "two ids differ";
}

TEST(Nccl, UniqueIdReachesEveryRankThroughTheStore) {
  std::string why;
  if (!rt::nccl::library_available(&why)) GTEST_SKIP() << why;
  rt::ModuleSpec spec;
  spec.shareds = {synk::testing::shared("id", DType::U8, {synk::testing::fixed(rt::nccl::kUniqueIdBytes)})};
  Module m = synk::module(spec);
  int32_t module_id = m.id();
  synk::register_rank_handler("nccl_id", [module_id](rt::RankContext& ctx, std::string_view epoch) {
    rt::nccl::UniqueId id = rt::nccl::bootstrap_id(ctx, std::stoi(std::string(epoch)));
    std::memcpy(rt::module_on_rank(ctx, module_id).values[0].bytes.data(), id.internal, rt::nccl::kUniqueIdBytes);
  });
  ASSERT_EQ(synk::fork(3), 3);
  synk::run_on_all_ranks("nccl_id", "1");
  Array first = synk::get_value(0, m.var("id"));
  EXPECT_NE(to_vector<uint8_t>(first), std::vector<uint8_t>(rt::nccl::kUniqueIdBytes, 0));
  for (int r = 1; r < 3; ++r) EXPECT_EQ(synk::get_value(r, m.var("id")).bytes, first.bytes) << "rank " << r;
  synk::run_on_all_ranks("nccl_id", "2");
  EXPECT_NE(synk::get_value(2, m.var("id")).bytes, first.bytes) << "a new communicator gets a new id";
  synk::close();
}

TEST(Nccl, WithoutAGpuTheAlgorithmIsRefusedWithTheReason) {
  std::string why;
  if (rt::nccl::available_for(2, &why)) GTEST_SKIP() << "NCCL is available here; see the GPU test";
  rt::ModuleSpec spec;
  spec.shareds = {synk::testing::shared("v", DType::F32, {synk::testing::fixed(4)})};
  Module m = synk::module(spec);
  ASSERT_EQ(synk::fork(2), 2);
  try {
    synk::all_reduce(m.var("v"), "sum", {.algorithm = Algorithm::Nccl});
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce: algorithm nccl is not available here: " + why), std::string::npos)
        << e.what();
  }
  synk::all_reduce(m.var("v"), "sum");   // the group is untouched
  synk::close();
}

TEST(Nccl, AllReduceAndReduceOnGpusMatchSharedMemory) {
  std::string why;
  if (!rt::nccl::available_for(2, &why)) GTEST_SKIP() << "needs NCCL and two GPUs: " << why;
  rt::ModuleSpec spec;
  spec.shareds = {synk::testing::shared("a", DType::F32, {synk::testing::fixed(100'003)}),
                  synk::testing::shared("b", DType::I64, {synk::testing::fixed(17)})};
  Module m = synk::module(spec);
  ASSERT_EQ(synk::fork(2), 2);
  std::vector<std::vector<float>> a(2);
  std::vector<std::vector<int64_t>> b(2);
  for (int r = 0; r < 2; ++r) {
    a[size_t(r)] = synk::testing::random_values<float>(100'003);
    b[size_t(r)] = synk::testing::random_values<int64_t>(17, -1000, 1000);
  }
  auto reset = [&] {
    for (int r = 0; r < 2; ++r)
      synk::set_value(r, m.vars(), {ArrayRef{a[size_t(r)].data(), DType::F32, {100'003}},
                                    ArrayRef{b[size_t(r)].data(), DType::I64, {17}}});
  };
  for (const char* op : {"sum", "max", "min"}) {
    reset();
    synk::all_reduce(m.vars(), op, {.algorithm = Algorithm::Rsag});
    std::vector<Array> shm = synk::get_value(1, m.vars());
    reset();
    synk::all_reduce(m.vars(), op, {.algorithm = Algorithm::Nccl, .num_packs = 2});
    std::vector<Array> gpu = synk::get_value(1, m.vars());
    EXPECT_EQ(gpu[1].bytes, shm[1].bytes) << op;
    std::vector<float> x = to_vector<float>(gpu[0]), y = to_vector<float>(shm[0]);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-5f * std::abs(y[i]) + 1e-6f) << op << " " << i;
  }
  reset();
  Array avg = synk::reduce(m.var("a"), "avg", false, {.algorithm = Algorithm::Nccl});
  for (size_t i = 0; i < 100'003; i += 1000)
    EXPECT_NEAR(avg.data<float>()[i], (a[0][i] + a[1][i]) / 2, 1e-6f);
  synk::close();
}

}  // namespace
