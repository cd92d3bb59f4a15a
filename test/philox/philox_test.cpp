// Tests of philox.h: the generator against Random123's known answers, the mapping and the
// fixed-point Box-Muller against the golden values of reference_model.py (a second, independent
// implementation), the distributions' statistics with fixed seeds, the independence of rows, salts
// and steps, the rank-split invariance synk relies on, and bit-identity with the two other
// settings the header is compiled in: the freestanding CPU-kernel build (objects linked in by the
// Makefile) and NVRTC (compiled to PTX here and assembled with ptxas; no GPU is needed).
#include <gtest/gtest.h>
#ifndef PHILOX_NO_NVRTC
#include <nvrtc.h>
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "philox.h"
#include "fs_abi.h"

#define FILL_FN static inline
#define FILL_LOOP(e) for (uint64_t e = 0; e < cols; ++e)
#include "fill_rows.h"

// The freestanding builds of fill_row (freestanding_kernels.cpp, two sets of flags).
extern "C" void fs_o2(const FsRequest* rq, const void* x, void* out);
extern "C" void fs_fast(const FsRequest* rq, const void* x, void* out);

#ifndef PHILOX_HEADER
#define PHILOX_HEADER "philox.h"
#endif
#ifndef PHILOX_SOURCE_DIR
#define PHILOX_SOURCE_DIR "."
#endif
#ifndef PTXAS
#define PTXAS "/usr/local/cuda/bin/ptxas"
#endif

namespace {

uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }
uint64_t bits(double v) { return std::bit_cast<uint64_t>(v); }

synk_rng_u32x4 u4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {{a, b, c, d}}; }

// 10^6 words of one fixed stream: 1000 rows of 1000 elements.
std::vector<uint32_t> fixed_words(uint64_t seed) {
  const synk_rng_stream s = synk_rng_make_stream(seed, 0, 0);
  std::vector<uint32_t> w;
  w.reserve(1000000);
  for (uint64_t row = 0; row < 1000; ++row)
    for (uint64_t b = 0; b < 250; ++b) {
      const synk_rng_u32x4 v = synk_rng_block(s, row, b);
      w.insert(w.end(), v.v, v.v + 4);
    }
  return w;
}

// Pearson's chi-square of counts against equal expectations.
double chi_square(const std::vector<double>& counts, double n) {
  const double expected = n / counts.size();
  double chi2 = 0;
  for (double c : counts) chi2 += (c - expected) * (c - expected) / expected;
  return chi2;
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double normal_quantile(double p) {   // bisection: slow but obviously right
  double lo = -10, hi = 10;
  for (int i = 0; i < 200; ++i) (normal_cdf((lo + hi) / 2) < p ? lo : hi) = (lo + hi) / 2;
  return (lo + hi) / 2;
}

std::vector<float> fixed_normals_f32(size_t n) {
  const synk_rng_stream s = synk_rng_make_stream(777, 3, 9);
  std::vector<float> z;
  z.reserve(n);
  for (uint64_t b = 0; z.size() < n; ++b) {
    const synk_rng_u32x4 w = synk_rng_block(s, 0, b);
    const synk_rng_f32x2 a = synk_rng_normal2_f32(w.v[0], w.v[1]), c = synk_rng_normal2_f32(w.v[2], w.v[3]);
    z.insert(z.end(), {a.v[0], a.v[1], c.v[0], c.v[1]});
  }
  z.resize(n);
  return z;
}

double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += a[i], mb += b[i];
  ma /= a.size(), mb /= b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

// ---- The generator ---------------------------------------------------------------------------

// Random123 tests/kat_vectors, lines 24-29 (github.com/DEShawResearch/random123 at 9545ff64):
// "philox4x32 R ctr[4] key[2] expected[4]".
TEST(PhiloxKat, Random123Vectors) {
  struct Kat { int rounds; synk_rng_u32x4 ctr; synk_rng_u32x2 key; synk_rng_u32x4 want; };
  const synk_rng_u32x4 pi_ctr = u4(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344);
  const synk_rng_u32x2 pi_key = {{0xa4093822, 0x299f31d0}};
  const Kat kats[] = {
      {7, u4(0, 0, 0, 0), {{0, 0}}, u4(0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48)},
      {7, u4(~0u, ~0u, ~0u, ~0u), {{~0u, ~0u}}, u4(0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662)},
      {7, pi_ctr, pi_key, u4(0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a)},
      {10, u4(0, 0, 0, 0), {{0, 0}}, u4(0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)},
      {10, u4(~0u, ~0u, ~0u, ~0u), {{~0u, ~0u}}, u4(0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)},
      {10, pi_ctr, pi_key, u4(0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)},
  };
  for (const Kat& k : kats) {
    const synk_rng_u32x4 got = k.rounds == 10 ? synk_philox4x32_10(k.ctr, k.key)
                                              : synk_philox4x32_rounds(k.ctr, k.key, k.rounds);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], k.want.v[i]) << "rounds " << k.rounds << " word " << i;
  }
}

