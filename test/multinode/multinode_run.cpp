// A program run both on one node and on several "nodes" under mpirun (run_multinode.sh): calls
// with every reduce mode and call option, shared-variable collectives by global rank, a random op
// drawn at the call's rows, and a deterministic training step. It writes every result it sees, in
// hex, to OUT.node<K> (one file per leader); the script then checks that every leader of a
// K-node run wrote the same file as the single-node run with the same total rank count, bit for
// bit. The values are chosen so that the cross-node arithmetic (avg as a sum of the nodes'
// averages) is exact.
//
// Fault modes: --kill-worker NODE kills a worker of NODE after the calls; --stop-leader NODE stops
// that leader (SIGSTOP) there; --stop-in-transfer NODE stops it just before an all_reduce of
// 800 KB, which the other leaders make through a blocking MPI transfer; --mismatch makes node 1 call with another batch (every leader must
// get the same UsageError, and the job goes on; then node 1 alone passes an input of the wrong shape, and
// then a batch_s for another rank count, which the API refuses before the engine: every leader
// must fail those calls and stay in step); --shape-mismatch gives each node's ranks a value of
// another length (3 + node, or BASE + node) before an all_reduce (the job must end naming it).
//
//   multinode_run RANKS_PER_NODE OUT [--kill-worker NODE | --kill-leader NODE | --stop-leader NODE | --mismatch |
//                                     --shape-mismatch [BASE] | --close-early NODE]
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "synk/jit.h"
#include "synk/train_step.h"

using namespace synk;

namespace {

constexpr const char* kProgram = R"(
shared acc: f32[4];
shared count: i32[2];
shared parts: f64[k];
shared lin_w: f32[3, 2] = uniform(seed=5, low=-0.5, high=0.5);
shared lin_b: f32[2];
shared rows_s: f32[m, 3] sliceable;
optimizer opt = momentum(lr=0.05, momentum=0.9);

fn stats(scatter x: f32[n, 3]) {
  out total: sum = sum(x);
  out column_means: avg = mean(x, axis=0);
  out biggest: max = max(x);
  out smallest: min = min(x);
  out doubled: gather = x * 2;
  out noisy: sum = sum(x * uniform_like(x));
}

fn train(scatter x: f32[n, 3], scatter y: f32[n, 2]) {
  let d = x @ lin_w + lin_b - y;
  out loss: avg = mean(d * d);
  minimize mean(d * d) over lin_w, lin_b using opt;
}
)";

