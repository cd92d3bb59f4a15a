// The reference evaluator: runs one Graph IR function directly on host arrays, in float64, with
// no compilation. It is the oracle every differential test compares the compiled kernels
// against, so it favours being obviously correct over being fast: live nodes run in order, each op is
// a small function over a row-major array of doubles, integer ops wrap exactly like the target
// dtype, and every data-dependent failure (an index out of range, a max over an empty axis, an
// argument of the wrong shape) is a UserError that names what was wrong.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "base/rng.h"
#include "ir/ir.h"

namespace synk::dsl {

// A dense, row-major array on the host. Values are held as double: exact for every integer up to
// 2^53 and for bool (0/1). A default-constructed HostTensor (no shape, no data) means "absent".
struct HostTensor {
  ir::DType dtype = ir::DType::F64;
  std::vector<int64_t> shape;
  std::vector<double> data;

  int64_t size() const;   // product of shape (1 for a scalar)
  bool absent() const { return shape.empty() && data.empty(); }

  static HostTensor make(ir::DType dtype, std::vector<int64_t> shape, std::vector<double> data);
  static HostTensor scalar(ir::DType dtype, double value);
  static HostTensor filled(ir::DType dtype, std::vector<int64_t> shape, double value);
};

// "f32[4, 10]".
std::string host_type_str(const HostTensor& t);

// Results in Function order: outputs[i] is fn.outputs[i], updates[i] the new value of the shared
// variable named by fn.updates[i].
struct EvalResult {
  std::vector<HostTensor> outputs;
  std::vector<HostTensor> updates;
};

// Runs `fn` directly on the IR with float64 arithmetic and accumulation. Only the nodes that reach
// an output or an update are evaluated (and only the shared variables they read must be given),
// as compiled code computes only those after dead-code elimination: a dead node raises nothing. `inputs` align with
// fn.params; `shared_values` align with module.shareds (only the ones the function reads must be
// present; the span may be shorter than module.shareds). Binds symbolic dimensions from the
// actual shapes (each symbol bound once, checked everywhere else) and throws UserError naming the
// argument on any dtype/rank/shape mismatch.
//
// Numeric conventions (what the compiled kernels must agree with):
// - floats compute in double; f32 inputs and f32 constants are rounded to float once, and a Cast
//   to f32 rounds to float, so programs comparing cast values agree with f32 kernels;
// - integer results wrap like the target dtype (i32 computed in i64 then wrapped, u8 mod 256);
// - float -> integer casts truncate toward zero; NaN, inf or a value outside the target range is a
//   UserError; casts to bool give value != 0;
// - integer `a ** b` with b < 0 gives trunc(1 / a^|b|) (so 0 unless |a| == 1; 0 ** -k gives 0);
// - max/min/maximum/minimum/relu propagate NaN; argmax returns the first maximum (a NaN counts as
//   the maximum, as in numpy); sum of an empty axis is 0, prod 1, mean NaN; max/min/argmax of an
//   empty axis is a UserError;
// - take, one_hot and cross_entropy check every index (negative indices are out of range);
// - random ops draw with base/philox.h at (rng.seed, salt, rng.step, row, element), the row of
//   an op with global rows offset by rng.first_row, rounded to the op's dtype as kernels draw.
EvalResult evaluate(const ir::Module& module, const ir::Function& fn,
                    std::span<const HostTensor> inputs, std::span<const HostTensor> shared_values,
                    const RngState& rng = {});

// The draws of one random op (ir::Op::Random) of concrete shape `shape`.
HostTensor random_values(const ir::Node& node, const std::vector<int64_t>& shape, const RngState& rng);

// Convenience for tests: finds the function by name (UserError when absent).
EvalResult evaluate(const ir::Module& module, std::string_view function_name,
                    std::span<const HostTensor> inputs, std::span<const HostTensor> shared_values,
                    const RngState& rng = {});

}  // namespace synk::dsl