// ---- Golden values from reference_model.py ----------------------------------------------------

TEST(PhiloxGolden, NormalMatchesReferenceModel) {
  struct G { uint32_t u1, u2, z0, z1; uint64_t d0, d1; };
  const G golden[] = {   // python3 reference_model.py golden
      {0x00000000u, 0x00000000u, 0x40D87047u, 0x00000000u, 0x401B0E08D9986A8Dull, 0x0000000000000000ull},
      {0xFFFFFFFFu, 0x40000000u, 0x00000000u, 0x37800000u, 0x0000000000000000ull, 0x3EF0000000000000ull},
      {0x80000000u, 0x20000000u, 0x3F55224Cu, 0x3F55224Cu, 0x3FEAA449914F7C7Eull, 0x3FEAA449914F7C7Eull},
      {0x12345678u, 0x9ABCDEF0u, 0xBFE92F38u, 0xBFB39381u, 0xBFFD25E6F377C772ull, 0xBFF672701D867A76ull},
      {0xB504F333u, 0xE0000001u, 0x3F16B55Fu, 0xBF16B55Fu, 0x3FE2D6ABE4C9E5C2ull, 0xBFE2D6ABE3F4C375ull},
      {0x00000001u, 0xFFFFFFFFu, 0x40D32D4Cu, 0xB21E61F9u, 0x401A65A983847427ull, 0xBE43CC3F22A3571Dull},
      {0x7FFFFFFFu, 0x60000000u, 0xBF55224Cu, 0x3F55224Cu, 0xBFEAA4499175EC15ull, 0x3FEAA4499175EC15ull},
  };
  for (const G& g : golden) {
    const synk_rng_f32x2 f = synk_rng_normal2_f32(g.u1, g.u2);
    const synk_rng_f64x2 d = synk_rng_normal2_f64(g.u1, g.u2);
    EXPECT_EQ(bits(f.v[0]), g.z0) << std::hex << g.u1 << " " << g.u2;
    EXPECT_EQ(bits(f.v[1]), g.z1) << std::hex << g.u1 << " " << g.u2;
    EXPECT_EQ(bits(d.v[0]), g.d0) << std::hex << g.u1 << " " << g.u2;
    EXPECT_EQ(bits(d.v[1]), g.d1) << std::hex << g.u1 << " " << g.u2;
  }
}

TEST(PhiloxGolden, BlocksMatchReferenceModel) {
  const uint64_t seed = 0x0123456789ABCDEFull;
  const synk_rng_u32x4 want[] = {   // python3 reference_model.py golden
      u4(0x2B070DDCu, 0x192FF5CBu, 0xA0E8F17Bu, 0xE68543C9u),
      u4(0xBB4F9409u, 0xCC41C238u, 0x20253E57u, 0x4C4AB33Bu),
      u4(0x4E11A91Au, 0xE9854ADCu, 0xC6EE25F6u, 0x4466DAF5u),
  };
  const synk_rng_u32x4 got[] = {
      synk_rng_block(synk_rng_make_stream(seed, 7, 3), 5, 0),
      synk_rng_block(synk_rng_make_stream(seed, 7, 3), 5, 1),
      synk_rng_block(synk_rng_make_stream(seed, 7, (1ull << 47) + 3), (1ull << 39) + 5, (1ull << 39) + 1),
  };
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[b].v[i], want[b].v[i]) << "block " << b << " word " << i;
}

// ---- The mapping ------------------------------------------------------------------------------

TEST(Mapping, CounterAndKeyAreAsDocumented) {
  const synk_rng_stream s = synk_rng_make_stream(0x1111222233334444ull, 0, 0x0000ABCD12345678ull);
  EXPECT_EQ(s.key.v[0], 0x33334444u);   // salt 0 leaves the seed as it is
  EXPECT_EQ(s.key.v[1], 0x11112222u);
  const synk_rng_u32x4 c = synk_rng_counter(s, 0x1287654321ull, 0x340000FFFFull);
  EXPECT_EQ(c.v[0], 0x0000FFFFu);
  EXPECT_EQ(c.v[1], 0x87654321u);
  EXPECT_EQ(c.v[2], 0x12345678u);
  EXPECT_EQ(c.v[3], 0x34u | 0x12u << 8 | 0xABCDu << 16);
  const synk_rng_stream salted = synk_rng_make_stream(0x1111222233334444ull, 5, 0);
  const uint64_t key = 0x1111222233334444ull ^ (5 * 0x9E3779B97F4A7C15ull);
  EXPECT_EQ(salted.key.v[0], (uint32_t)key);
  EXPECT_EQ(salted.key.v[1], (uint32_t)(key >> 32));
}

