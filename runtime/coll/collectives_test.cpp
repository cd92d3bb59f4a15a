// Multi-process tests of the collectives (real forks, 1 to 4 ranks): the seeds' shared-variable
// example end to end; every reduction op and dtype against an independent rank-order reduction
// (exact bits) and a float64 reference; determinism across runs and chunk sizes; packing; every
// copy collective with unequal shapes; staging that never grows; a rank failing inside a
// collective; and every usage error, raised before any worker moves.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "runtime/call/registry.h"
#include "runtime/coll/staging.h"
#include "runtime/group/process_group.h"
#include "synk/core.h"
#include "synk/synk.h"
#include "runtime/testing.h"

using namespace synk;
using namespace synk::testing;   // the runtime test helpers (runtime/testing.h)

namespace {


template <class F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<wrong exception type> ") + e.what();
  }
  return "<no error>";
}

template <class T>
std::vector<T> values_of(const Array& a) { return to_vector<T>(a); }

Array array_f32(std::vector<int64_t> shape, std::vector<float> v) { return synk::testing::make_array<float>(std::move(shape), v); }

// --- The seeds' shared-variable example (seeds 000, section 3) ------------------------------------

TEST(Collectives, SeedSharedVariableExample) {
  // f = function([x], updates=[(s, sum(x * s, axis=0))]), s = ones(2), x = [[1,1],[2,2],[3,3],[4,4]].
  rt::ModuleSpec spec;
  spec.shareds = {shared("s", DType::F32, {fixed(2)}, rt::InitSpec{rt::InitSpec::Kind::Ones})};
  Module m = synk::module(spec);
  Function f = synk::function(synk::testing::shared_example_function(), m);
  ASSERT_EQ(synk::fork(2), 2);
  Var s = m.var("s");
  Data x = synk::data<float>({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2}, {.name = "x"});
  std::vector<float> s_init = {1, 1};
  Array init = array_f32({2}, s_init);

  f.run_local({x});
  EXPECT_EQ(values_of<float>(m.get_value("s")), (std::vector<float>{10, 10})) << "the 'Theano call'";
  m.set_value("s", init.ref());
  f({x});
  EXPECT_EQ(values_of<float>(m.get_value("s")), (std::vector<float>{3, 3}));
  Array g = synk::gather(s, 1);
  EXPECT_EQ(g.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values_of<float>(g), (std::vector<float>{3, 3, 7, 7}));

  synk::reduce(s, "sum");
  EXPECT_EQ(values_of<float>(m.get_value("s")), (std::vector<float>{10, 10}));
  EXPECT_EQ(values_of<float>(synk::gather(s, 1)), (std::vector<float>{10, 10, 7, 7}));

  synk::broadcast(s, init);
  EXPECT_EQ(values_of<float>(synk::gather(s, 1)), (std::vector<float>{1, 1, 1, 1}));
  f({x});
  synk::all_reduce(s, "sum");
  EXPECT_EQ(values_of<float>(synk::gather(s, 1)), (std::vector<float>{10, 10, 10, 10}));
  synk::close();
  x = Data();
  EXPECT_TRUE(leftover_segments().empty());
}

// --- Reductions against independent references ---------------------------------------------------

template <class T>
T apply(Op op, T a, T b) {
  switch (op) {
    case Op::Avg:
    case Op::Sum:
      if constexpr (std::is_integral_v<T>) return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
      else return a + b;
    case Op::Prod:
      if constexpr (std::is_integral_v<T>) return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b));
      else return a * b;
    case Op::Max: return a < b ? b : a;
    case Op::Min: return b < a ? b : a;
  }
  return a;
}

// x[first] op x[first + 1] op ... op x[last - 1], element by element, left to right in T.
template <class T>
std::vector<T> fold(Op op, const std::vector<std::vector<T>>& x, size_t first, size_t last) {
  std::vector<T> out = x[first];
  for (size_t r = first + 1; r < last; ++r)
    for (size_t i = 0; i < out.size(); ++i) out[i] = apply(op, out[i], x[r][i]);
  return out;
}

// A fold of `ranks` ranks' values as the collective returns it: avg divides the sum, in T.
template <class T>
std::vector<T> finished(Op op, std::vector<T> folded, size_t ranks) {
  if constexpr (std::is_floating_point_v<T>)
    if (op == Op::Avg)
      for (T& v : folded) v = v / T(ranks);
  return folded;
}

