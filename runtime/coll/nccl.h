// NCCL between GPUs for reduce and all_reduce, one rank per GPU. libnccl.so.2 is loaded with
// dlopen at first use (never linked), so every synk binary builds and starts without NCCL or a
// GPU; where either is missing, the master refuses the algorithm with the reason before any rank
// moves. The communicator is bootstrapped through the process group's Store: rank 0 draws the
// unique id and publishes it, the other ranks wait for it. NCCL_SOCKET_IFNAME defaults to "lo"
// (the bootstrap otherwise picks the first interface, which may not route between local processes).
//
// The shared variables live in host memory (the runtime has no GPU backend yet), so each pack is
// copied to a device buffer, reduced there by NCCL, and copied back. Types below mirror nccl.h
// (2.x ABI); runtime/coll/nccl_test.cpp checks them against the header where it is installed.
// Environment: SYNK_NCCL_LIB_DIR, a ':'-separated list of directories searched for libnccl.so.2
// after the loader's default path.
#pragma once

#include <span>
#include <string>

#include "runtime/coll/staging.h"

namespace synk::rt {

class RankContext;

namespace nccl {

using Result = int;                        // ncclResult_t
using Comm = struct ncclComm*;             // ncclComm_t
using Stream = void*;                      // cudaStream_t == CUstream
inline constexpr size_t kUniqueIdBytes = 128;
struct UniqueId {
  char internal[kUniqueIdBytes];
};
enum DataType : int {
  Int8 = 0, Uint8 = 1, Int32 = 2, Uint32 = 3, Int64 = 4, Uint64 = 5, Float16 = 6, Float32 = 7, Float64 = 8,
  Bfloat16 = 9
};
enum RedOp : int { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4 };
inline constexpr Result kSuccess = 0;

struct Api {
  Result (*GetVersion)(int* version) = nullptr;
  Result (*GetUniqueId)(UniqueId* id) = nullptr;
  Result (*CommInitRank)(Comm* comm, int nranks, UniqueId id, int rank) = nullptr;
  Result (*CommDestroy)(Comm comm) = nullptr;
  Result (*CommAbort)(Comm comm) = nullptr;
  Result (*CommGetAsyncError)(Comm comm, Result* error) = nullptr;
  const char* (*GetErrorString)(Result result) = nullptr;
  Result (*AllReduce)(const void* send, void* recv, size_t count, DataType type, RedOp op, Comm comm,
                      Stream stream) = nullptr;
  Result (*Reduce)(const void* send, void* recv, size_t count, DataType type, RedOp op, int root,
                   Comm comm, Stream stream) = nullptr;
  Result (*GroupStart)() = nullptr;
  Result (*GroupEnd)() = nullptr;
  int version = 0;                          // 22809 for 2.28.9
  std::string path;                         // the library that was loaded
};

// The library, loaded once per process; throws synk::Error saying why it cannot be.
const Api& api();
// Whether the library loads, without throwing; `reason` says why not.
bool library_available(std::string* reason);

// Whether `nranks` ranks can use NCCL here: the library loads and there is a GPU for every rank.
// The answer is computed once per rank count (the GPU probe runs in a child process, so the
// master never initialises CUDA itself). `reason` says why not.
bool available_for(int nranks, std::string* reason);

DataType data_type(DType dtype);
RedOp red_op(CollOp op);

// The unique id of the group's communicator number `epoch`: rank 0 draws it and publishes it in
// the store under "nccl/<epoch>", the others wait for it (polling for dead peers while they wait).
UniqueId bootstrap_id(RankContext& ctx, int epoch);

}  // namespace nccl

// Reduces every pack over NCCL: into every rank's output (all_reduce), or into rank 0's only.
void nccl_reduce(RankContext& ctx, std::span<const ReducePack> packs, CollOp op, bool to_root_only);

}  // namespace synk::rt
