// Common-subexpression elimination: two nodes with the same op, type, operands (after earlier
// merges) and attributes compute the same value, so the later one is replaced by the earlier.
// Float constants compare by bit pattern so that NaN constants merge too.
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "compiler/passes/passes.h"

namespace synk::compiler {
namespace {

std::string node_key(const ir::Node& n) {
  uint64_t value_bits;
  std::memcpy(&value_bits, &n.attrs.value, sizeof value_bits);
  std::string key = fmt::format("{}|{}|{}|", int(n.op), int(n.type.dtype), n.type.shape.size());
  for (const ir::Dim& d : n.type.shape) key += d.is_symbolic() ? d.symbol + "," : fmt::format("{},", d.size);
  key += "|";
  for (ir::NodeId id : n.operands) key += fmt::format("{},", id);
  const ir::Attrs& a = n.attrs;
  key += fmt::format("|{}|{:x}|{}|{}|{}|{}|{}|{}|{}|", a.index, value_bits, a.ivalue, fmt::join(a.axes, ","),
                     a.keepdims, fmt::join(a.perm, ","), a.axis, a.start, a.stop);
  key += fmt::format("{}|{}|{}|{}", a.num_classes, a.salt, a.global_rows, a.reverse);   // random ops: distinct salts differ
  const ir::Window2d& w = a.window;   // conv2d and pooling: every parameter
  key += fmt::format("|{},{},{},{},{},{},{},{},{},{},{},{},{},{}", w.kh, w.kw, w.stride_h, w.stride_w, w.pad_top,
                     w.pad_bottom, w.pad_left, w.pad_right, w.dilation_h, w.dilation_w, w.groups, w.in_h, w.in_w,
                     w.count_include_pad);
  return key;
}

}  // namespace

ir::Function eliminate_common_subexpressions(const ir::Function& fn) {
  std::map<std::string, ir::NodeId> seen;
  return rebuild(fn, [&seen](ir::Function& out, ir::Node node) -> ir::NodeId {
    std::string key = node_key(node);
    auto it = seen.find(key);
    if (it != seen.end()) return it->second;
    ir::NodeId id = out.add(std::move(node));
    seen.emplace(std::move(key), id);
    return id;
  });
}

}  // namespace synk::compiler
