// The result of fusion: what runs, in order, to compute one function. A KernelPlan lists the
// buffers (arrays that exist at run time: the caller's inputs, shared values, outputs and
// updates, temporaries, and reshaped aliases of those) and the kernels that fill them. Each
// kernel owns the IR nodes it computes; nodes that are views of a buffer (transpose, slice,
// broadcast) may appear in several kernels, where they are only index arithmetic.
// `synkc --emit=ir-fused` prints a plan (print_plan); the code generators consume it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace synk::compiler {

struct Buffer {
  enum class Kind : uint8_t {
    Input,    // index: position in Function::params
    Shared,   // index: position in KernelPlan::shareds_read
    Output,   // index: position in Function::outputs (written in place)
    Update,   // index: position in Function::updates (written in place)
    Temp,     // owned by the compiled function, reused across calls
    Alias,    // index: the buffer it reshapes (same bytes, another shape)
  };
  Kind kind = Kind::Temp;
  int64_t index = -1;
  ir::TensorType type;
  ir::NodeId node = -1;   // the node whose value it holds
};
const char* buffer_kind_name(Buffer::Kind k);

enum class KernelKind : uint8_t {
  Pointwise,     // a DAG of pointwise ops and views, one loop nest; one or more outputs of one shape
  Reduce,        // a pointwise DAG feeding one reduction (sum mean max min prod), one pass
  ArgMax,        // a pointwise DAG feeding argmax
  MatMul,        // BLAS (float) or a generated loop (integer); transposes folded into flags
  Softmax,       // stable: max, sum of exp, scale
  LogSoftmax,
  Cumsum,        // a sequential scan of each line along the axis (no fused producers)
  CrossEntropy,  // stable log-sum-exp per row, integer or probability labels
  Concat,        // one loop nest per operand, each a pointwise DAG
  Take,          // row gather with bounds checks
  OneHot,
  Random,        // one random op's draws (base/philox.h), row by row
  Dnn,           // one conv2d / pooling op (forward or backward): a library call on the host
};
const char* kernel_kind_name(KernelKind k);

struct Kernel {
  KernelKind kind = KernelKind::Pointwise;
  std::string name;                 // "k0", ...; the symbol is <function>_<name>
  std::vector<ir::NodeId> nodes;    // computed here, in topological order
  std::vector<ir::NodeId> roots;    // the nodes whose values it stores, one buffer each
  std::vector<int> inputs;          // buffers read, in first-use order
  std::vector<int> outputs;         // buffers written, parallel to roots
  // MatMul only: operands (buffers) and whether each is read transposed.
  int matmul_a = -1, matmul_b = -1;
  bool trans_a = false, trans_b = false;
};

struct KernelPlan {
  ir::Function function;               // after the passes; kernels refer to its nodes
  std::vector<std::string> symbols;    // dims bound per call; generated code reads syms[i]
  std::vector<int32_t> shareds_read;   // module shared indices, in the order run() receives them
  std::vector<Buffer> buffers;
  std::vector<int> node_buffer;        // per node of `function`: its buffer, or -1
  std::vector<Kernel> kernels;         // in execution order
  int symbol_index(const std::string& name) const;   // -1 when absent
};

// Readable text: buffers, then each kernel with the nodes it contains, then where outputs and
// updates come from. Stable enough for FileCheck.
void print_plan(const ir::Module& module, const KernelPlan& plan, std::ostream& out);

// One node as `%3: f32[n] = add(%1, %2)` plus attributes, for plans and pass dumps.
// `module` may be null (shared variables then print by index).
std::string node_str(const ir::Module* module, const ir::Function& fn, ir::NodeId id);

}  // namespace synk::compiler
