// The runtime's error types. Three kinds, kept apart so callers can react differently:
// UsageError (the caller passed something wrong: caught on the master before any worker moves),
// RankError (something failed inside one or more ranks while running: the call failed on every
// rank; a dead worker is a RankError too, after which the group is shut down), InternalError
// (a bug in synk itself). All derive from synk::Error, itself a std::runtime_error.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace synk {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The caller's fault: a wrong argument, a wrong dtype, an index out of range, an unknown name...
// Messages name the argument, the expected and the received value.
class UsageError : public Error {
 public:
  using Error::Error;
};

// A bad value in one scattered row, found by a compiled function, which numbers the row within
// the rows it was given (one rank's share, one slice of it). The call engine catches it and
// reports the row in the caller's terms: its position among the call's scattered rows and the
// input row it came from. what() reads `before` + "row N" + `after`.
class ScatteredRowError : public UsageError {
 public:
  ScatteredRowError(std::string before, int64_t row, std::string after)
      : UsageError(before + "row " + std::to_string(row) + after),
        before_(std::move(before)), after_(std::move(after)), row_(row) {}
  const std::string& before() const { return before_; }
  const std::string& after() const { return after_; }
  int64_t row() const { return row_; }

 private:
  std::string before_, after_;
  int64_t row_;
};

// A failure inside one or more ranks (an exception in run(), an allocation failure, a worker that
// died). `ranks` lists the ranks that failed, in increasing order.
class RankError : public Error {
 public:
  RankError(const std::string& message, std::vector<int> ranks, bool group_lost = false)
      : Error(message), ranks_(std::move(ranks)), group_lost_(group_lost) {}
  const std::vector<int>& ranks() const { return ranks_; }
  // True when the process group was shut down because of this error (a worker died): the next
  // call needs a new synk::fork().
  bool group_lost() const { return group_lost_; }

 private:
  std::vector<int> ranks_;
  bool group_lost_;
};

// A bug in synk (an invariant that did not hold). Please report it.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace synk
