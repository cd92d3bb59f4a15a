// NCCL for reduce and all_reduce (see coll_nccl.h).
#include "runtime/coll/nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "gpu/dl.h"
#include "gpu/driver.h"
#include "runtime/group/process_group.h"

namespace synk::rt {
namespace nccl {

namespace {

struct Loaded {
  Api api;
  std::string error;   // non-empty when loading failed
};

const Loaded& loaded() {
  static const Loaded* result = [] {
    auto* out = new Loaded();
    const char* dirs = std::getenv("SYNK_NCCL_LIB_DIR");
    std::string error;
    void* lib = cuda::open_cuda_library("libnccl.so.2", dirs ? dirs : "", &error, &out->api.path);
    if (!lib) {
      out->error = "cannot load libnccl.so.2: " + error;
      return out;
    }
    cuda::SymbolTable table(lib, out->api.path);
    auto resolve = [&](auto& fn, const char* name) { table.resolve(fn, name); };
    Api& a = out->api;
    resolve(a.GetVersion, "ncclGetVersion");
    resolve(a.GetUniqueId, "ncclGetUniqueId");
    resolve(a.CommInitRank, "ncclCommInitRank");
    resolve(a.CommDestroy, "ncclCommDestroy");
    resolve(a.CommAbort, "ncclCommAbort");
    resolve(a.CommGetAsyncError, "ncclCommGetAsyncError");
    resolve(a.GetErrorString, "ncclGetErrorString");
    resolve(a.AllReduce, "ncclAllReduce");
    resolve(a.Reduce, "ncclReduce");
    resolve(a.GroupStart, "ncclGroupStart");
    resolve(a.GroupEnd, "ncclGroupEnd");
    out->error = table.error();
    if (out->error.empty() && a.GetVersion(&a.version) != kSuccess)
      out->error = "ncclGetVersion failed in " + a.path;
    if (out->error.empty() && a.version < 20700)
      out->error = fmt::format("{} is NCCL {}; synk needs 2.7 or newer", a.path, a.version);
    return out;
  }();
  return *result;
}

void check(Result result, std::string_view what) {
  if (result == kSuccess) return;
  const char* text = loaded().api.GetErrorString ? loaded().api.GetErrorString(result) : "unknown";
  throw Error(fmt::format("{} failed: NCCL error {} ({})", what, result, text ? text : "unknown"));
}

}  // namespace

const Api& api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(l.error);
  return l.api;
}

bool library_available(std::string* reason) {
  const Loaded& l = loaded();
  if (reason) *reason = l.error;
  return l.error.empty();
}

bool available_for(int nranks, std::string* reason) {
  static std::map<int, std::string>* answers = new std::map<int, std::string>();
  auto it = answers->find(nranks);
  if (it == answers->end()) {
    std::string why;
    if (library_available(&why)) {
      const cuda::CudaStatus& status = cuda::cuda_status();
      if (!status.available) why = "no usable GPU: " + status.reason;
      else if (status.device_count < nranks)
        why = fmt::format("NCCL needs one GPU per rank: {} ranks, {} GPU{} (ranks that share a GPU "
                          "use the shared-memory algorithms)", nranks, status.device_count,
                          status.device_count == 1 ? "" : "s");
    }
    it = answers->emplace(nranks, why).first;
  }
  if (reason) *reason = it->second;
  return it->second.empty();
}

DataType data_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return Float32;
    case DType::F64: return Float64;
    case DType::I32: return Int32;
    case DType::I64: return Int64;
    case DType::U8:
    case DType::Bool: return Uint8;
    case DType::F16: return Float16;
    case DType::BF16: return Bfloat16;
  }
  return Uint8;
}

RedOp red_op(CollOp op) {
  switch (op) {
    case CollOp::Avg: return Avg;
    case CollOp::Sum: return Sum;
    case CollOp::Prod: return Prod;
    case CollOp::Max: return Max;
    case CollOp::Min: return Min;
  }
  return Sum;
}

UniqueId bootstrap_id(RankContext& ctx, int epoch) {
  const std::string key = fmt::format("nccl/{}", epoch);
  UniqueId id{};
  if (ctx.rank() == 0) {
    check(api().GetUniqueId(&id), "ncclGetUniqueId");
    ctx.store().set(key, std::string_view(id.internal, kUniqueIdBytes));
    return id;
  }
  std::string bytes = ctx.store().wait(key, ctx.policy(), [&ctx] { ctx.poll(); });
  if (bytes.size() != kUniqueIdBytes)
    throw InternalError(fmt::format("NCCL bootstrap: '{}' holds {} bytes, expected {}", key, bytes.size(),
                                    kUniqueIdBytes));
  std::memcpy(id.internal, bytes.data(), kUniqueIdBytes);
  return id;
}

}  // namespace nccl