TEST(Mapping, DistinctWithinLimitsAliasBeyond) {
  const uint64_t edges40[] = {0, 1, 0xFFFFFFFFull, 1ull << 32, (1ull << 40) - 1, 0x5500000000ull};
  const uint64_t edges48[] = {0, 1, 0xFFFFFFFFull, 1ull << 32, (1ull << 48) - 1, 0x550000000000ull};
  std::set<std::vector<uint32_t>> seen;
  size_t n = 0;
  for (uint64_t step : edges48)
    for (uint64_t row : edges40)
      for (uint64_t block : edges40) {
        const synk_rng_u32x4 c = synk_rng_counter(synk_rng_make_stream(9, 0, step), row, block);
        seen.insert({c.v[0], c.v[1], c.v[2], c.v[3]});
        ++n;
      }
  EXPECT_EQ(seen.size(), n);
  // The documented limits are real: the next bit up is dropped.
  const synk_rng_stream s = synk_rng_make_stream(9, 0, 3);
  EXPECT_EQ(synk_rng_block(s, 1ull << 40, 2).v[0], synk_rng_block(s, 0, 2).v[0]);
  EXPECT_EQ(synk_rng_block(s, 4, 1ull << 40).v[0], synk_rng_block(s, 4, 0).v[0]);
  EXPECT_EQ(synk_rng_block(synk_rng_make_stream(9, 0, 1ull << 48), 4, 2).v[0], synk_rng_block(synk_rng_make_stream(9, 0, 0), 4, 2).v[0]);
}

TEST(Mapping, SaltsGiveDistinctKeys) {
  std::set<uint64_t> keys;
  for (uint32_t salt = 0; salt < 100000; ++salt) {
    const synk_rng_stream s = synk_rng_make_stream(42, salt, 0);
    keys.insert((uint64_t)s.key.v[1] << 32 | s.key.v[0]);
  }
  EXPECT_EQ(keys.size(), 100000u);
}

TEST(Mapping, ElementFunctionsUseTheDocumentedWords) {
  const synk_rng_stream s = synk_rng_make_stream(5, 1, 2);
  for (uint64_t e = 0; e < 64; ++e) {
    const synk_rng_u32x4 w = synk_rng_block(s, 17, e / 4);
    EXPECT_EQ(synk_rng_bits(s, 17, e), w.v[e % 4]);
    const synk_rng_f32x2 z = synk_rng_normal2_f32(w.v[e % 4 / 2 * 2], w.v[e % 4 / 2 * 2 + 1]);
    EXPECT_EQ(bits(synk_rng_normal_at_f32(s, 17, e, 0.0f, 1.0f)), bits(z.v[e % 2]));
    const synk_rng_u32x4 w2 = synk_rng_block(s, 17, e / 2);
    EXPECT_EQ(bits(synk_rng_uniform_at_f64(s, 17, e, 0.0, 1.0)),
              bits(synk_rng_uniform01_f64(w2.v[e % 2 * 2], w2.v[e % 2 * 2 + 1])));
  }
}

// ---- Uniform ------------------------------------------------------------------------------------

TEST(Uniform, F32ChiSquare) {
  std::vector<double> counts(100);
  for (uint32_t w : fixed_words(12345)) {
    const float u = synk_rng_uniform01_f32(w);
    ASSERT_TRUE(u >= 0.0f && u < 1.0f);
    ASSERT_EQ(u * 16777216.0f, std::floor(u * 16777216.0f));   // on the 2^-24 grid
    counts[(size_t)(u * 100)] += 1;
  }
  const double chi2 = chi_square(counts, 1e6);
  RecordProperty("chi2", std::to_string(chi2));
  EXPECT_LT(chi2, 148.2);   // 99 degrees of freedom, 0.001 level
}

TEST(Uniform, F64ChiSquare) {
  const std::vector<uint32_t> w = fixed_words(54321);
  std::vector<double> counts(100);
  for (size_t i = 0; i + 1 < w.size(); i += 2) {
    const double u = synk_rng_uniform01_f64(w[i], w[i + 1]);
    ASSERT_TRUE(u >= 0.0 && u < 1.0);
    counts[(size_t)(u * 100)] += 1;
  }
  const double chi2 = chi_square(counts, 5e5);
  RecordProperty("chi2", std::to_string(chi2));
  EXPECT_LT(chi2, 148.2);
}