// Rank order, left to right, in T (what rsag promises, bit for bit).
template <class T>
std::vector<T> rank_order(Op op, const std::vector<std::vector<T>>& x) {
  return finished(op, fold(op, x, 0, x.size()), x.size());
}

// Hierarchical copy's tree: groups of g consecutive ranks folded first, then the groups in order.
template <class T>
std::vector<T> tree_order(Op op, const std::vector<std::vector<T>>& x, int g) {
  std::vector<std::vector<T>> partials;
  for (size_t first = 0; first < x.size(); first += size_t(g))
    partials.push_back(fold(op, x, first, std::min(x.size(), first + size_t(g))));
  return finished(op, fold(op, partials, 0, partials.size()), x.size());
}

double reference64(Op op, const std::vector<double>& xs) {
  double acc = xs[0];
  for (size_t r = 1; r < xs.size(); ++r) {
    switch (op) {
      case Op::Avg:
      case Op::Sum: acc += xs[r]; break;
      case Op::Prod: acc *= xs[r]; break;
      case Op::Max: acc = std::max(acc, xs[r]); break;
      case Op::Min: acc = std::min(acc, xs[r]); break;
    }
  }
  return op == Op::Avg ? acc / double(xs.size()) : acc;
}

template <class T>
std::vector<T> random_of(size_t count) {
  if constexpr (std::is_floating_point_v<T>) return random_values<T>(count, 0.5, 1.5);   // prod stays tame
  else return random_values<T>(count, 0, std::is_same_v<T, uint8_t> ? 255 : 1000);
}

// Sets random values per rank, reduces, and checks every rank (all_reduce) or the master (reduce).
template <class T>
void check_reduction(int nranks, Op op, Algorithm algorithm, size_t count, CollectiveOptions options,
                     bool all, int expected_group = 0) {
  SCOPED_TRACE(fmt::format("{} ranks, op {}, {}, {} elements of {}, all={}", nranks, int(op),
                           algorithm_name(algorithm), count, rt::dtype_name(rt::dtype_v<T>), all));
  rt::ModuleSpec spec;
  spec.symbols = {"n"};
  spec.shareds = {shared("v", rt::dtype_v<T>, {sym(0)})};
  Module m = synk::module(spec);
  Var v = m.var("v");
  std::vector<std::vector<T>> x(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    x[size_t(r)] = random_of<T>(count);
    synk::set_value(r, v, ArrayRef{x[size_t(r)].data(), rt::dtype_v<T>, {int64_t(count)}});
  }
  options.algorithm = algorithm;
  std::vector<T> expected = algorithm == Algorithm::Hierarchical ? tree_order(op, x, expected_group) : rank_order(op, x);
  if (all) synk::all_reduce(v, op, options);
  else synk::reduce(v, op, true, options);
  for (int r = 0; r < nranks; ++r) {
    std::vector<T> got = values_of<T>(synk::get_value(r, v));
    if (all || r == 0) {
      ASSERT_EQ(got.size(), count);
      EXPECT_TRUE(std::memcmp(got.data(), expected.data(), count * sizeof(T)) == 0) << "rank " << r << " bits";
      if constexpr (std::is_floating_point_v<T>) {
        for (size_t i = 0; i < count; i += std::max<size_t>(1, count / 97)) {
          std::vector<double> xs;
          for (int q = 0; q < nranks; ++q) xs.push_back(double(x[size_t(q)][i]));
          double ref = reference64(op, xs);
          ASSERT_NEAR(double(got[i]), ref, 1e-5 * std::abs(ref) + 1e-6) << "element " << i;
        }
      }
    } else {
      EXPECT_EQ(got, x[size_t(r)]) << "reduce leaves workers unchanged";
    }
  }
}

