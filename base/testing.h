// Helpers for the GoogleTest tests of every layer (test use only; not installed): a check that a
// call throws a UserError whose message names what went wrong, the message of the error a call
// throws, EXPECT_HAS (a text contains a fragment), and an environment variable set for one scope.
#pragma once

#include <cstdlib>
#include <optional>
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

}  // namespace synk::testing
