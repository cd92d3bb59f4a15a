// CUDA code generation (`synkc --emit=cuda`): one translation unit of CUDA C++ per function,
// compiled by NVRTC (nvrtc.h). It has no #include at all (NVRTC has no default include path,
// and headers cost compile time): fixed-width integer types and the scalar helpers come from a
// small prelude (codegen_cuda_prelude.cpp) whose meaning matches scalar_semantics.cpp and the
// CPU prelude. The fused expressions themselves are built with the CPU generator's ExprBuilder
// and printed with its value_expr (codegen_cpu_internal.h), so both backends compute the same
// expression DAG; the prelude maps the few __builtin_ names that text uses to CUDA builtins.
//
// Every kernel of the plan except float matrix products (cuBLAS, from the host) becomes
//   extern "C" __global__ void synk_<fn>_<kernel>(<buffers>, const SynkSyms syms,
//       unsigned long long* err, void* scratch, long long splits)
// where <buffers> are kernel_buffer_params(kernel) (outputs, then inputs) as typed pointers,
// syms holds the plan's symbol values, err[0..3] of this kernel receive the first failure (code
// as KernelError, smallest failing position, limit; the host reads them after the call), and
// scratch/splits serve reductions split over several blocks (partials and arrival counters).
//
// How a kernel is launched is described by CudaKernelLaunch, sizes as IR shapes that the host
// evaluates with the call's symbol values:
// - Flat: a 1-D grid-stride loop over `work` elements (pointwise, concat, take, one_hot, integer
//   matmul, softmax along a non-last axis, cumsum: a thread per line along the axis). When every array is walked contiguously the loop
//   moves 16 bytes per array per step (float4-sized vectors) with a scalar tail.
// - RowTeams: one block per output (reduce/argmax along the innermost dims, softmax, log_softmax,
//   cross_entropy): threads stride over the reduced elements, then a warp-shuffle block reduction;
//   a reduce may split each output over `splits` blocks whose partials the last-arriving block
//   combines in a fixed order (deterministic), so pointwise+reduction stays one pass, one launch.
// - Columns: one thread per output (reductions whose innermost dim is kept), grid.y = splits.
// - Blas: no kernel; cuBLAS computes the product.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/passes/kernel_plan.h"

namespace synk::compiler {

enum class CudaLaunchKind : uint8_t { Flat, RowTeams, Columns, Blas };
const char* cuda_launch_kind_name(CudaLaunchKind k);

struct CudaKernelLaunch {
  int kernel = -1;                 // index into KernelPlan::kernels
  std::string symbol;              // synk_<fn>_<kernel>; empty for Blas
  CudaLaunchKind kind = CudaLaunchKind::Flat;
  std::vector<int> params;         // buffers passed, in parameter order
  ir::Shape work;                  // Flat: elements; RowTeams/Columns: outputs
  ir::Shape reduced;               // RowTeams/Columns: elements combined into each output
  int vector_width = 1;            // elements per thread per step on the vector path (1: none)
  bool splittable = false;         // the reduced length may be split over blocks (needs scratch)
  int partial_bytes = 0;           // bytes of one partial result in scratch (splittable only)
  bool empty_reduction_error = false;   // max/min/argmax: a reduced length of 0 is an error
};

struct CudaProgram {
  std::string source;
  std::vector<CudaKernelLaunch> launches;   // one per plan kernel, in plan order
};

// Threads per block that every generated kernel is declared for (__launch_bounds__).
inline constexpr int kCudaMaxThreads = 256;

// The translation unit and how to launch each kernel.
CudaProgram generate_cuda_program(const ir::Module& module, const KernelPlan& plan);
// Just the text (`synkc --emit=cuda`).
std::string generate_cuda(const ir::Module& module, const KernelPlan& plan);

// The fixed prelude at the top of every translation unit (types, scalar helpers, block
// reductions, the failure reporter).
const std::string& cuda_prelude();

// Helpers shared by codegen_cuda.cpp and codegen_cuda_reduce.cpp; not a public interface.
namespace emitter {
class Writer;
class ExprBuilder;
struct Nest;
}  // namespace emitter
namespace cuda_detail {
std::string buf(int buffer);                                   // "b3"
// `b<buffer>[index] = value;`, converting bool to its byte.
std::string store(int buffer, const std::string& index, ir::DType t, const std::string& value);
// " + var * st<k>_<d>" (or " + var", or "" for a zero stride).
std::string stride_term(const emitter::Nest& nest, size_t k, size_t d, const std::string& var);
// Defines i<d> for each nest dim in `dims` (row-major) from the linear `index`.
void emit_decompose(emitter::Writer& w, const std::string& index, const std::vector<int>& dims, const std::string& tag);
// Defines <name><k> = <base><k> + sum over `dims` of i<d> * stride, for every access k.
void emit_addresses(emitter::Writer& w, const emitter::Nest& nest, const std::string& name, const std::string& base,
                    const std::vector<int>& dims);
std::string product_of(const emitter::Nest& nest, const std::vector<int>& dims);   // "n0 * n2" or "1"
std::vector<int> all_dims(const emitter::Nest& nest);
// Elements per 16-byte step along nest dim d when every access walks it with stride 0 or 1
// (and at least one with 1); else 1.
int vector_width(const emitter::ExprBuilder& eb, const emitter::Nest& nest, int d);
// The run-time condition for the vector path: stride-1 arrays 16-byte aligned and their base
// element (<base><k>) a multiple of the width.
std::string vector_aligned_condition(const emitter::ExprBuilder& eb, const emitter::Nest& nest, int d, int width,
                                     const std::string& base);
// Loads x<k> (vectors for stride-1 accesses, scalars for stride 0) at <base><k> + index, then
// defines v<lane>_<i> for every value and lane.
void emit_vector_values(emitter::Writer& w, const emitter::ExprBuilder& eb, const emitter::Nest& nest, int d, int width,
                        const std::string& base, const std::string& index);
// codegen_cuda_reduce.cpp
void emit_cuda_reduce(emitter::Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch);
void emit_cuda_argmax(emitter::Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch);
void emit_cuda_softmax(emitter::Writer& w, const KernelPlan& plan, const Kernel& k, bool log, CudaKernelLaunch& launch);
void emit_cuda_cumsum(emitter::Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch);
void emit_cuda_cross_entropy(emitter::Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch);
// codegen_cuda_dnn.cpp: conv2d, pooling and their backward passes (KernelKind::Dnn).
void emit_cuda_dnn(emitter::Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch);
}  // namespace cuda_detail

}  // namespace synk::compiler