TEST(Uniform, RangeIsHalfOpenEvenWhereTheSumRoundsUp) {
  // u = 1 - 2^-24: 1000 + (1 - 2^-24) rounds to 1001 in float; the result must stay below.
  EXPECT_EQ(synk_rng_uniform_f32(0xFFFFFFFFu, 1000.0f, 1001.0f), std::nextafter(1001.0f, 0.0f));
  // -1e-38 (1 - u) underflows to -0 here, which is high itself.
  EXPECT_EQ(synk_rng_uniform_f32(0xFFFFFFFFu, -1e-38f, 0.0f), -std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(synk_rng_uniform_f64(~0u, ~0u, 1e6, 1e6 + 1), std::nextafter(1e6 + 1, 0.0));
  EXPECT_EQ(synk_rng_uniform_f32(0, -3.0f, 5.0f), -3.0f);
  float lo = 10, hi = -10;
  for (uint32_t w : fixed_words(7)) {
    const float v = synk_rng_uniform_f32(w, -3.0f, 5.0f);
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -3.0f);
  EXPECT_LT(hi, 5.0f);
  EXPECT_LT(lo, -2.99f);
  EXPECT_GT(hi, 4.99f);
}

// ---- Normal ---------------------------------------------------------------------------------------

TEST(Normal, MeanAndVariance) {
  const std::vector<float> z = fixed_normals_f32(1000000);
  double sum = 0, sum2 = 0;
  for (float v : z) sum += v, sum2 += (double)v * v;
  const double mean = sum / z.size(), var = sum2 / z.size() - mean * mean;
  RecordProperty("mean", std::to_string(mean));
  RecordProperty("var", std::to_string(var));
  EXPECT_LT(std::fabs(mean), 5e-3);
  EXPECT_LT(std::fabs(var - 1), 1e-2);
  // f64: the same pairs, so the same moments to ~1e-7.
  const synk_rng_stream s = synk_rng_make_stream(777, 3, 9);
  double sum64 = 0;
  for (uint64_t b = 0; b < 250000; ++b) {
    const synk_rng_u32x4 w = synk_rng_block(s, 0, b);
    const synk_rng_f64x2 a = synk_rng_normal2_f64(w.v[0], w.v[1]), c = synk_rng_normal2_f64(w.v[2], w.v[3]);
    sum64 += a.v[0] + a.v[1] + c.v[0] + c.v[1];
  }
  EXPECT_NEAR(sum64 / 1e6, mean, 1e-7);
}

TEST(Normal, ChiSquareOverEquiprobableBins) {
  std::vector<double> edges;
  for (int k = 1; k < 20; ++k) edges.push_back(normal_quantile(k / 20.0));
  std::vector<double> counts(20);
  for (float v : fixed_normals_f32(1000000))
    counts[std::upper_bound(edges.begin(), edges.end(), (double)v) - edges.begin()] += 1;
  const double chi2 = chi_square(counts, 1e6);
  RecordProperty("chi2", std::to_string(chi2));
  EXPECT_LT(chi2, 43.82);   // 19 degrees of freedom, 0.001 level
}

TEST(Normal, KolmogorovSmirnov) {
  std::vector<float> z = fixed_normals_f32(1000000);
  std::sort(z.begin(), z.end());
  double d = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double f = normal_cdf(z[i]);
    d = std::max({d, f - (double)i / z.size(), (double)(i + 1) / z.size() - f});
  }
  RecordProperty("sqrt_n_D", std::to_string(d * std::sqrt((double)z.size())));
  EXPECT_LT(d * std::sqrt((double)z.size()), 1.949);   // 0.001 level
}

