// The reference evaluator's HostTensor (float64 values) and the runtime's typed arrays, converted
// both ways: how differential tests and `synkc run` compare a compiled function with the reference.
#pragma once

#include "ir/evaluator.h"
#include "runtime/call/descriptor.h"

namespace synk::compiler {

// A HostTensor's values in the runtime's typed layout (floats rounded to the dtype, integers
// converted exactly) and back. Throws UserError for f16/bf16.
rt::Array to_array(const dsl::HostTensor& tensor);
dsl::HostTensor to_host_tensor(const rt::ArrayRef& array);
inline dsl::HostTensor to_host_tensor(const rt::Array& array) { return to_host_tensor(array.ref()); }

}  // namespace synk::compiler
