// Inside codegen: what the GEMM, implicit-GEMM convolution and attention generators share — the
// tiled main loop (shared-memory staging of A and B tiles per k-step, a register micro-tile per
// thread), the choice of a tile that fits the target, operands read as strided views (so a
// Transpose fused into the kernel costs nothing: its permutation becomes the operand's strides),
// and the epilogue that hands each output value to the fused elementwise tail (folding an
// inference BatchNormalization on the way).
//
// A generator describes its GEMM as a GemmLoop — sizes, and the dialect statements that load one
// element of A and of B and consume one output value — and emit_gemm() writes the kernel around it:
//
//   GemmLoop L;  L.batch = 1; L.m = 61; L.n = 7; L.k = 13;
//   L.load_a = "av = LD0(gm * 13 + gk);";       // gm < m, gk < k are checked by the loop
//   L.load_b = "bv = LD1(gk * 7 + gn);";
//   L.epilogue = "ST2(gm * 7 + gn, acc_v);";
//   GemmTile t = fit_gemm_tile(plan_kernel.tile, L, opts);
//   emit_gemm(L, t, kernel);                     // fills decls, body, block, groups, shared_bytes
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generators.h"

namespace gpusim::codegen {

// An operand element as one load of one buffer element, for loads that keep many in flight
// (tile_loads): `stmts` (from ints `bz`, `gm` or `gn`, `gk`, after the loop's setup) declare what
// `index` (the element's int index in buffer argument `arg`) and `ok` (a bool expression; false
// reads 0, as a padded convolution tap; "" for always) need. The tile loads compute every index
// first, then issue every load through LDRk (the buffer's raw type), and convert (FROM_RAWk)
// only as the values go to shared memory: no load waits on the one before. arg < 0: the operand
// has no such form (dequantized loads), and its load statement runs whole. Where the operand also
// loads in vectors (GemmLoop::a_vec), `index` is the vector's first element and the loads are
// LDRVk (the raw vector: 16 bytes at most), unpacked (FROM_RAWVk) as they go to shared memory, or
// stored there whole where the tile's element is the buffer's (TileStoreVector). `half`: the
// buffer holds fp16.
struct OperandGather {
  int arg = -1;
  std::string stmts, index, ok;
  bool half = false;
};

// One GEMM as C[bz][m][n] = sum_k A[bz][m][k] * B[bz][k][n], described by code fragments.
struct GemmLoop {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  // Statements after the tile's coordinates are known (int `bz`, the batch index), at body scope.
  std::string setup;
  // Statements that set float `av` (already 0) from ints `bz`, `gm` < m, `gk` < k.
  std::string load_a;
  // Statements that set float `bv` (already 0) from ints `bz`, `gk` < k, `gn` < n.
  std::string load_b;
  // Which index varies fastest across the threads loading a tile: the one with unit stride in
  // memory, so a warp's loads coalesce.
  bool a_m_fastest = false;
  bool b_n_fastest = true;
  // Statements per output element, with ints `bz`, `gm` < m, `gn` < n and float `acc_v`.
  std::string epilogue;
  // The output's contiguous index: m (an NCHW convolution's output pixels) or n (a GEMM's
  // columns). The matrix-unit epilogue gives consecutive lanes consecutive elements along it.
  bool c_m_fastest = false;
  // Vector loads of the tiles (the tile's vector_width), where the generator has proved them
  // whole and aligned: the operand's fastest index (k, or m when a_m_fastest; for B n when
  // b_n_fastest, else k) has unit stride and an extent a_vec divides, and every other stride and
  // offset is a multiple of a_vec. `load_a_vec` fills float array `av_v[a_vec]` with the elements
  // from (bz, gm, gk) on along that index (ArgList::load_vector); B likewise with `bv_v`. 0 or 1:
  // scalar loads.
  int a_vec = 0, b_vec = 0;
  std::string load_a_vec, load_b_vec;
  // The scalar loads as gathers (see OperandGather), where the generator has them.
  OperandGather a_gather, b_gather;
};

// The widest vector load (in elements, a power of two: 16 bytes at most) a tile's vector_width
// asks for, for elements of `storage`.
int gemm_vector_width(const TileConfig& t, Storage storage);

// Where a tile element goes: the statement that puts float `value` at tile position (pi, kk) of
// shared-memory stage `buf` (all int expressions).
using TileStore = std::function<std::string(const std::string& buf, const std::string& pi, const std::string& kk,
                                            const std::string& value)>;
// A raw vector's store: the statement that puts `x` (of type `type`: `vec` elements of the buffer,
// fp16 where `half`, along the tile's pi index where `along_p`, else along kk) whole at tile
// position (pi, kk) of stage `buf`, or "" where the tile cannot take it whole (its element is not
// the buffer's, or the vector is not contiguous and aligned there): then each element is unpacked
// and stored through the TileStore.
using TileStoreVector = std::function<std::string(const std::string& buf, const std::string& pi, const std::string& kk,
                                                  bool along_p, int vec, bool half, const std::string& type,
                                                  const std::string& x)>;

// The A and B tiles' loads for one k-step, in two halves so that a k-step's global loads are in
// flight together and, across the main loop, while the step before computes:
//   issue(k0)     every global load of the thread's share of both tiles at k-offset k0, into
//                 registers (`decls`, declared once before the loop), fully unrolled: the
//                 coordinates clamped into the matrix, so each load is unconditional and the
//                 compiler issues them all before the first is used, and a value outside the
//                 matrix replaced by 0 after its load;
//   commit(buf)   the registers into shared-memory stage `buf`.
// Staged only where the shares are at most kMaxStagedFloats registers a thread, and they and the
// `acc` accumulators a thread holds at most kMaxStagedAndAccumulators, and those and
// kStagingOverhead more fit the registers a thread of a T-thread block may have. Elsewhere issue
// is empty and commit loads and stores in rounds of kLoadRound loads (in flight together), at the
// k-offset commit is given. Staging is off (kMaxStagedAndAccumulators 0) until the cost model's
// register estimate follows it: the compiler keeps each staged gather's address terms across the
// loop (64x64x32 tiles of 128 threads took 128-216 registers on sm_80 where the model says 68, and
// 128x128x32 tiles of 256 threads 255 and spilled at a budget of 64), and the compile tier's
// blocks-per-SM agreement fell to 56-80% (bench/RESULTS.md, "gpusim's own kernels"). Rounds of 4,
// not 8, for the same reason: 8 took 30-60 registers more than the model's figure on the bundled
// models' 256-thread tiles.
inline constexpr int kMaxStagedFloats = 32;
inline constexpr int kMaxStagedAndAccumulators = 0;
inline constexpr int kStagingOverhead = 48;  // addresses, fragments, loop state (sm_90 SASS of the bundled models)
inline constexpr int kLoadRound = 4;
// Whether tile_loads stages a tile's loads (the rule above).
bool stages_tile_loads(int staged_floats, int acc, int T);

// The chain of one block (gpusim/tile.h: KernelChain) of the GEMM-like kernel emit_gemm or
// emit_gemm_mma writes for a bm x bn x bk tile of T threads holding `acc` accumulators each, its
// operands loaded a_vec and b_vec elements a load (1: gathers), K split `split` ways, the epilogue
// staging each of `fragments` fragments with `fragment_barriers` block barriers (0 where a warp
// waits for its own lanes): staged loads are one round a k-step, issued ahead of the products;
// otherwise a round for every kLoadRound loads of each operand (one for both where they are
// kLoadRound loads or fewer together); a split adds its arrival (a fence
// and an atomic: two round trips) and, for each output value of a thread, its slices read at most
// 16 in flight.
// `round`: the loads a thread keeps in flight when not staged (kLoadRound on the matrix path, 2 on
// the SIMT loop's).
KernelChain design_chain(int bm, int bn, int bk, int T, int acc, int a_vec, int b_vec, int split, int fragments,
                         int fragment_barriers, int round = kLoadRound);
struct TileLoads {
  std::string decls;
  bool staged = true;
  std::function<std::string(const std::string& k0)> issue;
  std::function<std::string(const std::string& buf, const std::string& k0)> commit;
};
// `gathers` false: the SIMT loop's loads instead, two a thread in flight (gemm_tile.cpp).
TileLoads tile_loads(const GemmLoop& L, int bm, int bn, int bk, int T, int acc, TileStore store_a, TileStore store_b,
                     bool gathers = true, TileStoreVector vec_a = nullptr, TileStoreVector vec_b = nullptr);

// The tile actually generated: block_m x block_n outputs per group in a grid of
// (block_m / tm) x (block_n / tn) threads, each accumulating a tm x tn micro-tile; block_k deep
// k-steps; stages 1 or 2 (2: double-buffered shared memory, one barrier per k-step); `split`
// groups per output tile, each over its own slice of the k-steps (split_k_header).
struct GemmTile {
  int bm = 64, bn = 64, bk = 16, tm = 4, tn = 4, threads = 256, stages = 1, split = 1;
  uint64_t shared_bytes() const { return static_cast<uint64_t>(stages) * static_cast<uint64_t>(bk) * static_cast<uint64_t>(bm + bn + 2) * 4; }
};

// The plan's TileConfig made feasible: powers of two, 64x64x16/256 threads where the config is
// empty, no larger than the problem (rounded up to a power of two), at most 64 accumulators per
// thread, threads <= opts.max_threads, shared memory <= opts.max_shared_bytes (stages dropped
// first, then block_k, then the larger of block_m/block_n), split as generated_split_k (tile.h)
// over the fitted block_k. vector_width is not used (see gen_gemm.cpp).
GemmTile fit_gemm_tile(const TileConfig& t, const GemmLoop& L, const Options& opts);

// Writes the tiled kernel into k: decls (the shared tiles), body, block, groups, shared_bytes.
// Tiles are spread over the groups linearly (x, then y past 65535 groups).
void emit_gemm(const GemmLoop& L, const GemmTile& t, Kernel& k);

// The GEMV-shaped tile (gemv.cpp) of a GEMM of at most kGemvMaxRows rows: bm (all of M, a power
// of two) x bn outputs a group, `lanes` threads (threads / bn) splitting each column's K with no
// barrier, their sums added in shared memory; split as generated_split_k over `lanes`-deep
// k-steps. As a TileConfig: block_m bm, block_n bn, block_k lanes, threads, stages 1 — the one
// GEMM tile with more threads than outputs (gemv_shaped, gpusim/tile.h): how the cost model knows it.
inline constexpr int64_t kGemvMaxRows = 8;
struct GemvTile {
  int bm = 1, bn = 8, lanes = 32, threads = 256, split = 1;
  uint64_t shared_bytes() const { return static_cast<uint64_t>(threads) * bm * 4; }  // the partial sums
};
// The GEMV tile codegen builds for L when asked for tc: none where M is over kGemvMaxRows (or
// the target has fewer than 32 threads a group). Threads as asked (256 where unset), at least 32;
// a warp of 32 per column, fewer columns where N is narrower.
std::optional<GemvTile> fit_gemv_tile(const TileConfig& tc, const GemmLoop& L, const Options& opts);
void emit_gemv(const GemmLoop& L, const GemvTile& t, Kernel& k);

// The operands a matrix-unit main loop multiplies: fp16 (16-deep fragments), fp32 rounded to
// TF32 (wmma's m16n16k8 tf32, 8-deep), or fp32 (CDNA's v_mfma_f32_16x16x4f32, 4-deep).
enum class MmaOperand { kF16, kTf32, kF32 };
std::string_view mma_operand_name(MmaOperand o);  // "fp16", "tf32", "fp32"
// The operands a GEMM-like kernel in fp16 (`f16`) or fp32 storage multiplies on opts.matrix, or
// none where its main loop is the SIMT one: fp16 wherever a path is set; fp32 as TF32 with
// opts.tf32 on wmma or portable, as fp32 with opts.fp32_matrix on MFMA or portable.
std::optional<MmaOperand> mma_operand(const Options& opts, bool f16);

// The tile of a matrix-unit GEMM (gemm_mma.cpp): bm x bn outputs per group as 16x16 fragments,
// a wr x wc grid of warps (`lanes` threads each: 64 for MFMA's wavefronts, else 32) each owning
// fm x fn fragments; depth()-deep slices of bk-deep k-steps; stages 1 or 2 and split as in GemmTile.
struct MmaTile {
  int bm = 64, bn = 64, bk = 32, stages = 1, lanes = 32, wr = 2, wc = 2, fm = 2, fn = 2, split = 1;
  MmaOperand operand = MmaOperand::kF16;
  int threads() const { return wr * wc * lanes; }
  int elem_bytes() const { return operand == MmaOperand::kF16 ? 2 : 4; }
  int depth() const { return operand == MmaOperand::kF16 ? 16 : operand == MmaOperand::kTf32 ? 8 : 4; }
  // Rows padded by 16 bytes (wmma's leading-dimension rule; it also spreads banks): sA is
  // [bm][lda], sB [bk][ldb], in operand elements.
  int lda() const { return bk + 16 / elem_bytes(); }
  int ldb() const { return bn + 16 / elem_bytes(); }
  uint64_t shared_bytes() const;      // the operand tiles per stage and a 16x16 fp32 staging tile per warp
};

// The plan's TileConfig made feasible for opts.matrix: powers of two, at least one 16x16x16
// fragment, no larger than the problem rounded up to a power of two, at most 128 accumulators
// per lane, threads and shared memory within opts (stages dropped first, then block_k, then the
// larger of block_m/block_n), split as generated_split_k over the fitted block_k.
MmaTile fit_mma_tile(const TileConfig& t, const GemmLoop& L, const Options& opts, MmaOperand operand = MmaOperand::kF16);

// Writes the matrix-unit kernel for `path` (kWmma, kMfma or kPortable) into k, as emit_gemm does.
void emit_gemm_mma(const GemmLoop& L, const MmaTile& t, MatrixPath path, Kernel& k);

// Shared memory a split-K kernel adds to its tiles: the flag that tells the last group of a tile.
constexpr uint64_t kSplitFlagBytes = 4;

// The tile of the attention generator (gen_attention.cpp): bq query rows and bkv key rows a
// step, staged in shared memory with the scores and the softmax state (head dims d and dv).
struct AttentionTile {
  int bq = 32, bkv = 32, threads = 128;
  int split = 1;  // key blocks split over this many groups a query block (flash-decoding)
  int64_t d = 0, dv = 0;
  uint64_t shared_floats() const {
    return static_cast<uint64_t>(bq * d + bkv * d + bkv * dv + bq * bkv + 3 * bq);
  }
  // The kernel's shared memory: its blocks, and the split's flag.
  uint64_t shared_bytes() const { return shared_floats() * 4 + (split > 1 ? kSplitFlagBytes : 0); }
  int accumulators() const { return static_cast<int>((bq * dv + threads - 1) / threads); }
};

// The plan's TileConfig made feasible for attention over sq queries and skv keys: block_m as bq
// and block_n as bkv (powers of two, at most 128 and no larger than the problem), threads within
// opts, at most 64 accumulators a thread, shared memory within opts; split_k as the groups a query
// block's key blocks are split over (generated_split_k over the key blocks).
AttentionTile fit_attention_tile(const TileConfig& tc, int64_t sq, int64_t skv, int64_t d, int64_t dv, const Options& opts);

// The k-loop both main loops share: `steps` (an int expression, at least 1) steps of `bk` from
// k-offset `kbase` (an int expression; "" for 0), the loads of step kt + 1 issued before step kt's
// products (TileLoads). With one stage: commit, barrier, issue the next, compute, barrier; with
// two, the first tile is committed up front and step kt issues tile kt + 1, computes its own, and
// commits the next into the other stage, one barrier per step. `compute(buf)` returns the
// statements of one k-step from stage `buf`.
std::string k_loop(const std::string& steps, int bk, int stages, const std::string& kbase, const TileLoads& io,
                   const std::function<std::string(const std::string&)>& compute);

// Split-K in one launch, shared by both main loops. With `split` > 1 the kernel has
// tiles x split groups; split_k_header starts the body: `tile` (the output tile), `ks` (the
// group's K slice), and `kb`/`ksteps_here` (its first k-offset and k-steps, `per` steps a slice of
// `ksteps`), returning early past the grid. After the main loop each group stores its partial sums
// (SPLIT_ST, fp32) and calls split_k_arrive: every group but the last of its tile to arrive
// returns; the last (after a fence) adds the slices up with SPLIT_LD in slice order, so the sum is
// the same whichever group came last, and runs the epilogue. add_split_scratch appends the two
// scratch arguments (codegen.h: Scratch) the macros use; a generator puts its own args first.
struct SplitK {
  int split = 1;
  int64_t ksteps = 0, per = 0;
};
SplitK split_k_plan(int64_t k, int bk, int split);
// Statements adding the `split` slices' partial sums at SPLIT_LD(`at`) (an expression of int `sl`)
// to float `acc_v`, in slice order, their loads in flight together (unrolled up to 16 slices).
std::string split_sum(const std::string& indent, int split, const std::string& at);
std::string split_k_header(const SplitK& s, int64_t tiles, int bk);
std::string split_k_arrive(const SplitK& s);
void add_split_scratch(Kernel& k, int64_t partial_floats, int64_t tiles);

// The GEMM kernel the generators emit: GEMV-shaped where M is at most kGemvMaxRows (fit_gemv_tile),
// else on matrix units (opts.matrix) when the floats are fp16 (or fp32 with TF32 or fp32 MFMA),
// else the SIMT loop.
void emit_gemm_kernel(const GemmLoop& L, const TileConfig& tc, const Options& opts, Kernel& k);

// An operand as the kernel reads it: element `i` of logical shape `shape` is at
// p = sum(i[d] * strides[d]) in the buffer of `tensor` (a tensor, loaded through ArgList, which
// resolves its view root). When `remap_shape` is set (a reshaped view of a fused Transpose), p is
// instead a flat index over remap_shape (the Transpose's output), whose coordinates have buffer
// strides `remap_strides`: see operand_index().
struct Operand {
  TensorId tensor = kNoTensor;
  Shape shape;
  std::vector<int64_t> strides;
  Shape remap_shape;
  std::vector<int64_t> remap_strides;
  // A DequantizeLinear folded into the loads (dequantize-into-gemm): `tensor` holds the quantized
  // values (int8 or uint8, contiguous), and element p is (LD(p) - zero[s]) x scale[s], s = 0 per
  // tensor (deq_dim 0), else (p / deq_inner) % deq_dim (per axis). deq_zero may be kNoTensor (0).
  TensorId deq_scale = kNoTensor, deq_zero = kNoTensor;
  int64_t deq_inner = 1, deq_dim = 0;
};

// The buffer index of an operand element from its strided position `pos` (an int variable).
std::string operand_index(const Operand& op, const std::string& pos);

// The operand a group node reads as input `t`: the tensor itself, or — when a Transpose inside
// the group produces it (transpose-into-gemm, the K^T of attention), directly or through a view —
// the Transpose's input with permuted strides; the Transpose's position is added to `folded`. kUnsupported when another node
// inside the group produces t, or the Transpose's output is needed elsewhere.
// With `dequant`, a DequantizeLinear inside the group producing t (per tensor or per axis, not
// blocked) is folded the same way: the operand reads its quantized input (Operand::deq_*), for a
// generator whose loads apply them (the GEMM's, through load_stmt).
Result<Operand> resolve_operand(const GenContext& c, const Node& reader, TensorId t, std::vector<size_t>& folded,
                                bool dequant = false);

// The int expression of the offset of batch `flat` (a flat index over batch shape `batch`) in an
// operand whose leading dims `op_batch` (right-aligned against `batch`, numpy broadcasting) have
// element strides `strides`.
std::string batch_offset(const Shape& batch, const Shape& op_batch, const std::vector<int64_t>& strides,
                         const std::string& flat);

// "base + idx * stride" with the trivial cases folded ("idx", "0", ...).
std::string add_term(const std::string& base, const std::string& idx, int64_t stride);

// The statements that consume the anchor's output value: float variable `v` at flat index `o`
// (an int variable) of the output of the node at position `anchor_pos`. Folds a
// BatchNormalization (inference) that reads the anchor's output into an affine (storing the
// anchor's output first if something else needs it), then hands over to elementwise_tail for
// the group's other nodes, leaving out those at positions `folded` (consumed by the generator).
Result<std::string> gemm_epilogue(const GenContext& c, ArgList& args, size_t anchor_pos, const std::vector<size_t>& folded,
                                  const std::string& v, const std::string& o);

// A kernel name (C identifier) from a prefix and a node name.
std::string kernel_name(const std::string& prefix, const Node& n);

// Smallest power of two >= v (v >= 1), and largest <= v.
int pow2_ceil(int64_t v);
int pow2_floor(int64_t v);

}  // namespace gpusim::codegen