// Against long-double libm. f32: four roundings (radius^2, sqrt, cosine, product), each half an ulp
// of its own value, add up to at most 3 ulp of the result (2.25 seen), plus the fixed point's
// absolute error (5.6e-10 in the angle, times the radius). f64: within the fixed point's error.
TEST(Normal, FixedPointCoreIsAccurate) {
  std::vector<std::pair<uint32_t, uint32_t>> inputs = {{0, 0}, {~0u, 1u << 30}, {~0u - 1000, 12345},
                                                       {1, ~0u}, {1u << 31, 1u << 29}, {0xB504F333u, 3u << 30}};
  for (uint32_t w : fixed_words(99)) inputs.push_back({w, w * 2654435761u});
  double worst32 = 0, worst64 = 0;
  for (auto [u1, u2] : inputs) {
    const long double x = 2.0L * u1 + 1, one_minus = (8589934592.0L - x) / 8589934592.0L;
    const long double r = std::sqrt(-2 * std::log1p(-one_minus));
    const long double th = 2 * 3.14159265358979323846264338327950288L * u2 / 4294967296.0L;
    const long double want[2] = {r * std::cos(th), r * std::sin(th)};
    const synk_rng_f32x2 f = synk_rng_normal2_f32(u1, u2);
    const synk_rng_f64x2 d = synk_rng_normal2_f64(u1, u2);
    for (int i = 0; i < 2; ++i) {
      const double ulp = std::nextafter(std::fabs((float)want[i]), INFINITY) - std::fabs((float)want[i]);
      const double err32 = std::fabs((double)(f.v[i] - want[i]));
      const double err64 = std::fabs((double)(d.v[i] - want[i]));
      worst32 = std::max(worst32, err32 / (3 * ulp + 6e-10 * (double)r));
      worst64 = std::max(worst64, err64 / (6e-10 * (double)r + 3e-10 * std::fabs((double)want[i])));
    }
  }
  RecordProperty("worst32", std::to_string(worst32));
  RecordProperty("worst64", std::to_string(worst64));
  EXPECT_LE(worst32, 1.0);
  EXPECT_LE(worst64, 1.0);
}

TEST(Normal, MeanAndStdAreOneFusedMultiplyAdd) {
  const synk_rng_stream s = synk_rng_make_stream(1, 2, 3);
  for (uint64_t e = 0; e < 1000; ++e) {
    const float z = synk_rng_normal_at_f32(s, 4, e, 0.0f, 1.0f);
    EXPECT_EQ(bits(synk_rng_normal_at_f32(s, 4, e, 0.1f, 3.0f)), bits(std::fma(3.0f, z, 0.1f)));
    const double z64 = synk_rng_normal_at_f64(s, 4, e, 0.0, 1.0);
    EXPECT_EQ(bits(synk_rng_normal_at_f64(s, 4, e, -2.5, 0.3)), bits(std::fma(0.3, z64, -2.5)));
  }
}

// ---- Bernoulli and dropout --------------------------------------------------------------------

TEST(Bernoulli, FrequencyWithinFourSigma) {
  const uint32_t thr = synk_rng_threshold24(0.3);
  double hits = 0;
  for (uint32_t w : fixed_words(2024)) hits += synk_rng_bernoulli(w, thr) ? 1 : 0;
  RecordProperty("hits", std::to_string(hits));
  EXPECT_LT(std::fabs(hits - 3e5), 4 * std::sqrt(1e6 * 0.3 * 0.7));
}

TEST(Bernoulli, ThresholdIsExactlyUniformBelowP) {
  std::vector<double> ps = {0.0, -1.0, 1.0, 2.0, std::nan(""), 0x1p-24, 0x1p-25, 1 - 0x1p-24, 1 - 0x1p-30,
                            0.3, 0.3f, 0.5, 0.1f, 1e-300, std::numeric_limits<double>::denorm_min()};
  for (uint32_t w : fixed_words(3)) {
    if (ps.size() >= 2000) break;
    ps.push_back(synk_rng_uniform01_f64(w, w * 2654435761u));
  }
  for (double p : ps) {
    const uint32_t thr = synk_rng_threshold24(p);
    ASSERT_LE(thr, 1u << 24);
    for (uint32_t k : {thr - 1, thr, thr + 1, 0u, (1u << 24) - 1}) {
      if (k >= 1u << 24) continue;
      for (uint32_t u : {k << 8, k << 8 | 0xFF}) {
        const bool want = (double)synk_rng_uniform01_f32(u) < p;
        ASSERT_EQ(synk_rng_bernoulli(u, thr), want) << "p " << p << " u " << u;
      }
    }
  }
}

