// KernelWork and TileConfig to and from JSON (core/sim/work_json.h).
#include "sim/work_json.h"

#include "plan/chain_json.h"

#include <fmt/format.h>

namespace gpusim {
namespace {

constexpr DType kDtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt32,
                             DType::kInt64,   DType::kInt8,    DType::kFloat64};

Error bad(std::string_view where, const std::string& field, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {}: {}", where, field, why));
}

}  // namespace

nlohmann::json work_to_json(const KernelWork& w) {
  nlohmann::json j = {{"class", std::string(op_class_name(w.cls))},
          {"dtype", std::string(dtype_name(w.dtype))},
          {"batch", w.batch}, {"m", w.m}, {"n", w.n}, {"k", w.k}, {"b_shared", w.b_shared},
          {"window", w.window}, {"a_bytes", w.a_bytes}, {"epilogue_bytes", w.epilogue_bytes},
          {"epilogue_flops", {w.epilogue_flops.fma, w.epilogue_flops.transcendental, w.epilogue_flops.compare}},
          {"kv_seq", w.kv_seq}, {"head_dim", w.head_dim}, {"v_head_dim", w.v_head_dim}, {"macs", w.macs},
          {"flops", {w.flops.fma, w.flops.transcendental, w.flops.compare}},
          {"bytes_read", w.bytes_read}, {"bytes_written", w.bytes_written}, {"elements", w.elements},
          {"rows", w.rows}, {"row_elements", w.row_elements}, {"passes", w.passes},
          {"contiguous_run", w.contiguous_run}};
  // Written only where set, so that records of unquantized kernels keep their identity.
  if (w.b_bits > 0) j["b_bits"] = w.b_bits;
  if (w.dequant_ops > 0) j["dequant_ops"] = w.dequant_ops;
  if (w.accumulate_half) j["accumulate_half"] = true;
  if (w.k_block > 0) j["k_block"] = w.k_block;
  return j;
}

nlohmann::json tile_to_json(const TileConfig& t) {
  nlohmann::json j = {{"block_m", t.block_m}, {"block_n", t.block_n}, {"block_k", t.block_k}, {"threads", t.threads},
                      {"stages", t.stages}, {"split_k", t.split_k}, {"vector_width", t.vector_width},
                      {"items_per_thread", t.items_per_thread}};
  if (t.rows_per_block > 0) j["rows_per_block"] = t.rows_per_block;
  if (t.smem_bytes > 0) j["smem_bytes"] = t.smem_bytes;
  if (t.registers > 0) j["registers"] = t.registers;
  if (t.main_loop != MainLoop::kAny) j["main_loop"] = std::string(main_loop_name(t.main_loop));
  if (t.chain.known()) j["chain"] = chain_to_json(t.chain);
  return j;
}

