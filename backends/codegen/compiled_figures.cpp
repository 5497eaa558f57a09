// Compiled figures: the table of what the compiler built per generated kernel (compiled_figures.h).
#include "compiled_figures.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/hash.h"
#include "codegen.h"
#include "gemm_tile.h"
#include "hw/atomic_file.h"
#include "kernel_disk_cache.h"
#include "sim/work_json.h"

namespace gpusim::codegen {

namespace {

constexpr std::string_view kSchema = "gpusim.compiled_figures/1";
// A table larger than this is not read (a few hundred bytes an entry: millions of kernels).
constexpr std::uintmax_t kMaxTableBytes = std::uintmax_t{64} << 20;

Error bad(std::string_view where, std::string_view field, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument,
               fmt::format("{}: {} {}; the compiled figures are rewritten by `gpusim codegen report` (or delete the "
                           "file: the cost model then estimates them)",
                           where, field, what)};
}

}  // namespace

const CompiledFigures* CompiledFigureTable::find(const std::string& key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void CompiledFigureTable::merge(const CompiledFigureTable& other) {
  for (const auto& [k, f] : other.entries_) entries_.try_emplace(k, f);
}

std::string CompiledFigureTable::to_json() const {
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto& [k, f] : entries_) {
    kernels[k] = {{"registers", f.registers}, {"smem_bytes", f.smem_bytes}, {"spill_bytes", f.spill_bytes},
                  {"compiler", f.compiler}};
  }
  const nlohmann::json j = {{"schema", kSchema}, {"arch", arch_}, {"kernels", kernels}};
  return j.dump(1) + "\n";
}

Result<CompiledFigureTable> CompiledFigureTable::from_json(std::string_view text, std::string_view where) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return bad(where, "the file", "is not JSON");
  if (!j.is_object()) return bad(where, "the file", "is not a JSON object");
  if (!j.contains("schema") || !j["schema"].is_string() || j["schema"].get<std::string>() != kSchema) {
    return bad(where, "schema", fmt::format("is {}, expected \"{}\"", j.contains("schema") ? j["schema"].dump() : "absent", kSchema));
  }
  if (!j.contains("arch") || !j["arch"].is_string()) return bad(where, "arch", "is not a string");
  CompiledFigureTable t(j["arch"].get<std::string>());
  if (!j.contains("kernels") || !j["kernels"].is_object()) return bad(where, "kernels", "is not an object");
  for (const auto& [key, e] : j["kernels"].items()) {
    const std::string field = "kernels." + key;
    if (!e.is_object()) return bad(where, field, "is not an object");
    CompiledFigures f;
    const std::pair<const char*, int*> ints[] = {{"registers", &f.registers}, {"smem_bytes", &f.smem_bytes}, {"spill_bytes", &f.spill_bytes}};
    for (const auto& [name, dst] : ints) {
      const auto v = e.find(name);
      if (v == e.end() || !v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > (int64_t{1} << 24)) {
        return bad(where, field + "." + name,
                   fmt::format("is {}, expected a count from 0 to 16777216", v == e.end() ? "absent" : v->dump()));
      }
      *dst = static_cast<int>(v->get<int64_t>());
    }
    if (f.registers < 1) return bad(where, field + ".registers", "is 0, expected the registers a thread holds (at least 1)");
    if (const auto c = e.find("compiler"); c != e.end() && c->is_string()) f.compiler = c->get<std::string>();
    t.put(key, std::move(f));
  }
  return t;
}

std::string compiled_figures_key(const KernelWork& w, const TileConfig& t, const Options& opts) {
  // As the generators decide: fp16 storage for an fp16 kernel whatever the options say, and matrix
  // units only with fp16 storage (capability.cpp).
  const bool f16 = opts.float_storage == Storage::kF16 || w.dtype == DType::kFloat16;
  TileConfig schedule = t;
  schedule.smem_bytes = 0;
  schedule.registers = 0;
  schedule.main_loop = MainLoop::kAny;
  base::Fnv1a h;
  h.field(work_to_json(w).dump()).field(tile_to_json(schedule).dump()).field(f16 ? "f16" : "f32");
  const auto op = mma_operand(opts, f16);
  h.field(op ? std::string(matrix_path_name(opts.matrix)) + "/" + std::string(mma_operand_name(*op)) : std::string("simt"));
  return base::hex64(h.h);
}

std::filesystem::path compiled_figures_path(std::string_view arch) {
  const std::filesystem::path root = backend::kernel_cache_dir();
  if (root.empty()) return {};
  return root / "figures" / (std::string(arch) + ".json");
}

std::shared_ptr<const CompiledFigureTable> load_compiled_figures(std::string_view arch) {
  auto empty = std::make_shared<const CompiledFigureTable>(std::string(arch));
  const std::filesystem::path p = compiled_figures_path(arch);
  std::error_code ec;
  if (p.empty() || !std::filesystem::is_regular_file(std::filesystem::symlink_status(p, ec)) ||
      std::filesystem::file_size(p, ec) > kMaxTableBytes || ec) {
    return empty;
  }
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = CompiledFigureTable::from_json(ss.str(), p.string());
  if (!t || t->arch() != arch) return empty;  // damaged or another architecture's: estimates stand
  return std::make_shared<const CompiledFigureTable>(std::move(*t));
}

Result<std::filesystem::path> store_compiled_figures(const CompiledFigureTable& table) {
  const std::filesystem::path p = compiled_figures_path(table.arch());
  if (p.empty()) {
    return Error{ErrorCode::kUnavailable,
                 "the kernel cache is off (GPUSIM_KERNEL_CACHE_DIR=off) or has no folder (no HOME): the compiled figures "
                 "are not stored"};
  }
  CompiledFigureTable all = table;
  all.merge(*load_compiled_figures(table.arch()));
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (auto w = write_file_atomic(p.string(), all.to_json()); !w) {
    return Error{w.error().code, w.error().message + "; set GPUSIM_KERNEL_CACHE_DIR to a writable folder"};
  }
  return p;
}

}  // namespace gpusim::codegen
