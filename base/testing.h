// Helpers for the GoogleTest tests of every layer (test use only; not installed): a check that a
// call throws a UserError whose message names what went wrong, the message of the error a call
// throws, EXPECT_HAS (a text contains a fragment), an environment variable set for one scope, and
// a random generator whose seed a failure can be replayed with.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/errors.h"

// Expects the text `haystack` to contain `needle`; prints the whole text when it does not.
#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

namespace synk::testing {

// The message of the E that f() throws; `none` when it throws nothing.
template <class E, class F>
std::string error_of(F&& f, const std::string& none = "<no exception of the expected type>") {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return none;
}

// The message of the UsageError that f() throws; "<no UsageError>" when it throws nothing.
template <class F>
std::string usage_error_of(F&& f) {
  return error_of<UsageError>(f, "<no UsageError>");
}

// Runs f and expects a UserError whose message contains every fragment. A message is checked by
// its fragments, not whole, so that a test says which facts the user must be told.
template <class F>
void expect_user_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    for (const std::string& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "message '" << msg << "' lacks '" << frag << "'";
  }
}

// Sets an environment variable (or unsets it, for a null value) for one scope; restores the
// previous value at its end.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// One generator per test, seeded from SYNK_TEST_SEED or std::random_device; the seed is printed
// so that any failure can be replayed.
class Rng {
 public:
  explicit Rng(const std::string& test_name) {
    const char* env = std::getenv("SYNK_TEST_SEED");
    seed_ = env ? std::strtoull(env, nullptr, 10) : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    std::cout << "[ seed     ] " << test_name << ": SYNK_TEST_SEED=" << seed_ << "\n";
    engine_.seed(seed_);
  }
  uint64_t seed() const { return seed_; }
  double uniform(double low, double high) { return std::uniform_real_distribution<double>(low, high)(engine_); }
  int64_t integer(int64_t low, int64_t high) { return std::uniform_int_distribution<int64_t>(low, high)(engine_); }
  // |x| in [low, high] with a random sign: values away from the kink at 0.
  double away_from_zero(double low, double high) { return (integer(0, 1) ? 1 : -1) * uniform(low, high); }
  std::mt19937_64& engine() { return engine_; }

 private:
  uint64_t seed_ = 0;
  std::mt19937_64 engine_;
};

}  // namespace synk::testing