namespace {

// This process's communicator, for the group it was made in.
struct CommState {
  std::string group;
  nccl::Comm comm = nullptr;
  cuda::CUstream stream = nullptr;
  cuda::DeviceBuffer buffer;
  int epoch = 0;
};

CommState& comm_state() {
  static CommState* state = new CommState();   // never destroyed: workers _exit
  return *state;
}

CommState& communicator(RankContext& ctx) {
  CommState& st = comm_state();
  if (st.group != ctx.group_prefix()) {
    if (st.comm) nccl::api().CommAbort(st.comm);   // a former group's: its peers are gone
    st.comm = nullptr;
    st.group = ctx.group_prefix();
    st.epoch = 0;
  }
  if (st.comm) return st;
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  const nccl::Api& api = nccl::api();
  const cuda::DriverApi& drv = cuda::cuda_driver();
  int devices = 0;
  cuda::cuda_check(drv.cuDeviceGetCount(&devices), "cuDeviceGetCount");
  if (devices < 1) throw Error("NCCL: this rank sees no GPU");
  cuda::CudaDevice::select(ctx.rank() % devices);
  cuda::CudaDevice::get().make_current();
  if (!st.stream) cuda::cuda_check(drv.cuStreamCreate(&st.stream, cuda::kStreamNonBlocking), "cuStreamCreate");
  nccl::UniqueId id = nccl::bootstrap_id(ctx, ++st.epoch);
  nccl::check(api.CommInitRank(&st.comm, ctx.size(), id, ctx.rank()), "ncclCommInitRank");
  return st;
}

}  // namespace

void nccl_reduce(RankContext& ctx, std::span<const ReducePack> packs, CollOp op, bool to_root_only) {
  const nccl::Api& api = nccl::api();
  CommState& st = communicator(ctx);
  const cuda::DriverApi& drv = cuda::cuda_driver();
  cuda::CudaDevice::get().make_current();
  // ncclAvg arrived in 2.10; before it, sum and divide on the host.
  const bool divide_on_host = op == CollOp::Avg && api.version < 21000;
  const CollOp device_op = divide_on_host ? CollOp::Sum : op;

  size_t total = 0;
  std::vector<size_t> offsets;
  for (const ReducePack& p : packs) {
    offsets.push_back(total);
    total += (p.count * dtype_size(p.dtype) + 255) & ~size_t(255);
  }
  if (total == 0) return;
  st.buffer.reserve(total, "the NCCL reduction buffer");
  const cuda::CUdeviceptr base = st.buffer.ptr();
  for (size_t k = 0; k < packs.size(); ++k) {
    const ReducePack& p = packs[k];
    p.input->visit(0, p.count * dtype_size(p.dtype), [&](std::byte* host, size_t at, size_t n) {
      cuda::cuda_check(drv.cuMemcpyHtoDAsync(base + offsets[k] + at, host, n, st.stream), "cuMemcpyHtoDAsync");
    });
  }
  nccl::check(api.GroupStart(), "ncclGroupStart");
  for (size_t k = 0; k < packs.size(); ++k) {
    const ReducePack& p = packs[k];
    if (p.count == 0) continue;
    void* buf = reinterpret_cast<void*>(base + offsets[k]);
    nccl::Result r = to_root_only
        ? api.Reduce(buf, buf, p.count, nccl::data_type(p.dtype), nccl::red_op(device_op), 0, st.comm, st.stream)
        : api.AllReduce(buf, buf, p.count, nccl::data_type(p.dtype), nccl::red_op(device_op), st.comm, st.stream);
    if (r != nccl::kSuccess) {
      api.GroupEnd();
      nccl::check(r, to_root_only ? "ncclReduce" : "ncclAllReduce");
    }
  }
  nccl::check(api.GroupEnd(), "ncclGroupEnd");
  for (size_t k = 0; k < packs.size(); ++k) {
    const ReducePack& p = packs[k];
    if (!p.output) continue;
    p.output->visit(0, p.count * dtype_size(p.dtype), [&](std::byte* host, size_t at, size_t n) {
      cuda::cuda_check(drv.cuMemcpyDtoHAsync(host, base + offsets[k] + at, n, st.stream), "cuMemcpyDtoHAsync");
    });
  }
  cuda::cuda_check(drv.cuStreamSynchronize(st.stream), "cuStreamSynchronize");
  nccl::Result async = nccl::kSuccess;
  api.CommGetAsyncError(st.comm, &async);
  nccl::check(async, "NCCL (asynchronous error)");
  if (divide_on_host)
    for (const ReducePack& p : packs) {
      if (!p.output) continue;
      p.output->visit(0, p.count * dtype_size(p.dtype), [&](std::byte* host, size_t, size_t n) {
        const std::byte* src[] = {host};
        reduce_sources(p.dtype, CollOp::Avg, src, 1, host, n / dtype_size(p.dtype), ctx.size());
      });
    }
}

}  // namespace synk::rt
