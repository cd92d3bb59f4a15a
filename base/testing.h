// Helpers for the GoogleTest tests of every layer (test use only; not installed): a check that a
// call throws a UserError whose message names what went wrong.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/errors.h"

namespace synk::testing {

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

}  // namespace synk::testing
