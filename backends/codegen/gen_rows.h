// Inside codegen: what the reduction, pooling and data-movement generators share — mixed-radix
// index expressions, a tensor seen as rows to reduce, and the emitter of row-reduction loops
// (a group per row with a shared-memory tree, or a thread per row; see gen_reduce.cpp).
//
//   Rows r = rows_of_mask(x.shape, {false, true, true});    // reduce axes 1 and 2
//   RowEmitter e(c, r);
//   std::string body = e.pass("acc", "0.0f", "rd_add", "float(LD0(ix))", "x");
//   body += e.once("    ST1(rw, acc);\n");
//   e.finish(kernel, "", body);
#pragma once

#include <string>
#include <vector>

#include "generators.h"

namespace gpusim::codegen {

// sum over d of coordinate d of `v` (row-major over `sizes`) times strides[d], as an int
// expression with constants baked in; "0" when every size is 1 (or one is 0).
std::string radix(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, const std::string& v);

// A tensor as `rows` rows of `len` elements: element j of row r is at base(r) + offset(j).
struct Rows {
  std::vector<int64_t> rsz, rst;  // kept dims (merged where adjacent), their strides in the input
  std::vector<int64_t> lsz, lst;  // reduced dims
  int64_t rows = 1, len = 1;
  std::string base(const std::string& v) const { return radix(rsz, rst, v); }
  std::string offset(const std::string& v) const { return radix(lsz, lst, v); }
};
// Reduced dims are those with red[d]; the rows enumerate the kept dims in order, so row r is
// also the flat index of the reduced output (with or without keepdims).
Rows rows_of_mask(const Shape& s, const std::vector<bool>& red);
// [outer, len, inner] reduced over the middle axis.
Rows rows_split(int64_t outer, int64_t len, int64_t inner);

// Emits row-reduction code. The body it builds starts with `rw` (the row), `xb` (its base); loops
// run `jj` over the row with `ix` = the input index of element jj.
class RowEmitter {
 public:
  RowEmitter(const GenContext& c, const Rows& r);
  bool per_thread() const { return per_thread_; }
  // for each element jj of the row (this thread's share of it): `body` with ix defined.
  std::string loop(const std::string& body) const;
  // Statements defining `float x` = the anchor's first input at ix inside loop(): input_value(),
  // or — where the tile's vector_width applies (a group per row, the reduced dims contiguous,
  // row length and row strides multiples of the width, no fused prologue) — the element of a
  // vector loaded at the head of each loop step, so every thread reads whole 16-byte runs.
  Result<std::string> input_x(ArgList& args);
  int vector_width() const { return vec_; }
  // Combines each thread's `var` with fn (an FN (float, float) -> float) across the group; after
  // it every thread holds the row's value. Nothing in the thread-per-row scheme.
  std::string combine(const std::string& var, const std::string& fn);
  // Same for a (value, index) pair with the FN rd_beats(va, ia, vb, ib) the caller declares.
  std::string combine_arg(const std::string& v, const std::string& i);
  // Statements run once per row.
  std::string once(const std::string& stmts) const;
  // float var = init; loop { xdef; var = fn(var, term) }; combine. `xdef`: statements defining
  // float x (input_value()).
  std::string pass(const std::string& var, const std::string& init, const std::string& fn, const std::string& xdef,
                   const std::string& term);
  // Fills the kernel's launch geometry, shared memory, decls (+ the rd_* combine FNs) and body.
  void finish(Kernel& k, std::string decls, std::string body) const;

 private:
  std::string start() const;
  const GenContext& c_;
  Rows rows_;
  int vec_ = 1;
  uint32_t seg_ = 1;  // threads per row: a power of two; block_ / seg_ rows per group
  std::string vec_load_;  // the loop head's vector load of x
  bool per_thread_ = false;
  uint32_t block_ = 256;
  bool need_f_ = false, need_i_ = false;
};

// The statements storing the anchor's first output `value` at flat `index`: a plain store, or,
// when the plan kernel fuses elementwise ops after the anchor (norm-epilogue), the epilogue.
Result<std::string> store_main(const GenContext& c, ArgList& args, const std::string& value, const std::string& index);

// Statements defining `float <var>` = the anchor's first input at flat `index`: a load or, when
// elementwise ops before the anchor are fused (norm-prologue), their values computed in registers
// (nothing stored: store_main's tail stores what must be). kUnsupported for prologues it cannot
// evaluate (a non-elementwise op, broadcasting inside the chain).
Result<std::string> input_value(const GenContext& c, ArgList& args, const std::string& index, const std::string& var,
                                const std::string& indent);

// The largest power of two <= v (at least 1).
uint32_t pow2_at_most(int v);
// "int var = linear thread id; if (var >= n) return;"
std::string per_element_start(int64_t n, const std::string& var);
// "prefix_<anchor node index>".
std::string short_name(const GenContext& c, const char* prefix);

// gen_pool.cpp: MaxPool/AveragePool/LpPool, and the pointwise normalizations BatchNormalization
// (inference) and LRN, one thread per output element.
Result<Kernel> gen_pool(const GenContext& c);
Result<Kernel> gen_pointwise_norm(const GenContext& c);

}  // namespace gpusim::codegen
