// Fused elementwise chains, and the elementwise epilogue other generators apply to their output
// values. Every node of a chain computes at the same flat index (views keep flat indices, so a
// node whose output is a reshaped view of another's still lines up); inputs from outside the
// group are loaded with numpy broadcasting against the node's own output shape. Intermediate
// values live in registers; only tensors read outside the group (or returned) are stored.
//
// The tile's vector_width sets how many consecutive elements a thread takes per step (as
// vector_lanes() allows): the chain runs once per lane in a constant-trip loop the compilers
// unroll, with contiguous inputs loaded and every stored output written as whole vectors around it.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "data_index.h"
#include "generators.h"
#include "gpusim/op_catalog.h"

namespace gpusim::codegen {

namespace {

bool in_list(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Elements of `in` (broadcast to `out`) that are consecutive in memory along consecutive output
// elements: the product of the trailing dims both shapes share (right-aligned); 1 for a scalar.
int64_t contiguous_run(const Shape& out, const Shape& in) {
  if (shape_elements(in).value_or(0) <= 1 || in.size() > out.size()) return 1;
  const size_t off = out.size() - in.size();
  int64_t run = 1;
  for (size_t a = out.size(); a-- > off && out[a] == in[a - off];) run *= out[a];
  return run;
}

// Loads and stores of a vector step (see Lanes in generators.h): arrays filled before the lane
// loop and stored after it.
class LaneArrays {
 public:
  LaneArrays(ArgList& args, Lanes& l) : args_(args), l_(l) {}
  // The per-lane expression of input t (consecutive over the step), loaded at `base`.
  std::string load(TensorId t, const std::string& base) {
    const std::string key = fmt::format("{}@{}", args_.input(t), base);
    auto it = loaded_.find(key);
    if (it != loaded_.end()) return it->second;
    const std::string arr = fmt::format("x{}", loaded_.size());
    l_.pre += fmt::format("    {} {}[{}]; {}\n", args_.is_int(t) ? "int" : "float", arr, l_.width,
                          args_.load_vector(t, base, arr, l_.width));
    return loaded_[key] = fmt::format("{}[{}]", arr, l_.lane);
  }
  // The per-lane statement storing `value` into output t.
  std::string store(TensorId t, const std::string& value) {
    const bool is_int = args_.is_int(t);
    const std::string arr = fmt::format("y{}", args_.output(t));
    l_.pre += fmt::format("    {} {}[{}];\n", is_int ? "int" : "float", arr, l_.width);
    l_.post += "    " + args_.store_vector(t, l_.base, arr, l_.width) + "\n";
    return fmt::format("{}[{}] = {}({});", arr, l_.lane, is_int ? "int" : "float", value);
  }

 private:
  ArgList& args_;
  Lanes& l_;
  std::map<std::string, std::string> loaded_;
};

}  // namespace

bool escapes(const GenContext& c, TensorId t) {
  const TensorId r = c.root(t);
  if (c.idx.graph_output[static_cast<size_t>(r)]) return true;
  int inside = 0;
  for (int ni : c.k.nodes) {
    const Node& n = c.g.nodes[static_cast<size_t>(ni)];
    for (TensorId in : n.inputs) {
      if (in != kNoTensor && c.root(in) == r) ++inside;
    }
  }
  return c.idx.readers[static_cast<size_t>(r)] > inside;
}

Result<std::string> elementwise_tail(const GenContext& c, ArgList& args, int skip, const std::string& value,
                                     const std::string& index, const Shape& space, Lanes* lanes) {
  const int64_t n_space = shape_elements(space).value_or(-1);
  std::optional<LaneArrays> vec;
  if (lanes && lanes->width > 1) vec.emplace(args, *lanes);
  auto store = [&](TensorId t, const std::string& v) { return vec ? vec->store(t, v) : args.store(t, index, v); };
  std::map<TensorId, std::pair<std::string, bool>> vals;  // root -> (variable, is int)
  std::string code;
  if (skip >= 0) {
    const Node& a = c.node(static_cast<size_t>(skip));
    const TensorId out = a.outputs.at(0);
    const bool out_int = !dtype_is_float(c.tensor(out).dtype);
    vals[c.root(out)] = {value, out_int};
    if (escapes(c, out) && !in_list(c.k.recomputed, c.k.nodes[static_cast<size_t>(skip)])) {
      code += "    " + store(out, value) + "\n";
    }
  }
  int tmp = 0;
  // Data movement folded into this kernel (a permute, slice, pad, concat, split or broadcast its
  // element-wise nodes read): never stored, read through index math where a node loads it.
  FoldedData folded(c, args);
  for (size_t pos = 0; pos < c.k.nodes.size(); ++pos) {
    if (static_cast<int>(pos) == skip || folded.folded(pos)) continue;
    const Node& n = c.node(pos);
    if (op_class(n.domain, n.op_type) == OpClass::kDataMovement) {
      return c.unsupported(n, "is not data movement gpusim folds into its reader (Transpose, Slice, Pad, Concat, Split "
                              "and Expand fold); run it as a kernel of its own");
    }
    if (op_class(n.domain, n.op_type) != OpClass::kElementwise) {
      return c.unsupported(n, fmt::format("fused into a {} kernel but not elementwise; only elementwise ops fuse here",
                                          skip >= 0 ? std::string(c.anchor().op_type) : "elementwise"));
    }
    if (n.outputs.empty() || n.outputs[0] == kNoTensor) return c.unsupported(n, "no output");
    const Tensor& ot = c.tensor(n.outputs[0]);
    if (ot.elements() != n_space) {
      return c.unsupported(n, fmt::format("output {} has {} elements, the fused kernel's index space {} has {}; "
                                          "broadcasting inside a fused chain runs unfused",
                                          shape_str(ot.shape), ot.elements(), shape_str(space), n_space));
    }
    std::vector<std::string> ins;
    std::vector<bool> ints;
    for (size_t ik = 0; ik < n.inputs.size(); ++ik) {
      const TensorId t = n.inputs[ik];
      if (t == kNoTensor) {
        ins.emplace_back();
        ints.push_back(false);
        continue;
      }
      if (auto it = vals.find(c.root(t)); it != vals.end()) {
        if (c.tensor(t).elements() != n_space) {
          return c.unsupported(n, "reads a value computed in this kernel with broadcasting");
        }
        ins.push_back(it->second.first);
        ints.push_back(it->second.second);
        continue;
      }
      const Tensor& it = c.tensor(t);
      if (it.is_sequence || it.dtype == DType::kString) return c.unsupported(n, "sequence or string input");
      if (folded.produces(t)) {
        auto v = folded.value_at(t, broadcast_index(ot.shape, it.shape, index), code);
        if (!v) return v.error();
        ins.push_back(*v);
        ints.push_back(args.is_int(t));
        continue;
      }
      std::string why;
      if (auto qi = quant_param_index(c, n, ik, ot.shape, index, &why)) {  // a per-axis scale or zero point
        if (qi->empty()) return c.unsupported(n, why);
        ins.push_back(args.load(t, *qi));
      } else if (vec && contiguous_run(ot.shape, it.shape) % lanes->width == 0) {
        ins.push_back(vec->load(t, broadcast_index(ot.shape, it.shape, lanes->base)));
      } else {
        ins.push_back(args.load(t, broadcast_index(ot.shape, it.shape, index)));
      }
      ints.push_back(args.is_int(t));
    }
    bool int_out = false;
    auto e = scalar_op(c, n, ins, ints, int_out);
    if (!e) return e.error();
    const std::string var = fmt::format("e{}", tmp++);
    code += fmt::format("    {} {} = {};\n", int_out ? "int" : "float", var, *e);
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const TensorId t = n.outputs[o];
      if (t == kNoTensor) continue;
      if (o == 0) {
        vals[c.root(t)] = {var, int_out};
        if (escapes(c, t) && !in_list(c.k.recomputed, c.k.nodes[pos])) code += "    " + store(t, var) + "\n";
      } else if (n.op_type == "Dropout") {  // the mask: all kept in inference
        if (escapes(c, t)) code += "    " + store(t, "1") + "\n";
      } else {
        return c.unsupported(n, "second output");
      }
    }
  }
  // Folded data movement whose result leaves the kernel (a kernel of data movement alone: a roll,
  // a pad of a slice) is stored where it is read: its value at each index of the kernel's space.
  for (size_t pos = 0; pos < c.k.nodes.size(); ++pos) {
    if (!folded.folded(pos)) continue;
    const Node& n = c.node(pos);
    for (TensorId t : n.outputs) {
      if (t == kNoTensor || !escapes(c, t) || in_list(c.k.recomputed, c.k.nodes[pos])) continue;
      if (c.tensor(t).elements() != n_space) {
        return c.unsupported(n, fmt::format("output {} leaves the kernel but does not have the kernel's index space {}",
                                            shape_str(c.tensor(t).shape), shape_str(space)));
      }
      auto v = folded.value_at(t, index, code);
      if (!v) return v.error();
      code += "    " + store(t, *v) + "\n";
    }
  }
  return code;
}

Result<Kernel> gen_elementwise(const GenContext& c) {
  // The index space: the last node's output (every node must match it in element count).
  const Node& last = c.node(c.k.nodes.size() - 1);
  if (last.outputs.empty() || last.outputs[0] == kNoTensor) return c.unsupported(last, "no output");
  const Shape space = c.tensor(last.outputs[0]).shape;
  const int64_t n = shape_elements(space).value_or(0);
  if (n >= (int64_t{1} << 31)) return c.unsupported(last, "over 2^31 elements: 32-bit indexing");
  Kernel k;
  ArgList args(c);
  // vector_width consecutive elements per thread-step (vector loads and stores where contiguous).
  Lanes lanes;
  lanes.width = vector_lanes(c.k.tile.vector_width, n);
  auto tail = elementwise_tail(c, args, -1, "", "i", space, &lanes);
  if (!tail) return tail.error();
  const uint32_t block = static_cast<uint32_t>(std::clamp(c.k.tile.threads > 0 ? c.k.tile.threads : 256, 32,
                                                          std::min(1024, c.opts.max_threads)));
  const int ipt = std::clamp(c.k.tile.items_per_thread, 1, 8);
  const int w = lanes.width;
  const int64_t steps = n / w;  // w divides n
  const int64_t threads = (steps + ipt - 1) / ipt;
  k.name = fmt::format("ew_{}", c.k.nodes.front());
  k.cls = "elementwise";
  k.block = {block, 1, 1};
  k.groups = groups_for(threads, block);
  const int64_t launched = int64_t{k.groups[0]} * k.groups[1] * block;
  // Each thread takes items_per_thread steps, `launched` steps apart (coalesced across the group);
  // a step is w consecutive elements from i0.
  if (w == 1) {
    k.body = fmt::format("  int t = {} * BLOCK_X + LID_X;\n  for (int r = 0; r < {}; ++r) {{\n    int i = t + r * {};\n"
                         "    if (i >= {}) return;\n{}  }}\n",
                         kLinearGroup, ipt, launched, n, *tail);
  } else {
    k.body = fmt::format("  int t = {} * BLOCK_X + LID_X;\n  for (int r = 0; r < {}; ++r) {{\n    int i0 = (t + r * {}) * {};\n"
                         "    if (i0 >= {}) return;\n{}    for (int j = 0; j < {}; ++j) {{\n    int i = i0 + j;\n{}    }}\n{}  }}\n",
                         kLinearGroup, ipt, launched, w, n, lanes.pre, w, *tail, lanes.post);
  }
  k.args = std::move(args.args);
  return k;
}

}  // namespace gpusim::codegen
