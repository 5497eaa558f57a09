// gpusim codegen sass FILE.cu... [--arch sm_XY] [--json]: one kernel file compiled with NVRTC, its SASS read.
// gpusim codegen report MODEL --gpu NAME|FILE [--dtype fp32|fp16] [--dim k=v]... [--arch sm_XY|gfxNNN|spirv]
//                      [--allow-tf32] [--no-store] [--db FILE] [--json]
// Compiled truth, without a device: every kernel of the eager plan over the tiles codegen builds
// for the GPU, compiled with NVRTC (NVIDIA) or hiprtc (AMD) for its architecture, or to SPIR-V
// (GPUs the Vulkan backend runs: Intel, Apple); registers, spills and shared memory from the
// compiler against the cost model's assumptions, the blocks per SM or CU each gives, and the
// instruction mix from the PTX, the disassembly or the SPIR-V
// (backends/compile_report.h). Exit 0 when every kernel compiled (a
// flagged mismatch is a finding, not a failure); exit codes in exit_codes.h.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "commands.h"
#include "common.h"
#include "compile_report.h"
#include "gpusim/gpusim.h"

namespace gpusim::cli {
namespace {

nlohmann::json residency_json(const Residency& r, bool registers_known = true) {
  return {{"threads", r.threads},
          {"registers", registers_known ? nlohmann::json(r.registers) : nlohmann::json(nullptr)},
          {"smem_bytes", r.smem_bytes},
          {"ctas_per_sm", r.ctas_per_unit},
          {"limiter", r.limiter}};
}

nlohmann::json range_json(const backend::MachineCodeRange& r) {
  return {{"instructions", r.instructions},
          {"matrix", r.matrix},
          {"fma", r.fma},
          {"ldmatrix", r.ldsm},
          {"cp_async", r.ldgsts},
          {"async_waits", r.async_waits},
          {"ld_global", r.ld_global},
          {"loads_in_flight", r.loads_in_flight},
          {"load_waits", r.load_waits},
          {"volatile_loads", r.volatile_loads},
          {"l2_loads", r.l2_loads},
          {"st_global", r.st_global},
          {"st_global_bits", {{"narrow", r.st_narrow}, {"32", r.st_32}, {"64", r.st_64}, {"128", r.st_128}}},
          {"ld_shared", r.ld_shared},
          {"st_shared", r.st_shared},
          {"barriers", r.barriers},
          {"local", r.local},
          {"atomics", r.atomics}};
}

// The machine code's figures (backends/machine_code.h), or null where none was read.
nlohmann::json machine_code_json(const exec::CompiledKernel& k) {
  const exec::BinaryFigures& b = k.binary;
  if (!b.code_read) return nullptr;
  nlohmann::json j = {{"disassembler", b.disassembler},
                      {"loops", b.code.loops},
                      {"volatile_loads_in_loops", b.code.volatile_loads_in_loops},
                      {"all", range_json(b.code.all)},
                      {"main_loop", b.code.has_main_loop ? range_json(b.code.main_loop) : nlohmann::json(nullptr)},
                      {"epilogue", b.code.has_main_loop ? range_json(b.code.epilogue) : nlohmann::json(nullptr)},
                      {"gate_failures", k.gate_failures}};
  return j;
}

nlohmann::json report_json(const exec::CompiledReport& r, const std::string& model, DType dtype) {
  nlohmann::json j;
  j["schema"] = "gpusim.codegen-report/1";
  j["model"] = model;
  j["gpu"] = r.gpu;
  j["dtype"] = std::string(dtype_name(dtype));
  j["arch"] = r.arch;
  j["compiler"] = r.compiler;
  j["figures_stored"] = r.figures_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.figures_path);
  if (!r.figures_not_stored.empty()) j["figures_not_stored"] = r.figures_not_stored;
  const bool spirv = r.arch == "spirv";  // states no registers or spills: the driver's, on the device
  j["summary"] = {{"kernels", r.kernels.size()},
                  {"compiled", r.compiled},
                  {"occupancy_as_assumed", r.occupancy_as_assumed},
                  {"spilling", spirv ? nlohmann::json(nullptr) : nlohmann::json(r.spilling)},
                  {"missing_matrix_instructions", r.missing_matrix},
                  {"matrix_kernels", r.matrix_kernels},
                  {"machine_code_gates_passed", r.gates_passed}};
  j["disassembler"] = r.disassembler.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.disassembler);
  if (!r.code_unavailable.empty()) j["machine_code_unavailable"] = r.code_unavailable;
  j["kernels"] = nlohmann::json::array();
  for (const auto& k : r.kernels) {
    nlohmann::json e = {{"index", k.index},
                        {"name", k.name},
                        {"node", k.node},
                        {"class", k.cls},
                        {"tile", tile_notation(k.tile)},
                        {"matrix_path", k.matrix_path},
                        {"priced_on_matrix_units", k.priced_on_matrix_units},
                        {"chain", k.chain.known() ? nlohmann::json{{"load_rounds", k.chain.load_rounds},
                                                                    {"loads_ahead", k.chain.loads_ahead},
                                                                    {"epilogue_rounds", k.chain.epilogue_rounds},
                                                                    {"epilogue_barriers", k.chain.epilogue_barriers}}
                                                  : nlohmann::json(nullptr)},
                        {"predicted_us", {{"planned", k.planned_us}, {"built", k.built_us}}},
                        {"assumed", residency_json(k.assumed)},
                        {"flags", k.flags}};
    if (!k.skipped.empty()) {
      e["skipped"] = k.skipped;
    } else {
      // SPIR-V: registers and spills are the driver's (the residency used the model's registers).
      e["compiled"] = residency_json(k.compiled, k.binary.registers_read);
      if (k.binary.registers_read) {
        e["spills"] = {{"stack_bytes", k.binary.stack_bytes},
                       {"store_bytes", k.binary.spill_store_bytes},
                       {"load_bytes", k.binary.spill_load_bytes},
                       {"registers", k.binary.spilled_registers}};
      } else {
        e["spills"] = nullptr;
      }
      if (k.binary.instructions_read) {
        e["instructions"] = {{"mma", k.binary.mma},           {"wmma", k.binary.wmma},           {"mfma", k.binary.mfma},
                             {"coop_matrix", k.binary.coop_matrix},
                             {"ldmatrix", k.binary.ldmatrix}, {"cp_async", k.binary.cp_async}, {"ld_global", k.binary.ld_global},
                             {"st_global", k.binary.st_global}, {"ld_shared", k.binary.ld_shared}, {"st_shared", k.binary.st_shared},
                             {"atomics", k.binary.atomics},
                             {"from", k.binary.code_read ? "machine code" : r.arch == "spirv" ? "spirv" : "ptx"}};
      } else {
        e["instructions"] = nullptr;  // no disassembler for this target
      }
      e["machine_code"] = machine_code_json(k);
    }
    j["kernels"].push_back(std::move(e));
  }
  return j;
}