TEST(Collectives, AllReduceEveryOpAndDtypeMatchesRankOrderBitForBit) {
  for (int n : {1, 2, 3, 4}) {
    ASSERT_EQ(synk::fork(n), n);
    for (Op op : {Op::Avg, Op::Sum, Op::Prod, Op::Max, Op::Min}) {
      // 1 to 8 floats (1 to 4 doubles) take the inline path (runtime/coll/inline_reduce.h).
      for (size_t count : {size_t(1), size_t(4), size_t(8), size_t(9), size_t(1000), size_t(70'001)}) {
        check_reduction<float>(n, op, Algorithm::Rsag, count, {}, true);
        check_reduction<double>(n, op, Algorithm::Rsag, count, {}, n != 3);
        if (op == Op::Avg) continue;
        check_reduction<int32_t>(n, op, Algorithm::Rsag, count, {}, true);
        check_reduction<int64_t>(n, op, Algorithm::Rsag, count, {}, false);
        check_reduction<uint8_t>(n, op, Algorithm::Rsag, count, {}, true);
      }
    }
    synk::close();
  }
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Collectives, ManyRoundsThroughASmallStagingArea) {
  // 64 KiB of staging over 4 ranks: slots of a few KiB, so a 1 MB variable takes hundreds of rounds.
  ASSERT_EQ(synk::fork(4, Backend::Cpu, {.collective_staging_bytes = 64 << 10}), 4);
  for (Op op : {Op::Sum, Op::Max, Op::Avg}) {
    check_reduction<float>(4, op, Algorithm::Rsag, 250'007, {}, true);
    check_reduction<float>(4, op, Algorithm::Rsag, 250'007, {.chunk_bytes = 192}, false);
    check_reduction<double>(4, op, Algorithm::Hierarchical, 100'003, {}, true, 2);
    check_reduction<float>(4, op, Algorithm::Hierarchical, 9'999, {.group_size = 3}, true, 3);
    check_reduction<float>(4, op, Algorithm::Hierarchical, 9'999, {.group_size = 4}, false, 4);
  }
  std::string staging;
  for (const std::string& name : leftover_segments())
    if (name.find("-coll-") != std::string::npos) staging = name;   // <group prefix>coll-<random>
  ASSERT_FALSE(staging.empty()) << "the staging segment exists";
  struct stat st {};
  ASSERT_EQ(stat(("/dev/shm/" + staging).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 64 << 10) << "the staging area never grows with the data";
  synk::close();
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Collectives, HierarchicalOnThreeAndFourRanks) {
  for (int n : {3, 4}) {
    ASSERT_EQ(synk::fork(n), n);
    for (Op op : {Op::Avg, Op::Sum, Op::Prod, Op::Max, Op::Min}) {
      check_reduction<float>(n, op, Algorithm::Hierarchical, 30'000, {}, true, 2);
      check_reduction<double>(n, op, Algorithm::Hierarchical, 77, {}, false, 2);
      if (op != Op::Avg) check_reduction<int32_t>(n, op, Algorithm::Hierarchical, 5000, {}, true, 2);
    }
    synk::close();
  }
}

TEST(Collectives, SameBitsEveryRunAndEveryChunking) {
  ASSERT_EQ(synk::fork(3), 3);
  rt::ModuleSpec spec;
  spec.shareds = {shared("w", DType::F32, {fixed(50'000)}), shared("b", DType::F32, {fixed(333)})};
  Module m = synk::module(spec);
  std::vector<std::vector<float>> w(3), b(3);
  for (int r = 0; r < 3; ++r) {
    w[size_t(r)] = random_values<float>(50'000, -1e3, 1e3);
    b[size_t(r)] = random_values<float>(333, -1e3, 1e3);
  }
  auto reset = [&] {
    for (int r = 0; r < 3; ++r)
      synk::set_value(r, {m.var("w"), m.var("b")},
                      {ArrayRef{w[size_t(r)].data(), DType::F32, {50'000}}, ArrayRef{b[size_t(r)].data(), DType::F32, {333}}});
  };
  std::vector<Array> first;
  for (CollectiveOptions o : std::vector<CollectiveOptions>{{}, {.num_packs = 3}, {.chunk_bytes = 4096},
                                                            {.num_packs = 7, .chunk_bytes = 640}, {}}) {
    reset();
    synk::all_reduce(m.vars(), "avg", o);
    std::vector<Array> now = {m.get_value(2, "w"), m.get_value(1, "b")};
    if (first.empty()) first = now;
    EXPECT_EQ(now[0].bytes, first[0].bytes);
    EXPECT_EQ(now[1].bytes, first[1].bytes);
    EXPECT_EQ(m.get_value(0, "w").bytes, now[0].bytes) << "every rank holds the same bits";
  }
  synk::close();
}

TEST(Collectives, PacksOfMixedDtypesAndReduceIntoNewArrays) {
  ASSERT_EQ(synk::fork(2), 2);
  rt::ModuleSpec spec;
  spec.symbols = {"k"};
  spec.shareds = {shared("a", DType::F32, {fixed(3)}), shared("n", DType::I64, {sym(0)}),
                  shared("c", DType::F32, {fixed(2), fixed(2)}), shared("flag", DType::Bool, {fixed(2)}),
                  shared("z", DType::F64, {fixed(0)})};
  Module m = synk::module(spec);
  synk::set_value(0, m.vars(), {array_f32({3}, {1, 2, 3}), synk::testing::make_array<int64_t>({2}, {5, -7}),
                                array_f32({2, 2}, {1, 1, 1, 1}), synk::testing::make_array<bool>({2}, {true, false}),
                                synk::testing::make_array<double>({0}, {})});
  synk::set_value(1, m.vars(), {array_f32({3}, {10, 20, 30}), synk::testing::make_array<int64_t>({2}, {1, 1}),
                                array_f32({2, 2}, {2, 3, 4, 5}), synk::testing::make_array<bool>({2}, {false, false}),
                                synk::testing::make_array<double>({0}, {})});
  std::vector<Array> r = synk::reduce(m.vars(), "max", false, {.num_packs = 2});
  EXPECT_EQ(values_of<float>(r[0]), (std::vector<float>{10, 20, 30}));
  EXPECT_EQ(values_of<int64_t>(r[1]), (std::vector<int64_t>{5, 1}));
  EXPECT_EQ(values_of<float>(r[2]), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(r[2].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values_of<bool>(r[3]), (std::vector<bool>{true, false}));
  EXPECT_EQ(r[4].shape, (std::vector<int64_t>{0}));
  EXPECT_EQ(values_of<float>(m.get_value("a")), (std::vector<float>{1, 2, 3})) << "in_place=false changes nothing";
  synk::all_reduce({m.var("flag")}, Op::Min);
  EXPECT_EQ(values_of<bool>(m.get_value(1, "flag")), (std::vector<bool>{false, false}));
  synk::all_reduce({m.var("a"), m.var("n"), m.var("c"), m.var("z")}, Op::Sum, {.num_packs = 4});
  EXPECT_EQ(values_of<float>(m.get_value(1, "a")), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(values_of<int64_t>(m.get_value(1, "n")), (std::vector<int64_t>{6, -6}));
  EXPECT_EQ(values_of<float>(m.get_value(0, "c")), (std::vector<float>{3, 4, 5, 6}));
  synk::close();
}

// --- Copies -------------------------------------------------------------------------------------

rt::ModuleSpec rows_module() {
  rt::ModuleSpec spec;
  spec.symbols = {"n", "m"};
  spec.shareds = {shared("rows", DType::F32, {sym(0), fixed(3)}), shared("ids", DType::I64, {sym(1)}),
                  shared("fixed4", DType::F32, {fixed(4)}), shared("scalar", DType::F64, {})};
  return spec;
}

TEST(Collectives, BroadcastScatterGatherAllGatherWithUnequalLengths) {
  Module m = synk::module(rows_module());
  Var rows = m.var("rows"), ids = m.var("ids");
  ASSERT_EQ(synk::fork(3), 3);
  // scatter 7 rows from a host array: ranks get 2, 2, 3 rows.
  std::vector<float> table(7 * 3);
  for (size_t i = 0; i < table.size(); ++i) table[i] = float(i);
  std::vector<int32_t> id_values = {100, 101, 102, 103, 104, 105, 106, 107, 108, 109};
  synk::scatter({rows, ids}, {ArrayRef{table.data(), DType::F32, {7, 3}}, ArrayRef{id_values.data(), DType::I32, {10}}});
  EXPECT_EQ(synk::get_lengths(rows), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(synk::get_lengths(ids), (std::vector<int64_t>{3, 3, 4}));
  EXPECT_EQ(synk::get_shapes(rows)[2], (std::vector<int64_t>{3, 3}));
  for (int r = 0; r < 3; ++r) {
    Array got = synk::get_value(r, rows);
    ASSERT_EQ(got.shape, synk::get_shapes(rows)[size_t(r)]) << "the record matches the rank";
    int64_t first = r * 7 / 3;
    for (int64_t i = 0; i < got.size(); ++i) EXPECT_EQ(got.data<float>()[i], float(first * 3 + i));
  }
  EXPECT_EQ(values_of<int64_t>(synk::get_value(2, ids)), (std::vector<int64_t>{106, 107, 108, 109})) << "i32 -> i64";
  // gather: nd_up = 0 concatenates exactly; nd_up = 1 needs equal shapes.
  Array all = synk::gather(rows, 0);
  EXPECT_EQ(all.shape, (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(values_of<float>(all), table);
  EXPECT_HAS(usage_error([&] { synk::gather(rows, 1); }),
             "gather: shared variable 'rows' has different shapes on different ranks (rank 0: [2, 3], rank 1: [2, 3], rank 2: [3, 3])");
  EXPECT_HAS(usage_error([&] { synk::all_reduce(rows, "sum"); }), "rank 2: [3, 3]");
  EXPECT_HAS(usage_error([&] { synk::reduce(rows, "sum"); }), "reduce needs equal shapes");
  // all_gather: every rank ends with all rows, in rank order.
  synk::all_gather({ids, rows});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(values_of<float>(synk::get_value(r, rows)), table) << "rank " << r;
    EXPECT_EQ(synk::get_value(r, ids).shape, (std::vector<int64_t>{10}));
  }
  EXPECT_EQ(synk::get_lengths(rows), (std::vector<int64_t>{7, 7, 7}));
  // scatter from a Data with a batch list (duplicates allowed), then broadcast the master's value.
  Data source = synk::data<float>(table, {7, 3}, {.name = "table"});
  synk::scatter(rows, source, std::vector<int64_t>{6, 0, 6, 1});
  EXPECT_EQ(synk::get_lengths(rows), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(values_of<float>(synk::get_value(2, rows)), (std::vector<float>{18, 19, 20, 3, 4, 5}));
  EXPECT_EQ(values_of<float>(synk::gather(rows, 0)), (std::vector<float>{18, 19, 20, 0, 1, 2, 18, 19, 20, 3, 4, 5}));
  synk::scatter(rows, source, Range{1, 3});
  EXPECT_EQ(synk::get_lengths(rows), (std::vector<int64_t>{0, 1, 1}));
  synk::broadcast(rows);
  EXPECT_EQ(synk::get_lengths(rows), (std::vector<int64_t>{0, 0, 0}));
  synk::broadcast(rows, source);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(values_of<float>(synk::get_value(r, rows)), table);
  Array g = synk::gather(rows, 1);
  EXPECT_EQ(g.shape, (std::vector<int64_t>{3, 7, 3}));
  // set_value / get_value on several variables at once, the master's included.
  synk::set_value(1, {m.var("scalar"), ids}, {synk::testing::make_array<double>({}, {2.5}),
                                              synk::testing::make_array<int64_t>({2}, {9, 8})});
  std::vector<Array> got = synk::get_value(1, {ids, m.var("scalar")});
  EXPECT_EQ(values_of<int64_t>(got[0]), (std::vector<int64_t>{9, 8}));
  EXPECT_EQ(values_of<double>(got[1]), (std::vector<double>{2.5}));
  synk::set_value(0, m.var("scalar"), synk::testing::make_array<double>({}, {-1}));
  EXPECT_EQ(values_of<double>(m.get_value("scalar")), (std::vector<double>{-1}));
  EXPECT_EQ(synk::get_lengths(ids), (std::vector<int64_t>{10, 2, 10}));
  synk::close();
  source = Data();
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Collectives, LargeCopiesInChunks) {
  rt::ModuleSpec spec;
  spec.symbols = {"n"};
  spec.shareds = {shared("big", DType::F64, {sym(0)})};
  Module m = synk::module(spec);
  Var big = m.var("big");
  ASSERT_EQ(synk::fork(4, Backend::Cpu, {.collective_staging_bytes = 64 << 10}), 4);
  std::vector<double> x = random_values<double>(300'001);
  ArrayRef ref{x.data(), DType::F64, {int64_t(x.size())}};
  synk::broadcast(big, ref);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(values_of<double>(synk::get_value(r, big)), x);
  synk::scatter(big, ref);
  EXPECT_EQ(values_of<double>(synk::gather(big, 0)), x);
  synk::all_gather(big);
  EXPECT_EQ(values_of<double>(synk::get_value(3, big)), x);
  synk::set_value(2, big, ArrayRef{x.data(), DType::F64, {12345}});
  EXPECT_EQ(synk::get_value(2, big).size(), 12345);
  synk::close();
}

TEST(Collectives, ARankThatFailsInsideACollectiveFailsItEverywhereAndTheGroupStaysUsable) {
  Module m = synk::module(rows_module());
  int32_t module_id = m.id();
  // Test hook: resize a worker's value behind the master's back, so its record is stale there.
  synk::register_rank_handler("corrupt_rows", [module_id](rt::RankContext& ctx, std::string_view payload) {
    if (ctx.rank() == std::stoi(std::string(payload))) rt::module_on_rank(ctx, module_id).values[0].resize(DType::F32, {5, 3});
  });
  synk::register_rank_handler("corrupt_fixed4", [module_id](rt::RankContext& ctx, std::string_view payload) {
    if (ctx.rank() == std::stoi(std::string(payload))) rt::module_on_rank(ctx, module_id).values[2].resize(DType::F32, {5});
  });
  ASSERT_EQ(synk::fork(4), 4);
  for (int victim : {2, 1}) {
    synk::run_on_all_ranks("corrupt_rows", std::to_string(victim));
    try {
      synk::all_reduce({m.var("fixed4"), m.var("rows")}, "sum", {.chunk_bytes = 64});
      ADD_FAILURE() << "expected a RankError";
    } catch (const RankError& e) {
      EXPECT_HAS(e.what(), "all_reduce failed on rank " + std::to_string(victim) + ": all_reduce: shared variable 'rows' on rank " +
                               std::to_string(victim) + " has shape [5, 3], but the master recorded [0, 3]");
      EXPECT_EQ(e.ranks(), std::vector<int>{victim}) << "ranks that only abandoned are not blamed";
      EXPECT_FALSE(e.group_lost());
    }
    synk::set_value(victim, m.var("rows"), array_f32({0, 3}, {}));
    synk::all_reduce(m.var("fixed4"), "sum");   // still usable
  }
  // The same on the inline path (one variable of 16 bytes): the other workers abandon it instead
  // of waiting for the victim's value, and no rank's value changes.
  for (int r = 0; r < 4; ++r) synk::set_value(r, m.var("fixed4"), array_f32({4}, {1, 2, 3, float(r)}));
  synk::run_on_all_ranks("corrupt_fixed4", "3");
  try {
    synk::all_reduce(m.var("fixed4"), "sum");
    ADD_FAILURE() << "expected a RankError";
  } catch (const RankError& e) {
    EXPECT_HAS(e.what(), "all_reduce failed on rank 3: all_reduce: shared variable 'fixed4' on rank 3 holds 5 f32 "
                         "values, but the master recorded 4 f32");
    EXPECT_EQ(e.ranks(), std::vector<int>{3});
  }
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(values_of<float>(synk::get_value(r, m.var("fixed4"))), (std::vector<float>{1, 2, 3, float(r)}));
  synk::set_value(3, m.var("fixed4"), array_f32({4}, {1, 2, 3, 3}));
  synk::all_reduce(m.var("fixed4"), "sum");
  EXPECT_EQ(values_of<float>(synk::get_value(2, m.var("fixed4"))), (std::vector<float>{4, 8, 12, 6}));
  // A small broadcast takes the inline path too, when every worker holds the master's shape.
  synk::broadcast(m.var("fixed4"), array_f32({4}, {9, 8, 7, 6}));
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(values_of<float>(synk::get_value(r, m.var("fixed4"))), (std::vector<float>{9, 8, 7, 6})) << "rank " << r;
  synk::run_on_all_ranks("corrupt_fixed4", "1");
  try {
    synk::broadcast(m.var("fixed4"));
    ADD_FAILURE() << "expected a RankError";
  } catch (const RankError& e) {
    EXPECT_HAS(e.what(), "broadcast failed on rank 1: broadcast: shared variable 'fixed4' on rank 1 holds 5 f32 values, "
                         "but the master recorded 4 f32");
    EXPECT_EQ(e.ranks(), std::vector<int>{1});
  }
  EXPECT_EQ(values_of<float>(synk::get_value(2, m.var("fixed4"))), (std::vector<float>{9, 8, 7, 6}));
  synk::close();
}

// --- Usage errors: caught on the master before any worker moves ----------------------------------

TEST(Collectives, UsageErrorsNameTheArgument) {
  Module m = synk::module(rows_module());
  Var rows = m.var("rows"), ids = m.var("ids"), fixed4 = m.var("fixed4"), scalar = m.var("scalar");
  EXPECT_HAS(usage_error([&] { synk::all_reduce(fixed4); }), "all_reduce: no process group is running; call synk::fork() first");
  EXPECT_HAS(usage_error([&] { synk::fork(2, Backend::Cpu, {.collective_staging_bytes = 1000}); }),
             "fork: collective_staging_bytes must be at least 65536 for 2 ranks, received 1000");
  EXPECT_HAS(usage_error([&] { synk::fork(300, Backend::Cpu, {.collective_staging_bytes = 65536}); }),
             "fork: collective_staging_bytes must be at least 174592 for 300 ranks");
  EXPECT_HAS(usage_error([&] { synk::fork(2, Backend::Cpu, {.call_timeout_s = -1}); }), "fork: call_timeout_s must be a finite number >= 0");
  EXPECT_EQ(synk::get_lengths(rows), (std::vector<int64_t>{0})) << "shapes need no group (one rank)";
  ASSERT_EQ(synk::fork(2), 2);
  EXPECT_HAS(usage_error([&] { synk::all_reduce(fixed4, "mean"); }),
             "all_reduce: op must be one of avg, sum, prod, max, min; received 'mean'");
  EXPECT_HAS(usage_error([&] { synk::all_reduce(ids, "avg"); }),
             "all_reduce: op 'avg' cannot reduce shared variable 'ids' (i64): avg is only defined for floating-point");
  EXPECT_HAS(usage_error([&] { synk::all_reduce(fixed4, "sum", {.num_packs = 0}); }), "all_reduce: num_packs must be >= 1, received 0");
  EXPECT_HAS(usage_error([&] { synk::reduce(fixed4, "sum", true, {.num_packs = -3}); }), "reduce: num_packs must be >= 1, received -3");
  EXPECT_HAS(usage_error([&] { synk::all_reduce(fixed4, "sum", {.chunk_bytes = 8}); }), "chunk_bytes must be 0 (automatic) or at least 64");
  EXPECT_HAS(usage_error([&] { synk::all_reduce({fixed4, rows, fixed4}); }),
             "all_reduce: shared variable 'fixed4' appears more than once in vars");
  EXPECT_HAS(usage_error([&] { synk::all_reduce(std::vector<Var>{}); }), "all_reduce: vars is empty");
  EXPECT_HAS(usage_error([&] { synk::broadcast(Var()); }), "broadcast: vars[0] is an empty synk::Var handle");
  EXPECT_HAS(usage_error([&] { synk::gather(fixed4, 2); }), "gather: nd_up must be 0");
  EXPECT_HAS(usage_error([&] { synk::gather(scalar, 0); }), "gather with nd_up=0: shared variable 'scalar' is a scalar");
  EXPECT_HAS(usage_error([&] { synk::all_gather(scalar); }), "all_gather: shared variable 'scalar' is a scalar");
  EXPECT_HAS(usage_error([&] { synk::all_gather(fixed4); }),
             "all_gather: shared variable 'fixed4' declares axis 0 as 4 (f32[4]), but rank 0 would hold 8 rows");
  EXPECT_HAS(usage_error([&] { synk::get_value(2, fixed4); }), "get_value: rank must be in [0, 2), received 2");
  EXPECT_HAS(usage_error([&] { synk::set_value(-1, fixed4, array_f32({4}, {1, 2, 3, 4})); }), "set_value: rank must be in [0, 2), received -1");
  EXPECT_HAS(usage_error([&] { synk::set_value(1, {fixed4, rows}, array_f32({4}, {1, 2, 3, 4})); }),
             "set_value: expected 2 values (one per variable in vars), received 1");
  EXPECT_HAS(usage_error([&] { synk::set_value(1, fixed4, array_f32({3}, {1, 2, 3})); }),
             "set_value: values[0] for shared variable 'fixed4': expected shape f32[4], received [3]");
  EXPECT_HAS(usage_error([&] { synk::broadcast(ids, array_f32({2}, {1, 2})); }),
             "broadcast: values[0] for shared variable 'ids': expected dtype i64");
  std::vector<float> t(12);
  EXPECT_HAS(usage_error([&] { synk::scatter(fixed4, ArrayRef{t.data(), DType::F32, {12}}); }),
             "scatter: shared variable 'fixed4' declares axis 0 as 4 (f32[4]), but rank 0 would hold 6 rows");
  EXPECT_HAS(usage_error([&] { synk::scatter(scalar, ArrayRef{t.data(), DType::F64, {}}); }),
             "scatter: shared variable 'scalar' is a scalar; scatter splits axis 0");
  EXPECT_HAS(usage_error([&] { synk::scatter(rows, ArrayRef{t.data(), DType::F32, {3, 4}}); }),
             "scatter: values[0] for shared variable 'rows': expected shape f32[n, 3], received [3, 4]");
  EXPECT_HAS(usage_error([&] { synk::scatter(rows, ArrayRef{t.data(), DType::F32, {4, 3}}, std::vector<int64_t>{0, 4}); }),
             "scatter: batch (for values[0]): index 4 at position 1 is out of range for 4 rows");
  EXPECT_HAS(usage_error([&] { synk::scatter(rows, ArrayRef{t.data(), DType::F32, {4, 3}}, Range{3, 9}); }),
             "range [3, 9) is not within [0, 4]");
  EXPECT_HAS(usage_error([&] { synk::all_reduce(fixed4, "sum", {.algorithm = Algorithm::Nccl}); }),
             "all_reduce: algorithm nccl is not available here: ");
  EXPECT_HAS(usage_error([&] { synk::get_lengths(scalar); }), "get_lengths: shared variable 'scalar' is a scalar");
  EXPECT_HAS(usage_error([&] { synk::set_collective_defaults({.num_packs = 0}); }),
             "set_collective_defaults: num_packs must be >= 1, received 0");
  // Nothing moved: every value is still the initial one, and the group works.
  EXPECT_EQ(synk::get_lengths(rows), (std::vector<int64_t>{0, 0}));
  synk::set_collective_defaults({.algorithm = Algorithm::Hierarchical, .num_packs = 2});
  EXPECT_EQ(collective_defaults().num_packs, 2);
  synk::all_reduce(fixed4, Op::Sum);
  synk::set_collective_defaults({.algorithm = Algorithm::Auto, .num_packs = 1});
  synk::close();
}

}  // namespace

// --- A rank that leaves without arriving ----------------------------------------------------------

namespace {
// Payload "<victim> <staging segment>": every rank but the victim meets the others at two staging
// barriers; the victim ends the command at once, without failing the collective (as a worker that
// cannot decode the descriptor or map the staging area would).
void two_barriers_unless_victim(rt::RankContext& ctx, std::string_view payload) {
  const size_t space = payload.find(' ');
  if (ctx.rank() == std::stoi(std::string(payload.substr(0, space)))) return;
  std::span<std::byte> segment = ctx.map_writable(std::string(payload.substr(space + 1)));
  rt::Staging staging(ctx, segment.data(), segment.size());
  staging.barrier();
  staging.barrier();
}
const rt::CommandKind kTwoBarriers = rt::register_command("two barriers", two_barriers_unless_victim);
}  // namespace

TEST(Collectives, ARankThatLeavesWithoutArrivingIsNotWaitedFor) {
  rt::ModuleSpec spec;
  spec.shareds = {shared("v", DType::F32, {fixed(100)})};
  Module m = synk::module(spec);
  ASSERT_EQ(synk::fork(4), 4);
  rt::ProcessGroup& g = *current_group();
  for (int victim : {2, 0, 3}) {
    SCOPED_TRACE(fmt::format("victim {}", victim));
    rt::shm::Segment& segment = g.collective_staging();
    rt::Staging::reset(segment.bytes(), g.size());
    const std::string payload = fmt::format("{} {}", victim, segment.name());
    const std::vector<std::string>& errors =
        g.run(kTwoBarriers, payload, [&] { two_barriers_unless_victim(g.master_context(), payload); });
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(errors[size_t(r)], r == victim ? "" : fmt::format("collective abandoned because rank {} failed", victim))
          << "rank " << r;
    // The next collective starts with every rank's barrier count cleared.
    for (int r = 0; r < 4; ++r) synk::set_value(r, m.var("v"), array_f32({100}, std::vector<float>(100, float(r))));
    synk::all_reduce(m.var("v"), "sum");
    EXPECT_EQ(values_of<float>(synk::get_value(3, m.var("v")))[99], 6.0f);
  }
  synk::close();
  EXPECT_TRUE(leftover_segments().empty());
}
