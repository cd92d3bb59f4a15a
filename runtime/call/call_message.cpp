// Encoding and decoding of the Call command's message (call_message.h) with base/wire.h. Both
// ends are the same binary; the decoder still checks every length and enum value so that a
// corrupt message is an InternalError, never a wild pointer in a worker.
#include "runtime/call/call_message.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "base/wire.h"

namespace synk::rt {
namespace {

template <class Enum>
Enum checked_enum(wire::Reader& r, Enum last, const char* what) {
  auto raw = r.pod<std::underlying_type_t<Enum>>();
  if (raw > static_cast<std::underlying_type_t<Enum>>(last))
    throw InternalError(fmt::format("call message: invalid {} {}", what, int(raw)));
  return static_cast<Enum>(raw);
}

RowSelection::Kind read_kind(wire::Reader& r) {
  return checked_enum(r, RowSelection::Kind::List, "row selection");
}

DType read_dtype(wire::Reader& r) {
  return checked_enum(r, DType::BF16, "dtype");
}

void put_list(wire::Writer& w, const IndexListRef& ref) {
  w.str(ref.segment);
  w.pod(ref.offset);
  w.pod(ref.dtype);
  w.pod(ref.count);
}

IndexListRef get_list(wire::Reader& r) {
  IndexListRef ref;
  ref.segment = r.str();
  ref.offset = r.pod<uint64_t>();
  ref.dtype = read_dtype(r);
  ref.count = r.pod<int64_t>();
  return ref;
}

}  // namespace

std::string encode_call_message(const CallMessage& m) {
  wire::Writer w;
  w.pod(m.function);
  w.pod(m.num_slices);
  w.pod(m.micro_shard_rows);
  w.pod(m.world_ranks);
  w.pod(m.rank_offset);
  w.pod<uint8_t>(m.has_scattered);
  w.pod<uint8_t>(m.has_sliceable);
  w.pod<uint8_t>(m.empty_call);
  w.pod(m.positions);
  w.pod(m.select);
  w.pod(m.select_start);
  put_list(w, m.select_list);
  w.pod<uint64_t>(m.inputs.size());
  for (const InputRef& in : m.inputs) {
    w.pod(in.use);
    w.pod(in.dtype);
    w.vec(in.shape);
    w.str(in.segment);
  }
  w.vec(m.sliceable_slots);
  w.pod<uint64_t>(m.shared_rows.size());
  for (const SharedRowsRef& rows : m.shared_rows) {
    w.pod(rows.kind);
    w.pod(rows.start);
    w.pod(rows.count);
    put_list(w, rows.list);
  }
  w.vec(m.outputs);
  w.pod(m.seed);
  w.pod(m.step);
  w.pod(m.stream.update);
  if (m.stream.update >= 0) {
    w.pod(m.stream.bucket_bytes);
    w.pod(m.stream.total_bytes);
    w.pod(m.stream.dtype);
    w.str(m.stream.staging);
    w.vec(m.stream.rank_scale);
    w.pod(m.stream.across_nodes);
  }
  return w.take();
}

CallMessage decode_call_message(std::string_view bytes) {
  wire::Reader r(bytes);
  CallMessage m;
  m.function = r.pod<int32_t>();
  m.num_slices = r.pod<int64_t>();
  m.micro_shard_rows = r.pod<int64_t>();
  m.world_ranks = r.pod<int32_t>();
  m.rank_offset = r.pod<int32_t>();
  m.has_scattered = r.pod<uint8_t>() != 0;
  m.has_sliceable = r.pod<uint8_t>() != 0;
  m.empty_call = r.pod<uint8_t>() != 0;
  m.positions = r.pod<int64_t>();
  m.select = read_kind(r);
  m.select_start = r.pod<int64_t>();
  m.select_list = get_list(r);
  uint64_t ninputs = r.pod<uint64_t>();
  if (ninputs > bytes.size()) throw InternalError("call message: corrupt input count");
  m.inputs.resize(ninputs);
  for (InputRef& in : m.inputs) {
    in.use = checked_enum(r, InputUse::Broadcast, "input use");
    in.dtype = read_dtype(r);
    in.shape = r.vec<int64_t>();
    in.segment = r.str();
  }
  m.sliceable_slots = r.vec<int32_t>();
  uint64_t nranks = r.pod<uint64_t>();
  if (nranks > bytes.size()) throw InternalError("call message: corrupt rank count");
  m.shared_rows.resize(nranks);
  for (SharedRowsRef& rows : m.shared_rows) {
    rows.kind = read_kind(r);
    rows.start = r.pod<int64_t>();
    rows.count = r.pod<int64_t>();
    rows.list = get_list(r);
  }
  m.outputs = r.vec<int32_t>();
  m.seed = r.pod<uint64_t>();
  m.step = r.pod<uint64_t>();
  m.stream.update = r.pod<int32_t>();
  if (m.stream.update >= 0) {
    m.stream.bucket_bytes = r.pod<uint64_t>();
    m.stream.total_bytes = r.pod<uint64_t>();
    m.stream.dtype = read_dtype(r);
    m.stream.staging = r.str();
    m.stream.rank_scale = r.vec<double>();
    m.stream.across_nodes = r.pod<uint8_t>();
  }
  if (!r.done()) throw InternalError("call message: bytes left over after the message");
  return m;
}

}  // namespace synk::rt
