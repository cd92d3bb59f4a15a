// The compiled-function descriptor: the small, stable interface between whatever produces code
// (the JIT, synkc's host stubs, or a hand-written test) and the runtime that runs it on every
// rank. The runtime includes nothing from dsl/ or compiler/; it only sees these types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/rng.h"

namespace synk::rt {

// synk's one vocabulary (base/dtype.h). The runtime executes every DType but the reserved
// f16/bf16, which never reach it: the compiler rejects them where a descriptor is made.
using synk::DType;
using synk::dtype_name;
using synk::dtype_size;
using synk::is_float;
using synk::Role;
using synk::ReduceMode;
using synk::mode_name;

// A dimension is a fixed size (symbol < 0) or a symbol bound per call (index into
// FunctionSignature::symbols or ModuleSpec::symbols for shared variables).
struct DimSpec {
  int64_t size = 0;
  int32_t symbol = -1;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<DimSpec> dims;
};

struct InputSpec : TensorSpec {
  Role role = Role::Scatter;
};

struct OutputSpec : TensorSpec {
  ReduceMode mode = ReduceMode::Avg;
};

struct UpdateSpec {
  int32_t shared = -1;                  // index into ModuleSpec::shareds
  ReduceMode mode = ReduceMode::Avg;    // accumulation across slices
};

struct FunctionSignature {
  std::string name;
  std::vector<std::string> symbols;     // symbol names used by dims of inputs and outputs
  std::vector<InputSpec> inputs;        // in call order
  std::vector<int32_t> shareds_read;    // module shared indices passed to run(), in this order
  std::vector<OutputSpec> outputs;
  std::vector<UpdateSpec> updates;
};

// How a shared variable gets its first value (see docs/language.md for the exact RNG).
struct InitSpec {
  // FromMaster: what workers get for a Load of a module made after fork(): a value of `shape`
  // that the master's broadcast fills with what it read (the file is read once, by the master).
  enum class Kind : uint8_t { Zeros, Ones, Constant, Normal, Uniform, Load, FromMaster } kind = Kind::Zeros;
  double a = 0, b = 1;                  // Constant: a; Normal: mean a, stddev b; Uniform: [a, b)
  uint64_t seed = 0;
  std::string path;                     // Load: absolute path of a .npy file
  std::vector<int64_t> shape;           // FromMaster: the shape of the master's value
};

struct SharedSpec : TensorSpec {
  InitSpec init;
  bool sliceable = false;
};

struct ModuleSpec {
  std::vector<std::string> symbols;     // symbols used in shared variables' dims
  std::vector<SharedSpec> shareds;
};

// A non-owning view of an array in host memory (row-major, contiguous).
struct ArrayRef {
  const void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t size() const;                 // number of elements
};

// An owning host array. Capacity is kept across calls so the engine reuses buffers.
struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
  int64_t size() const;
  void resize(DType t, std::vector<int64_t> new_shape);   // keeps capacity
  template <class T> T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  ArrayRef ref() const { return ArrayRef{bytes.data(), dtype, shape}; }
};

// Where a compiled function reports, during run(), which bytes of one update are final: the call
// engine hands it the gradient of a training step whose all-reduce overlaps the backward pass
// (docs/training.md, "Overlap"), and reduces each bucket of it as soon as all its bytes are final.
class UpdateSink {
 public:
  virtual ~UpdateSink() = default;
  // Where the update's value lives in this run, once the function has sized it (before any
  // ready()).
  virtual void begin(std::byte* data, size_t bytes) = 0;
  // Bytes [offset, offset + bytes) of the update hold their final value, and the function will
  // neither write nor read them again in this run (the sink may change them in place).
  virtual void ready(size_t offset, size_t bytes) = 0;
};

// What the compiler produces for one function. run() computes one slice on one rank: inputs
// (one per signature.inputs, rows already selected), shareds (one per signature.shareds_read,
// values at the start of the call, rows already selected for sliceable ones). It resizes and
// fills outputs (one per signature.outputs) and updates (one per signature.updates, the new
// values). It throws std::exception subclasses on failure; the engine turns them into call errors.
class CompiledFunction {
 public:
  virtual ~CompiledFunction() = default;
  virtual const FunctionSignature& signature() const = 0;
  virtual void run(std::span<const ArrayRef> inputs, std::span<const ArrayRef> shareds,
                   std::span<Array> outputs, std::span<Array> updates) = 0;
  // The random state the next run() draws with (base/rng.h): the engine sets it before every
  // part, with the part's first row of the call. Functions without random ops ignore it.
  virtual void set_random_state(const RngState& state) { (void)state; }
  // Reports update `update`'s progress to `sink` in the runs that follow (null: no more). Returns
  // whether it will; a function that cannot leaves the engine to report the whole update after
  // run() returns.
  virtual bool stream_update(int update, UpdateSink* sink) {
    (void)update;
    (void)sink;
    return false;
  }
};

// Rebuilds a CompiledFunction in a worker from the payload its producer registered
// (synk::register_loader).
using FunctionLoader = std::function<std::shared_ptr<CompiledFunction>(const std::string& payload)>;

}  // namespace synk::rt