TEST(Dropout, EndsAreExactAndHalfScalesByTwo) {
  const float specials[] = {1.5f, -0.0f, INFINITY, -INFINITY, std::nanf(""), 3e-40f};
  const std::vector<uint32_t> words = fixed_words(11);
  // p = 0 keeps everything unchanged, bit for bit.
  EXPECT_EQ(synk_rng_dropout_scale_f32(0.0f), 1.0f);
  for (size_t i = 0; i < 1000; ++i) {
    const float x = specials[i % 6];
    EXPECT_EQ(bits(synk_rng_dropout_f32(words[i], synk_rng_threshold24(0.0), x, 1.0f)), bits(x));
  }
  // p = 1 drops everything to +0, whatever x is, and its scale is 0, not infinity.
  EXPECT_EQ(bits(synk_rng_dropout_scale_f32(1.0f)), 0u);
  EXPECT_EQ(bits(synk_rng_dropout_scale_f64(1.0)), 0u);
  for (uint32_t w : {0u, ~0u, 0x80000000u})
    for (float x : specials) EXPECT_EQ(bits(synk_rng_dropout_f32(w, synk_rng_threshold24(1.0), x, 0.0f)), 0u);
  // p = 0.5: scale exactly 2; kept values exactly 2x; the kept fraction within 4 sigma.
  const uint32_t thr = synk_rng_threshold24(0.5);
  const float scale = synk_rng_dropout_scale_f32(0.5f);
  EXPECT_EQ(scale, 2.0f);
  EXPECT_EQ(synk_rng_dropout_scale_f64(0.5), 2.0);
  EXPECT_EQ(synk_rng_dropout_scale_f32(0.1f), 1.0f / (1.0f - 0.1f));
  double kept = 0;
  for (uint32_t w : words) {
    const float y = synk_rng_dropout_f32(w, thr, 1.25f, scale);
    const bool keep = synk_rng_uniform01_f32(w) >= 0.5f;
    ASSERT_EQ(bits(y), bits(keep ? 2.5f : 0.0f));
    EXPECT_EQ(synk_rng_dropout_f64(w, thr, 1.25, 2.0), keep ? 2.5 : 0.0);
    kept += keep;
  }
  RecordProperty("kept", std::to_string(kept));
  EXPECT_LT(std::fabs(kept - 5e5), 4 * std::sqrt(1e6 * 0.25));
}

// ---- Independence --------------------------------------------------------------------------------

// Streams that differ in one coordinate (seed, salt, step, row, element, block) are uncorrelated:
// |r| < 5 / sqrt(n) for n = 10^5 pairs of uniforms.
TEST(Independence, NeighbouringStreamsAreUncorrelated) {
  struct Case { const char* name; uint64_t seed; uint32_t salt; uint64_t step, row, shift; };
  const Case cases[] = {{"seed", 2, 0, 0, 0, 0}, {"salt", 1, 1, 0, 0, 0}, {"step", 1, 0, 1, 0, 0},
                        {"row", 1, 0, 0, 1, 0}, {"element", 1, 0, 0, 0, 1}, {"block", 1, 0, 0, 0, 4}};
  const synk_rng_stream base = synk_rng_make_stream(1, 0, 0);
  for (const Case& c : cases) {
    const synk_rng_stream other = synk_rng_make_stream(c.seed, c.salt, c.step);
    std::vector<double> a, b;
    for (uint64_t i = 0; i < 100000; ++i) {
      const uint64_t row = i / 1000 * 2, e = i % 1000 * 8;   // leaves room for the shifted copies
      a.push_back(synk_rng_uniform01_f32(synk_rng_bits(base, row, e)));
      b.push_back(synk_rng_uniform01_f32(synk_rng_bits(other, row + c.row, e + c.shift)));
    }
    EXPECT_LT(std::fabs(correlation(a, b)), 5 / std::sqrt(1e5)) << c.name;
  }
}

// ---- Rank splits ------------------------------------------------------------------------------

// What one rank computes for its rows, element-wise, in reverse order, from its own stream object;
// the reference is built block by block over all rows at once.
struct Draws {
  std::vector<uint32_t> f32_bits, normal_bits, drop_bits;
  std::vector<uint64_t> f64_bits;
  std::vector<uint8_t> bern;
  bool operator==(const Draws&) const = default;
};

constexpr uint64_t kRows = 1000, kCols = 37;   // 37: rows end in a partial block

void draws_of_rank(int rank, int ranks, Draws& into) {
  const synk_rng_stream s = synk_rng_make_stream(31337, 4, 12);
  const uint64_t begin = rank * kRows / ranks, end = (rank + 1) * kRows / ranks;
  const uint32_t thr = synk_rng_threshold24(0.25);
  for (uint64_t row = end; row-- > begin;)
    for (uint64_t e = kCols; e-- > 0;) {
      const uint64_t i = row * kCols + e;
      into.f32_bits[i] = bits(synk_rng_uniform_at_f32(s, row, e, -1.0f, 1.0f));
      into.normal_bits[i] = bits(synk_rng_normal_at_f32(s, row, e, 0.0f, 1.0f));
      into.drop_bits[i] = bits(synk_rng_dropout_at_f32(s, row, e, thr, 1.0f, synk_rng_dropout_scale_f32(0.25f)));
      into.f64_bits[i] = bits(synk_rng_uniform_at_f64(s, row, e, 0.0, 1.0));
      into.bern[i] = synk_rng_bernoulli_at(s, row, e, thr);
    }
}

