// gpusim dojo generate --model M... --gpu G... [--virtual-gpus N] [--dims SET]... [--plans P]
//   [--seed S] [--shards N | --shard I/N] --out DIR [--format csv|ndjson] [--store DB] ...
// Writes a GPU Dojo dataset (include/gpusim/dojo.h, core/dojo/README.md): dojo.json, shards of kernel
// and plan rows with a record of each (sizes and hashes), the virtual GPUs' profiles and DATASET.md.
// Complete shards are skipped, so re-running the same command resumes an interrupted run; a
// directory holding another configuration's dataset is refused unless --force.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "gpusim/dojo.h"
#include "gpusim/gpusim.h"
#include "gpusim/onnx_import.h"

namespace gpusim::cli {
namespace {

// "a,b, c" -> {"a", "b", "c"}.
std::vector<std::string> split_list(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    size_t start = 0;
    while (start <= item.size()) {
      const size_t comma = item.find(',', start);
      std::string part = item.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const auto b = part.find_first_not_of(' '), e = part.find_last_not_of(' ');
      if (b != std::string::npos) out.push_back(part.substr(b, e - b + 1));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

Result<std::vector<double>> fractions(const std::vector<std::string>& items, const char* flag) {
  std::vector<double> out;
  for (const std::string& s : split_list(items)) {
    try {
      size_t used = 0;
      out.push_back(std::stod(s, &used));
      if (used != s.size()) throw std::invalid_argument(s);
    } catch (const std::exception&) {
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{} \"{}\" is not a number; give fractions such as 0.5,1", flag, s));
    }
  }
  return out;
}

}  // namespace

void add_dojo(CLI::App& app, int& rc) {
  struct Args {
    std::vector<std::string> models, gpus, dims, objectives, memory, power, profile_dirs;
    int virtual_gpus = 0, subgraphs = 0, plans = 8, shards = 1;
    uint64_t seed = 1;
    std::string shard, out, format = "csv", store, dtype = "fp16", tiles = "generated";
    bool quiet = false, force = false;
  };
  auto a = std::make_shared<Args>();
  auto* dojo = app.add_subcommand("dojo", "The GPU Dojo: datasets of (graph, GPU, plan) -> time for learned schedulers");
  dojo->require_subcommand(1);
  auto* cmd = dojo->add_subcommand("generate", "Write a sharded dataset of kernel and plan rows (core/dojo/README.md)");
  cmd->add_option("--model", a->models, "ONNX model (repeatable)")->required();
  cmd->add_option("--gpu", a->gpus, "GPU profile ids, comma-separated or repeated (gpusim profiles list); all: every profile")
      ->required();
  cmd->add_option("--virtual-gpus", a->virtual_gpus, "Virtual GPUs sampled around each profile (0..1000)");
  cmd->add_option("--subgraphs", a->subgraphs, "Sub-graphs cut from each graph (windows of 8..64 nodes), besides it (0..10000)");
  cmd->add_option("--dims", a->dims,
                  "A dim set, NAME=VALUE[,NAME=VALUE...]; each model runs once per set that names its dims "
                  "(repeatable: --dims batch=1 --dims batch=8)");
  cmd->add_option("--objective", a->objectives, "What the search's best plan minimises: latency, throughput, energy, "
                                                "memory (comma-separated or repeated; default latency)");
  cmd->add_option("--memory-fraction", a->memory, "Memory budgets as fractions of the GPU's memory (default 1)");
  cmd->add_option("--power-fraction", a->power, "Power caps as fractions of the GPU's TDP, 0.2..1 (default 1)");
  cmd->add_option("--dtype", a->dtype, "Float type the graphs run in: fp32, fp16 or bf16 (default fp16)");
  cmd->add_option("--tiles", a->tiles,
                  "The tile space plans are priced in: generated (default: the kernels gpusim's code generator "
                  "builds, as gpusim plan ranks) or library (the cost model's whole menu, as vendor libraries run "
                  "kernels)");
  cmd->add_option("--plans", a->plans, "Random plans a task, besides eager and the search's best (0..10000)");
  cmd->add_option("--seed", a->seed, "Seed: the same configuration and seed give the same bytes");
  cmd->add_option("--shards", a->shards, "Split the tasks into N shards and write them all (1..100000)");
  cmd->add_option("--shard", a->shard, "Write only shard I of N (\"I/N\"), for running shards on several machines");
  cmd->add_option("--out", a->out, "Output directory")->required();
  cmd->add_option("--format", a->format, "Shard format: csv or ndjson (default csv)");
  cmd->add_option("--store", a->store, "Measurement store (gpusim truth, run, tune): measured labels where it has them");
  cmd->add_option("--profiles", a->profile_dirs, "Extra directory of GPU profiles, searched first (repeatable)");
  cmd->add_flag("--quiet", a->quiet, "Print nothing but errors");
  cmd->add_flag("--force", a->force, "Replace a dataset of another configuration or shard count in --out (its shards, "
                                     "records, dojo.json, DATASET.md and gpus/ profiles are removed first)");
  cmd->callback([a, &rc] {
    auto fail = [&rc](const Error& e) {
      fmt::print(stderr, "gpusim dojo generate: {}\n", say(e));
      rc = exit_code(e);
    };
    dojo::Config c;
    c.models = a->models;
    c.gpus = split_list(a->gpus);
    c.virtual_gpus = a->virtual_gpus;
    c.subgraphs = a->subgraphs;
    for (const std::string& set : a->dims) {
      std::map<std::string, int64_t> dims;
      for (const std::string& kv : split_list({set})) {
        auto d = parse_dim_override(kv);
        if (!d) return fail(d.error());
        dims[d->first] = d->second;
      }
      c.dim_sets.push_back(std::move(dims));
    }
    if (!a->objectives.empty()) c.objectives = split_list(a->objectives);
    if (!a->memory.empty()) {
      auto f = fractions(a->memory, "--memory-fraction");
      if (!f) return fail(f.error());
      c.memory_fractions = *f;
    }
    if (!a->power.empty()) {
      auto f = fractions(a->power, "--power-fraction");
      if (!f) return fail(f.error());
      c.power_fractions = *f;
    }
    c.dtype = a->dtype;
    c.tiles = a->tiles;
    c.plans = a->plans;
    c.seed = a->seed;
    c.format = a->format;
    c.store = a->store;
    if (a->shards < 1 || a->shards > 100000) {
      return fail(make_error(ErrorCode::kInvalidArgument, fmt::format("--shards {} is out of range; give 1 to 100000", a->shards)));
    }
    std::vector<dojo::ShardSpec> todo;
    int count = a->shards;
    if (!a->shard.empty()) {
      auto s = dojo::parse_shard(a->shard);
      if (!s) return fail(s.error());
      todo.push_back(*s);
      count = s->count;
    } else {
      for (int i = 0; i < a->shards; ++i) todo.push_back({i, a->shards});
    }
    const Session session({a->profile_dirs, {}});
    warn_profile_dirs(session.profile_dirs());
    auto tasks = dojo::expand(c, session.profile_dirs());
    if (!tasks) return fail(tasks.error());
    if (auto m = dojo::write_manifest(*tasks, count, a->out, a->force); !m) return fail(m.error());
    if (!a->quiet) {
      fmt::print("dojo     {} graph variants x {} GPUs ({} virtual) x {} constraints = {} tasks, {} plans each, "
                 "{} shards -> {}\n",
                 tasks->graphs.size(), tasks->gpus.size(),
                 std::count_if(tasks->gpus.begin(), tasks->gpus.end(), [](const auto& g) { return g.virtual_gpu; }),
                 tasks->constraints.size(),
                 tasks->tasks.size(), 2 + c.plans, count, a->out);
      for (const std::string& n : tasks->notes) fmt::print("note     {}\n", say(n));
    }
    for (const dojo::ShardSpec& s : todo) {
      auto r = dojo::generate_shard(*tasks, s, a->out, Session::target_maker());
      if (!r) return fail(r.error());
      if (a->quiet) continue;
      if (r->skipped) {
        fmt::print("shard    {}/{}: complete already ({}), skipped\n", s.index, s.count, r->kernels_file);
      } else {
        if (!r->redone.empty()) fmt::print("shard    {}/{}: {}: generated again\n", s.index, s.count, r->redone);
        fmt::print("shard    {}/{}: {} tasks, {} plans, {} kernel rows in {:.2f} s ({:.0f} rows/s)\n", s.index, s.count,
                   r->tasks, r->plans, r->kernel_rows, r->seconds, r->seconds > 0 ? r->kernel_rows / r->seconds : 0.0);
      }
    }
    auto done = dojo::finish(a->out);
    if (!done) return fail(done.error());
    if (!a->quiet) {
      fmt::print("dataset  {} of {} shards complete; {}/dojo.json and DATASET.md list their files\n", *done, count, a->out);
    }
    rc = 0;
  });
}

}  // namespace gpusim::cli