Result<KernelWork> work_from_json(const nlohmann::json& j, std::string_view where) {
  if (!j.is_object()) return bad(where, "work", "is not an object");
  KernelWork w;
  const std::string cls = j.value("class", "");
  bool found = false;
  for (int c = 0; c < kNumOpClasses; ++c) {
    if (op_class_name(static_cast<OpClass>(c)) == cls) {
      w.cls = static_cast<OpClass>(c);
      found = true;
    }
  }
  if (!found) return bad(where, "work.class", fmt::format("\"{}\" is not a kernel class (gemm, conv, elementwise, ...)", cls));
  const std::string dt = j.value("dtype", "");
  found = false;
  for (DType t : kDtypes) {
    if (dtype_name(t) == dt) {
      w.dtype = t;
      found = true;
    }
  }
  if (!found) return bad(where, "work.dtype", fmt::format("\"{}\" is not a dtype gpusim calibrates (fp32, fp16, ...)", dt));
  try {
    auto i64 = [&](const char* k, int64_t& v) { v = j.value(k, v); };
    i64("batch", w.batch);
    i64("m", w.m);
    i64("n", w.n);
    i64("k", w.k);
    w.b_shared = j.value("b_shared", false);
    i64("window", w.window);
    i64("a_bytes", w.a_bytes);
    i64("epilogue_bytes", w.epilogue_bytes);
    auto flops = [&](const char* k, FlopCounts& f) {
      if (!j.contains(k)) return;
      const auto& a = j.at(k);
      f.fma = a.at(0).get<int64_t>();
      f.transcendental = a.at(1).get<int64_t>();
      f.compare = a.at(2).get<int64_t>();
    };
    flops("epilogue_flops", w.epilogue_flops);
    flops("flops", w.flops);
    i64("kv_seq", w.kv_seq);
    i64("head_dim", w.head_dim);
    i64("v_head_dim", w.v_head_dim);
    i64("macs", w.macs);
    i64("bytes_read", w.bytes_read);
    i64("bytes_written", w.bytes_written);
    i64("elements", w.elements);
    i64("rows", w.rows);
    i64("row_elements", w.row_elements);
    w.passes = j.value("passes", w.passes);
    i64("contiguous_run", w.contiguous_run);
    w.b_bits = j.value("b_bits", 0.0);
    w.dequant_ops = j.value("dequant_ops", 0.0);
    w.accumulate_half = j.value("accumulate_half", false);
    w.k_block = j.value("k_block", 0);
  } catch (const nlohmann::json::exception& e) {
    return bad(where, "work", fmt::format("a field has the wrong type ({})", e.what()));
  }
  if (!(w.b_bits >= 0 && w.b_bits <= 64)) {
    return bad(where, "work.b_bits", fmt::format("{} is not a width; expected 0 (B stored as the dtype) or bits an element, "
                                                 "at most 64", w.b_bits));
  }
  if (w.k_block < 0 || w.k_block > 65536) {
    return bad(where, "work.k_block", fmt::format("{} is out of range; expected 0 (no per-block rescale) to 65536", w.k_block));
  }
  if (!(w.dequant_ops >= 0 && w.dequant_ops <= 1000)) {
    return bad(where, "work.dequant_ops", fmt::format("{} is not an instruction count; expected 0 to 1000", w.dequant_ops));
  }
  return w;
}

Result<TileConfig> tile_from_json(const nlohmann::json& j, std::string_view where) {
  if (!j.is_object()) return bad(where, "tile", "is not an object");
  TileConfig t;
  try {
    t.block_m = j.value("block_m", 0);
    t.block_n = j.value("block_n", 0);
    t.block_k = j.value("block_k", 0);
    t.threads = j.value("threads", 256);
    t.stages = j.value("stages", 1);
    t.split_k = j.value("split_k", 1);
    t.vector_width = j.value("vector_width", 1);
    t.items_per_thread = j.value("items_per_thread", 1);
    t.rows_per_block = j.value("rows_per_block", 0);
    t.smem_bytes = j.value("smem_bytes", 0);
    t.registers = j.value("registers", 0);
    const std::string loop = j.value("main_loop", std::string("any"));
    if (!parse_main_loop(loop, &t.main_loop)) {
      return bad(where, "tile.main_loop", fmt::format("\"{}\" is not any, vector, matrix or tf32", loop));
    }
    if (j.contains("chain")) {
      auto c = chain_from_json(j.at("chain"), where, "tile.chain");
      if (!c) return c.error();
      t.chain = *c;
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(where, "tile", fmt::format("a field has the wrong type ({})", e.what()));
  }
  if (t.threads < 1) return bad(where, "tile.threads", fmt::format("{} is not a thread count; expected >= 1", t.threads));
  if (t.rows_per_block < 0) {
    return bad(where, "tile.rows_per_block",
               fmt::format("{} is negative; expected 0 (as many as the block holds) or a row count", t.rows_per_block));
  }
  if (t.smem_bytes < 0) {
    return bad(where, "tile.smem_bytes",
               fmt::format("{} is negative; expected 0 (the cost model estimates it from the tile) or the bytes of shared "
                           "memory a block holds",
                           t.smem_bytes));
  }
  if (t.registers < 0) {
    return bad(where, "tile.registers",
               fmt::format("{} is negative; expected 0 (the cost model estimates it from the tile) or the registers a "
                           "thread holds",
                           t.registers));
  }
  return t;
}

}  // namespace gpusim
