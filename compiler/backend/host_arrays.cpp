// HostTensor <-> runtime array conversions (see host_arrays.h).
#include "compiler/backend/host_arrays.h"

#include "compiler/backend/signature.h"
#include "runtime/data/dtype.h"

namespace synk::compiler {

rt::Array to_array(const dsl::HostTensor& tensor) {
  rt::Array a;
  a.resize(runtime_dtype(tensor.dtype), tensor.shape);
  if (int64_t(tensor.data.size()) != a.size())
    synk::internal_error("to_array: a HostTensor of shape " + rt::shape_string(tensor.shape) + " holds " +
                        std::to_string(tensor.data.size()) + " values");
  rt::convert_elements(tensor.data.data(), rt::DType::F64, a.bytes.data(), a.dtype, a.size());
  return a;
}

dsl::HostTensor to_host_tensor(const rt::ArrayRef& array) {
  dsl::HostTensor t;
  t.dtype = array.dtype;
  t.shape = array.shape;
  t.data.resize(size_t(array.size()));
  rt::convert_elements(array.data, array.dtype, t.data.data(), rt::DType::F64, array.size());
  return t;
}

}  // namespace synk::compiler