Draws empty_draws() {
  const size_t n = kRows * kCols;
  return {std::vector<uint32_t>(n), std::vector<uint32_t>(n), std::vector<uint32_t>(n),
          std::vector<uint64_t>(n), std::vector<uint8_t>(n)};
}

Draws reference_draws() {
  Draws d = empty_draws();
  const synk_rng_stream s = synk_rng_make_stream(31337, 4, 12);
  for (uint64_t row = 0; row < kRows; ++row)
    for (uint64_t b = 0; 4 * b < kCols; ++b) {
      const synk_rng_u32x4 w = synk_rng_block(s, row, b);
      const synk_rng_f32x2 z[2] = {synk_rng_normal2_f32(w.v[0], w.v[1]), synk_rng_normal2_f32(w.v[2], w.v[3])};
      const synk_rng_u32x4 w0 = synk_rng_block(s, row, 2 * b), w1 = synk_rng_block(s, row, 2 * b + 1);
      const double u64[4] = {synk_rng_uniform01_f64(w0.v[0], w0.v[1]), synk_rng_uniform01_f64(w0.v[2], w0.v[3]),
                             synk_rng_uniform01_f64(w1.v[0], w1.v[1]), synk_rng_uniform01_f64(w1.v[2], w1.v[3])};
      for (uint64_t lane = 0; lane < 4 && 4 * b + lane < kCols; ++lane) {
        const uint64_t i = row * kCols + 4 * b + lane;
        const float u = synk_rng_uniform01_f32(w.v[lane]);
        d.f32_bits[i] = bits(std::fma(2.0f, u, -1.0f));
        d.normal_bits[i] = bits(z[lane / 2].v[lane % 2]);
        d.drop_bits[i] = bits(u >= 0.25f ? 1.0f / 0.75f : 0.0f);
        d.f64_bits[i] = bits(u64[lane]);
        d.bern[i] = u < 0.25f;
      }
    }
  return d;
}

TEST(Ranks, AnySplitOfRowsGivesIdenticalDraws) {
  const Draws want = reference_draws();
  for (int ranks = 1; ranks <= 4; ++ranks) {
    Draws got = empty_draws();
    for (int r = ranks - 1; r >= 0; --r) draws_of_rank(r, ranks, got);
    EXPECT_TRUE(got.f32_bits == want.f32_bits) << ranks << " ranks";
    EXPECT_TRUE(got.normal_bits == want.normal_bits) << ranks << " ranks";
    EXPECT_TRUE(got.drop_bits == want.drop_bits) << ranks << " ranks";
    EXPECT_TRUE(got.f64_bits == want.f64_bits) << ranks << " ranks";
    EXPECT_TRUE(got.bern == want.bern) << ranks << " ranks";
  }
}

// ---- The freestanding CPU-kernel build ------------------------------------------------------------

TEST(Freestanding, BothBuildsMatchTheHostBitForBit) {
  // Ranges and scales that are not powers of two, so that every rounding shows.
  const double ab[][2] = {{-0.7, 2.9}, {-0.7, 2.9}, {0.3, 1.7}, {0.3, 1.7}, {0.3, 0}, {0.3, 0}, {0.7, 0}};
  const size_t width[] = {4, 8, 4, 8, 1, 4, 8};
  const uint64_t rows = 61, cols = 37;   // a rank's slice starting at row 12345
  std::vector<float> xf(rows * cols);
  std::vector<double> xd(rows * cols);
  const float specials[] = {1.5f, -0.0f, INFINITY, std::nanf(""), -7.25f, 3e-40f};
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = specials[i % 6] * (float)(i % 5 + 1), xd[i] = xf[i];
  for (int kind = FS_UNIFORM_F32; kind <= FS_DROPOUT_F64; ++kind) {
    const FsRequest rq = {kind, 0xFEEDFACEull, 77, 12345, rows, cols, 6, ab[kind][0], ab[kind][1]};
    const void* x = kind == FS_DROPOUT_F64 ? (const void*)xd.data() : (const void*)xf.data();
    const size_t bytes = rows * cols * width[kind];
    std::vector<unsigned char> host(bytes), o2(bytes, 0xAA), fast(bytes, 0x55);
    const synk_rng_stream s = synk_rng_make_stream(rq.seed, rq.salt, rq.step);
    for (uint64_t row = rq.row0; row < rq.row0 + rows; ++row) fill_row(&rq, s, row, x, host.data());
    fs_o2(&rq, x, o2.data());
    fs_fast(&rq, x, fast.data());
    EXPECT_EQ(std::memcmp(host.data(), o2.data(), bytes), 0) << "kind " << kind << " (-O2)";
    EXPECT_EQ(std::memcmp(host.data(), fast.data(), bytes), 0) << "kind " << kind << " (-O3, AVX2, FMA, fp-contract=fast)";
  }
}