void print_report(const exec::CompiledReport& r, const std::string& model, DType dtype) {
  fmt::print("model    {}\n", model);
  fmt::print("gpu      {}, {}; compiled for {} with {}\n", r.gpu, dtype_name(dtype), r.arch, r.compiler);
  fmt::print("\n{:>4}  {:<34} {:<6} {:<22} {:>9} {:>7} {:>13} {:>9} {:>5}  {}\n", "#", "kernel", "class", "tile",
             "regs a/c", "spill", "smem KB a/c", "CTAs a/c", "mma", "flags");
  for (const auto& k : r.kernels) {
    if (!k.skipped.empty()) {
      fmt::print("{:>4}  {:<34} (not generated: runs on the host)\n", k.index, "");
      continue;
    }
    const bool regs = k.binary.registers_read;
    fmt::print("{:>4}  {:<34} {:<6} {:<22} {:>4}/{:<4} {:>7} {:>6.1f}/{:<6.1f} {:>4}/{:<4} {:>5}  {}\n", k.index,
               k.name.substr(0, 34), k.cls.substr(0, 6), tile_notation(k.tile), k.assumed.registers,
               regs ? fmt::format("{}", k.compiled.registers) : std::string("?"),
               regs ? fmt::format("{}", k.binary.spill_store_bytes + k.binary.spill_load_bytes + k.binary.spilled_registers)
                    : std::string("?"),
               k.assumed.smem_bytes / 1024.0,
               k.compiled.smem_bytes / 1024.0, k.assumed.ctas_per_unit, k.compiled.ctas_per_unit,
               k.binary.instructions_read ? fmt::format("{}", k.binary.matrix_instructions()) : std::string("?"),
               fmt::join(k.flags, ", "));
  }
  const double pct = r.compiled > 0 ? 100.0 * r.occupancy_as_assumed / r.compiled : 0.0;
  fmt::print("\n{} of {} kernels compiled; blocks per SM as the cost model assumes for {} ({:.1f}%); {}; {} "
             "priced on matrix units have no matrix instruction\n",
             r.compiled, r.kernels.size(), r.occupancy_as_assumed, pct,
             r.arch == "spirv" ? std::string("spills not stated") : fmt::format("{} spill", r.spilling), r.missing_matrix);
  fmt::print("(a/c: assumed by the cost model / compiled; spill: bytes a thread stores and loads to local memory, or "
             "on AMD registers spilled; CTAs: blocks per SM or CU; mma: matrix instructions, ? where no disassembler "
             "read them)\n");
  if (r.matrix_kernels > 0 || !r.disassembler.empty()) {
    fmt::print("machine code ({}): {} of {} kernels whose main loop runs on matrix instructions pass the gates (loads "
               "in flight, no barrier per epilogue fragment, no volatile loads in loops)\n",
               r.disassembler, r.gates_passed, r.matrix_kernels);
    for (const auto& k : r.kernels) {
      for (const auto& g : k.gate_failures) fmt::print("  #{} {}: {}\n", k.index, k.name, g);
    }
  } else if (!r.code_unavailable.empty()) {
    fmt::print("machine code not read: {}\n", r.code_unavailable);
  }
  if (r.arch == "spirv") {
    fmt::print("(SPIR-V states a kernel's workgroup size, shared memory and instructions but not its registers or "
               "spills, which the driver chooses on the device: ? above, and the compiled CTAs use the model's "
               "registers)\n");
  }
  if (!r.figures_path.empty()) {
    fmt::print("compiled figures stored in {}: predict and plan price these kernels with them from now on "
               "(--no-store leaves them out)\n",
               r.figures_path);
  } else if (!r.figures_not_stored.empty()) {
    fmt::print("compiled figures not stored: {}\n", r.figures_not_stored);
  }
}

}  // namespace