std::string hex(const Array& a) {
  std::string s = fmt::format("{}{}:", rt::dtype_name(a.dtype), rt::shape_string(a.shape));
  for (std::byte b : a.bytes) s += fmt::format("{:02x}", unsigned(b));
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: multinode_run RANKS_PER_NODE OUT [--kill-worker NODE]\n");
    return 2;
  }
  const int local = std::atoi(argv[1]);
  const std::string mode = argc >= 4 ? argv[3] : "";
  const int fault_node = argc >= 5 ? std::atoi(argv[4]) : -1;
  const int kill_node = mode == "--kill-worker" ? fault_node : -1;
  const int kill_leader_node = mode == "--kill-leader" ? fault_node : -1;
  const int stop_node = mode == "--stop-leader" ? fault_node : -1;
  const int transfer_stop_node = mode == "--stop-in-transfer" ? fault_node : -1;
  try {
    jit::Module m = jit::compile_string(kProgram);
    Function stats = m.function("stats");
    TrainStep step = m.train_step("train");
    step.set_deterministic(4);
    synk::fork(local);
    std::ofstream(fmt::format("{}.pid{}", argv[2], synk::node())) << getpid() << "\n";   // for the clean-up checks
    std::ofstream out(fmt::format("{}.node{}", argv[2], synk::node()));
    out << "ranks " << synk::size() << "\n";
    const int64_t rows = 37;
    std::vector<float> x, y;
    for (int64_t i = 0; i < rows; ++i) {
      for (int j = 0; j < 3; ++j) x.push_back(float((i * 7 + j * 3) % 11) - 5.0f);
      for (int j = 0; j < 2; ++j) y.push_back(float((i * 5 + j) % 7) * 0.25f);
    }
    Data dx = data<float>(x, {rows, 3}), dy = data<float>(y, {rows, 2});
    auto dump = [&](const char* what, const Outputs& o) {
      for (size_t k = 0; k < o.size(); ++k) out << what << " " << k << " " << hex(o[k]) << "\n";
    };
    dump("all", stats({dx}));
    dump("count", stats({dx}, {.batch = 20}));
    dump("range", stats({dx}, {.batch = Range{3, 30}, .num_slices = 3}));
    // Only node 0's list counts (the others pass a different one on purpose).
    std::vector<int64_t> list = {5, 1, 33, 8, 8, 20, 0, 36, 12, 2, 29};
    if (synk::node() != 0) list.assign(list.size(), 0);
    dump("list", stats({dx}, {.batch = list, .num_slices = 2}));
    dump("subset", stats({dx}, {.output_subset = {"biggest", "total"}}));
    if (mode == "--mismatch") {
      try {
        stats({dx}, {.batch = synk::node() == 1 ? 19 : 20});
        out << "mismatch not detected\n";
      } catch (const UsageError& e) {
        out << "mismatch caught: " << e.what() << "\n";
      }
      // A mistake only node 1's own checks see: every leader must fail that call, and the next
      // call must pair with the next call on every node (a silently mixed answer otherwise).
      Data wrong = data<float>(std::vector<float>(size_t(rows) * 4, 1.0f), {rows, 4});
      try {
        stats({synk::node() == 1 ? wrong : dx}, {.batch = 20});
        out << "local mistake not detected\n";
      } catch (const Error& e) {
        out << "local mistake caught\n";
      }
      dump("after the mistake", stats({dx}, {.batch = 20}));
      // A mistake the API's own front door sees on node 1 alone (batch_s for another rank count),
      // before the call reaches the engine: the same, through detail::refuse_call.
      try {
        CallOptions options{.batch = 20};
        if (synk::node() == 1)
          options.batch_s = BatchS::per_rank(std::vector<Rows>(size_t(synk::local_size()) + 1, Rows(Range{0, 1})));
        stats({dx}, options);
        out << "front-door mistake not detected\n";
      } catch (const Error& e) {
        out << "front-door mistake caught\n";
      }
      dump("after the front-door mistake", stats({dx}, {.batch = 20}));
    }
    if (mode == "--shape-mismatch") {
      // Every rank of node K holds K + 3 values (or, with a base, BASE + K: 1000 doubles go
      // through the direct exchange between 2 leaders): an all_reduce must refuse the different lengths.
      Var parts = m.runtime_module().var("parts");
      const int base = argc >= 5 ? std::atoi(argv[4]) : 3;
      for (int r = 0; r < synk::size(); ++r) {
        std::vector<double> v(size_t(base + r / synk::local_size()), 1.0);
        set_value(r, parts, ArrayRef{v.data(), rt::DType::F64, {int64_t(v.size())}});
      }
      try {
        all_reduce(parts, "sum");
        out << "shape mismatch not detected\n";
      } catch (const UsageError& e) {
        out << "shape mismatch caught: " << e.what() << "\n";
      }
    }
    if (mode == "--close-early") {   // node NODE closes; the others make one more call
      if (fault_node == synk::node()) {
        synk::close();
        out << "closed early\n";
        return 0;
      }
      dump("after the close", stats({dx}));
    }
    if (kill_node == synk::node() && synk::local_size() > 1) kill(synk::worker_pid(1), SIGKILL);
    if (stop_node == synk::node()) raise(SIGSTOP);
    if (kill_leader_node == synk::node()) raise(SIGKILL);   // the OOM killer: no handler runs
    if (transfer_stop_node >= 0) {
      Var big = m.runtime_module().var("parts");
      std::vector<double> values(100000, 1.0);
      synk::broadcast(big, ArrayRef{values.data(), rt::DType::F64, {int64_t(values.size())}});
      if (transfer_stop_node == synk::node()) raise(SIGSTOP);
      all_reduce(big, "sum");
    }
    // Collectives by global rank: rank r holds r+1 in every element.
    Var acc = m.runtime_module().var("acc"), count = m.runtime_module().var("count");
    for (int r = 0; r < synk::size(); ++r) {
      std::vector<float> a(4, float(r + 1));
      std::vector<int32_t> c = {r, 2 * r};
      set_value(r, acc, ArrayRef{a.data(), rt::DType::F32, {4}});
      set_value(r, count, ArrayRef{c.data(), rt::DType::I32, {2}});
    }
    for (int r = 0; r < synk::size(); ++r) out << "get " << r << " " << hex(get_value(r, acc)) << "\n";
    out << "gather " << hex(gather(acc, 1)) << " " << hex(gather(count, 0)) << "\n";
    Var parts = m.runtime_module().var("parts");
    for (int r = 0; r < synk::size(); ++r) {   // rank r holds r + 1 values
      std::vector<double> p(size_t(r + 1), 0.5 * r);
      set_value(r, parts, ArrayRef{p.data(), rt::DType::F64, {r + 1}});
    }
    out << "gather0 " << hex(gather(parts, 0)) << "\n";
    all_gather(parts);
    for (int r = 0; r < synk::size(); ++r) out << "all_gather " << r << " " << hex(get_value(r, parts)) << "\n";
    all_reduce(acc, "avg");
    all_reduce(count, "sum");
    for (int r = 0; r < synk::size(); ++r)
      out << "reduced " << r << " " << hex(get_value(r, acc)) << " " << hex(get_value(r, count)) << "\n";
    // 1,500 doubles (12 KB): between 2 leaders, one direct exchange and a local reduction in node
    // order (runtime/coll/across_nodes.h); elsewhere MPI's all_reduce. Exact values either way.
    for (const char* op : {"sum", "max"}) {
      for (int r = 0; r < synk::size(); ++r) {
        std::vector<double> wide(1500);
        for (size_t i = 0; i < wide.size(); ++i) wide[i] = double((i * 7 + size_t(r) * 3) % 23) * 0.5 - r;
        set_value(r, parts, ArrayRef{wide.data(), rt::DType::F64, {int64_t(wide.size())}});
      }
      all_reduce(parts, op);
      out << "wide " << op << " " << hex(get_value(0, parts)) << " " << hex(get_value(synk::size() - 1, parts)) << "\n";
    }
    // scatter: node 0's values and batch (the others pass other ones), split by global rank; then
    // every rank's share by get_value, and the lengths and shapes of every rank.
    Var rows_s = m.runtime_module().var("rows_s");
    std::vector<int64_t> picked = {36, 2, 2, 17, 9, 0, 30, 31, 5, 11, 23, 4, 19};
    if (synk::node() != 0) picked.assign(3, 1);
    scatter(rows_s, dx, picked);
    for (int r = 0; r < synk::size(); ++r) out << "scattered " << r << " " << hex(get_value(r, rows_s)) << "\n";
    for (int64_t length : get_lengths(rows_s)) out << "length " << length << "\n";
    // 3 rows over 2 nodes x 3 ranks: global ranks 1, 3 and 5 get one each, not the node's split of its rows.
    scatter(rows_s, dx, Batch(Range{0, 3}));
    for (int64_t length : get_lengths(rows_s)) out << "length of 3 " << length << "\n";
    for (const auto& shape : get_shapes(acc)) out << "shape " << rt::shape_string(shape) << "\n";
    std::vector<uint8_t> bytes(size_t(rows) * 3);   // converted to f32 on the way
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 7);
    scatter(rows_s, ArrayRef{bytes.data(), rt::DType::U8, {rows, 3}}, Batch(Range{4, 4 + 2 * synk::size() + 1}));
    out << "scattered u8 " << hex(get_value(synk::size() - 1, rows_s)) << "\n";
    try {   // a bad value on node 0: the same UsageError on every leader
      std::vector<float> flat(12, 1.0f);
      scatter(rows_s, ArrayRef{flat.data(), rt::DType::F32, {synk::node() == 0 ? 12 : 4, synk::node() == 0 ? 1 : 3}});
      out << "bad scatter not detected\n";
    } catch (const UsageError& e) {
      out << "bad scatter: " << e.what() << "\n";
    }
    std::vector<int32_t> last = {100, -3};
    set_value(synk::size() - 1, count, ArrayRef{last.data(), rt::DType::I32, {2}});
    out << "max " << hex(reduce(count, "max", false)) << "\n";
    std::vector<float> fresh = {1.5f, -2, 3, 0.25f};
    if (synk::node() != 0) fresh.assign(4, 9.0f);   // node 0's value wins
    broadcast(acc, ArrayRef{fresh.data(), rt::DType::F32, {4}});
    out << "broadcast " << hex(get_value(synk::size() - 1, acc)) << "\n";
    for (int k = 0; k < 6; ++k) {
      std::vector<int64_t> batch;
      for (int64_t j = 0; j < 9 + 3 * k; ++j) batch.push_back((k * 13 + j * 5) % rows);
      dump("step", step({dx, dy}, {.batch = batch}));
    }
    for (int r = 0; r < synk::size(); ++r)
      out << "trained " << r << " " << hex(get_value(r, m.runtime_module().var("lin_w"))) << " " << hex(get_value(r, m.runtime_module().var("lin_b")))
          << "\n";
    synk::close();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "multinode_run (node %d): %s\n", synk::node(), e.what());
    return 1;
  }
}
