// Tests of the diagnostics helpers every front end and API message uses (diagnostics.h): the
// "did you mean" suggestion for unknown names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/diagnostics.h"

using synk::did_you_mean;

TEST(DidYouMean, SuggestsOnlyCloseCandidates) {
  const std::vector<std::string> names = {"beta1", "beta2", "epsilon", "lr"};
  EXPECT_EQ(did_you_mean("betta1", names), "; did you mean 'beta1'?");
  EXPECT_EQ(did_you_mean("epsilom", names), "; did you mean 'epsilon'?");
  EXPECT_EQ(did_you_mean("learning_rate", names), "");   // too far from 'lr'
  EXPECT_EQ(did_you_mean("x", names), "");
  EXPECT_EQ(did_you_mean("g", {"f", "h"}), "");          // one letter: only a case slip counts
  EXPECT_EQ(did_you_mean("F", {"f", "h"}), "; did you mean 'f'?");
  EXPECT_EQ(did_you_mean("anything", {}), "");
}

TEST(DidYouMean, TheFirstOfEquallyCloseCandidatesWins) {
  EXPECT_EQ(did_you_mean("adamx", {"adam", "adamax", "adamw"}), "; did you mean 'adam'?");
  EXPECT_EQ(did_you_mean("W", {"b", "w"}), "; did you mean 'w'?");   // one edit from both: the case wins
  EXPECT_EQ(did_you_mean("Weights", {"weights", "weighs"}), "; did you mean 'weights'?");
}