namespace {

void add_codegen_sass(CLI::App& cg, int& rc) {
  struct Args {
    std::vector<std::string> files;
    std::string arch = "sm_90";
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = cg.add_subcommand(
      "sass", "Compile CUDA C++ kernel files with NVRTC (no device needed) and report what their machine code does: "
              "registers, spills, and the SASS's main loop and epilogue (nvdisasm: tools/setup-tools-venv.sh)");
  cmd->add_option("files", a->files, "CUDA C++ files, one kernel each (`gpusim codegen report --sources` writes them)")
      ->required();
  cmd->add_option("--arch", a->arch, "The NVIDIA architecture to compile for (default sm_90)");
  cmd->add_flag("--json", a->json, "Print JSON (schema gpusim.codegen-sass/1)");
  cmd->callback([a, &rc] {
    nlohmann::json out = {{"schema", "gpusim.codegen-sass/1"}, {"arch", a->arch}, {"kernels", nlohmann::json::array()}};
    for (const std::string& f : a->files) {
      auto read = gpusim::read_user_file(f, 64 << 20, "the CUDA C++ file");
      if (!read) {
        fmt::print(stderr, "gpusim codegen sass: {}\n", say(read.error()));
        rc = 1;
        return;
      }
      const std::string& text = *read;
      auto c = exec::compile_cuda_source(text, a->arch, f);
      if (!c) {
        fmt::print(stderr, "gpusim codegen sass: {}\n", say(c.error()));
        rc = exit_code(c.error());
        return;
      }
      exec::CompiledKernel k;
      k.name = c->kernel;
      k.binary = c->binary;
      k.gate_failures = exec::machine_code_gates(c->binary);
      if (a->json) {
        out["compiler"] = c->compiler;
        out["kernels"].push_back({{"file", f},
                                  {"kernel", c->kernel},
                                  {"registers", c->registers},
                                  {"smem_bytes", c->smem_bytes},
                                  {"spill_bytes", c->binary.spill_bytes()},
                                  {"machine_code", machine_code_json(k)},
                                  {"machine_code_unavailable", c->binary.code_unavailable.empty()
                                                                   ? nlohmann::json(nullptr)
                                                                   : nlohmann::json(c->binary.code_unavailable)}});
        continue;
      }
      fmt::print("{} ({}): {} registers, {} bytes of shared memory, {} bytes spilled; compiled by {} for {}\n", f,
                 c->kernel, c->registers, c->smem_bytes, c->binary.spill_bytes(), c->compiler, a->arch);
      if (!c->binary.code_read) {
        fmt::print("  machine code not read: {}\n", c->binary.code_unavailable);
        continue;
      }
      const auto& mc = c->binary.code;
      const auto line = [](const char* what, const backend::MachineCodeRange& r) {
        fmt::print("  {:<9} {:>5} instructions: {} matrix, {} FMA, {} LDSM, {} cp.async, {} global loads ({} in flight at "
                   "most, {} waits), {} volatile, {} barriers, {} local, stores {} narrow / {} x32 / {} x64 / {} x128\n",
                   what, r.instructions, r.matrix, r.fma, r.ldsm, r.ldgsts, r.ld_global, r.loads_in_flight, r.load_waits,
                   r.volatile_loads, r.barriers, r.local, r.st_narrow, r.st_32, r.st_64, r.st_128);
      };
      line("all", mc.all);
      if (mc.has_main_loop) {
        line("main loop", mc.main_loop);
        line("epilogue", mc.epilogue);
      }
      for (const auto& g : k.gate_failures) fmt::print("  gate failed: {}\n", g);
    }
    if (a->json) fmt::print("{}\n", out.dump(1));
  });
}

}  // namespace

void add_codegen(CLI::App& app, int& rc) {
  struct Args {
    std::string model, gpu, dtype, arch, sources, db;
    std::vector<std::string> dims;
    bool json = false, no_store = false, allow_tf32 = false;
  };
  auto a = std::make_shared<Args>();
  auto* cg = app.add_subcommand("codegen", "What gpusim's code generator builds");
  cg->require_subcommand(1);
  add_codegen_sass(*cg, rc);
  auto* cmd = cg->add_subcommand(
      "report", "Compile every kernel of the eager plan for the GPU's architecture (NVRTC for NVIDIA, hiprtc for AMD, "
                "SPIR-V for GPUs run through Vulkan; no device needed) and report registers, spills, shared memory and blocks per SM or CU against the "
                "cost model's assumptions");
  cmd->add_option("model", a->model, "The .onnx file")->required();
  cmd->add_option("--gpu", a->gpu, "GPU profile name or YAML file")->required();
  cmd->add_option("--dtype", a->dtype, "Re-type the graph's float tensors: fp32 or fp16 (the kernels' storage)");
  cmd->add_option("--dim", a->dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_option("--arch", a->arch, "Compile for this architecture (sm_XY, gfxNNN, or spirv for the Vulkan backend's kernels) instead of "
                  "the profile's");
  cmd->add_option("--sources", a->sources, "Also write each kernel's text to this folder (INDEX_NAME.cu, or INDEX_NAME.comp: GLSL for spirv)");
  cmd->add_flag("--no-store", a->no_store,
                "Do not add the compiled figures to the kernel cache (by default the cost model prices these kernels "
                "with them from then on)");
  cmd->add_option("--db", a->db,
                  "Also add the compiled figures to this measurement store (SQLite; created when absent), one record "
                  "per kernel and architecture");
  cmd->add_flag("--allow-tf32", a->allow_tf32,
                "fp32 GEMMs and convolutions as TF32 on the matrix units (wmma tf32 fragments, sm_80 and newer)");
  cmd->add_flag("--json", a->json, "Print JSON (schema gpusim.codegen-report/1)");
  cmd->callback([a, &rc] {
    const Session s;
    auto m = s.open_model(a->model, {a->dims});
    if (!m) {
      fmt::print(stderr, "gpusim codegen report: {}\n", say(m.error()));
      rc = exit_code(m.error());
      return;
    }
    auto gpu = s.gpu(a->gpu);
    if (!gpu) {
      fmt::print(stderr, "gpusim codegen report: --gpu: {}\n", say(gpu.error()));
      rc = exit_code(gpu.error());
      return;
    }
    DType dtype = DType::kFloat32;
    if (!a->dtype.empty()) {
      auto d = parse_dtype(a->dtype);
      if (!d || (*d != DType::kFloat32 && *d != DType::kFloat16)) {
        fmt::print(stderr, "gpusim codegen report: --dtype \"{}\": generated kernels store fp32 or fp16; use --dtype "
                           "fp32 or --dtype fp16\n",
                   a->dtype);
        rc = 2;
        return;
      }
      dtype = *d;
    }
    const Graph g = dtype == DType::kFloat32 ? m->graph() : retype(m->graph(), dtype);
    exec::CompileReportOptions o;
    o.arch = a->arch;
    o.keep_sources = !a->sources.empty();
    o.store_figures = !a->no_store;
    auto r = exec::compile_report(g, s.target(*gpu, TileSpace::kGenerated, {a->allow_tf32}), o);
    if (!r) {
      fmt::print(stderr, "gpusim codegen report: {}\n", say(r.error()));
      rc = exit_code(r.error());
      return;
    }
    if (!a->sources.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(a->sources, ec);
      for (const auto& k : r->kernels) {
        if (k.source.empty()) continue;
        const std::string path = fmt::format("{}/{}_{}.{}", a->sources, k.index, k.name, r->arch == "spirv" ? "comp" : "cu");
        std::ofstream out(path);
        out << k.source;
        if (!out) {
          fmt::print(stderr, "gpusim codegen report: --sources: cannot write {}: {}; give a folder you can write to\n",
                     path, std::strerror(errno));
          rc = 1;
          return;
        }
      }
    }
    std::string db_note;
    if (!a->db.empty()) {
      const auto records = exec::compiled_records(*r, a->model);
      if (records.empty()) {
        db_note = fmt::format("no compiled figures added to {}: {}", a->db,
                              r->arch == "spirv" ? "SPIR-V states no registers" : "no kernel was compiled");
      } else {
        auto store = MeasurementStore::open(a->db, StoreAccess::kCreate);
        Status put = store ? store->put_compiled(records) : Status(store.error());
        if (!put) {
          fmt::print(stderr, "gpusim codegen report: --db: {}\n", say(put.error()));
          rc = 1;
          return;
        }
        db_note = fmt::format("{} compiled kernel records added to {} (replacing any of the same kernel on {})",
                              records.size(), a->db, r->arch);
      }
    }
    if (a->json) {
      auto j = report_json(*r, a->model, dtype);
      if (!a->db.empty()) j["db"] = db_note;
      fmt::print("{}\n", j.dump(1));
    } else {
      print_report(*r, a->model, dtype);
      if (!db_note.empty()) fmt::print("{}\n", db_note);
    }
  });
}

}  // namespace gpusim::cli