#ifndef PHILOX_NO_NVRTC
// ---- NVRTC and ptxas ------------------------------------------------------------------------------

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct NvrtcResult { bool ok; std::string log, ptx; };

NvrtcResult nvrtc_compile(const std::string& source, const std::vector<std::string>& options) {
  const std::string dir = PHILOX_SOURCE_DIR "/";
  const std::string headers[] = {slurp(PHILOX_HEADER), slurp(dir + "fs_abi.h"), slurp(dir + "fill_rows.h")};
  const char* contents[] = {headers[0].c_str(), headers[1].c_str(), headers[2].c_str()};
  const char* names[] = {"philox.h", "fs_abi.h", "fill_rows.h"};
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, source.c_str(), "kernel.cu", 3, contents, names) != NVRTC_SUCCESS) return {false, "create failed", ""};
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  NvrtcResult r;
  r.ok = nvrtcCompileProgram(prog, (int)opts.size(), opts.data()) == NVRTC_SUCCESS;
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  r.log.assign(n, '\0');
  nvrtcGetProgramLog(prog, r.log.data());
  r.log = r.log.c_str();
  if (r.ok) {
    nvrtcGetPTXSize(prog, &n);
    r.ptx.assign(n, '\0');
    nvrtcGetPTX(prog, r.ptx.data());
    r.ptx = r.ptx.c_str();
  }
  nvrtcDestroyProgram(&prog);
  return r;
}

// Floating-point instructions that could differ from the host: approximations (sqrt.approx,
// rcp.approx, ex2, lg2, sin, cos), divisions, and arithmetic without a rounding mode, which ptxas
// may fuse into an FMA.
std::vector<std::string> suspicious_ptx(const std::string& ptx) {
  static const std::regex fp_op(R"(^\s*(add|sub|mul|fma|div|sqrt|rcp|ex2|lg2|sin|cos)(\.[a-z0-9]+)*\.f(32|64)\b)");
  std::vector<std::string> bad;
  std::istringstream in(ptx);
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, fp_op) && (line.find(".rn") == std::string::npos || line.find("approx") != std::string::npos ||
                                           line.find("div") != std::string::npos))
      bad.push_back(line);
  return bad;
}

TEST(Cuda, NvrtcCompilesAndPtxasAssembles) {
  const std::string source = slurp(PHILOX_SOURCE_DIR "/cuda_kernels.cu");
  ASSERT_FALSE(source.empty());
  for (const char* arch : {"80", "90"})
    for (bool fast : {false, true}) {
      std::vector<std::string> opts = {std::string("-arch=compute_") + arch, "-std=c++17"};
      if (fast) opts.push_back("--use_fast_math");
      const NvrtcResult r = nvrtc_compile(source, opts);
      ASSERT_TRUE(r.ok) << r.log;
      EXPECT_EQ(r.log, "") << arch << (fast ? " fast-math" : "");
      EXPECT_TRUE(std::regex_search(r.ptx, std::regex(R"(mul\.rn(\.ftz)?\.f32)")));   // the scan below sees the code
      for (const std::string& line : suspicious_ptx(r.ptx)) ADD_FAILURE() << arch << ": " << line;
      const std::string base = testing::TempDir() + "philox_sm" + arch + (fast ? "_fast" : "");
      std::ofstream(base + ".ptx") << r.ptx;
      const std::string cmd = std::string(PTXAS) + " -arch=sm_" + arch + " " + base + ".ptx -o " + base + ".cubin";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
      EXPECT_GT(slurp(base + ".cubin").size(), 1000u);
    }
}

// The prelude pastes the whole header into every kernel, whatever it uses: no warnings then.
TEST(Cuda, HeaderAloneCompilesWithoutWarnings) {
  const std::string source = "typedef unsigned int uint32_t;\ntypedef unsigned long long uint64_t;\n#include \"philox.h\"\n";
  const NvrtcResult r = nvrtc_compile(source, {"-arch=compute_90", "-std=c++17"});
  EXPECT_TRUE(r.ok) << r.log;
  EXPECT_EQ(r.log, "");
}

#endif  // PHILOX_NO_NVRTC

}  // namespace
