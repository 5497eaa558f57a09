// The GPU Dojo: reproducible datasets of (graph, GPU, plan) -> time, for training learned cost
// models and schedulers (core/dojo/README.md is the dataset card: every column with its unit, how a
// dataset is generated, and its splits).
//
// A dataset is the cross product of graph variants (models, each under every set of dim
// overrides: batch, resolution and sequence sweeps), GPUs (profiles and "virtual GPUs" sampled
// around them within physically consistent ranges, each written out as a profile) and operating
// constraints (objective, memory budget, power cap). Each combination is a task; a task's plans
// are the eager plan, the best plan a search finds for its objective, and random plans (the
// random scheduler's fusion and tiling choices). Every plan is predicted, and every kernel of it
// becomes one row of the kernel table (work features, the tile, the GPU's figures, the
// constraint, and labels: predicted time and its components, bound, and the measured time where
// the measurement store has one); every plan one row of the plan table.
//
// Tasks are split into shards of consecutive tasks (`--shard i/N`); a shard is written to
// temporary files renamed into place, then recorded (shard-IIIII-of-NNNNN.json: each file's size
// and hash). A shard whose record and files agree is skipped, so an interrupted run resumes where
// it stopped; one truncated or overwritten since is generated again. A directory holding a
// dataset of another configuration or shard count is refused (prepare_out_dir). Everything
// derives from the seed: the same configuration gives the same bytes.
//
// Usage:
//   gpusim::dojo::Config c;
//   c.models = {"models/resnet50.onnx"};  c.gpus = {"nvidia-t4", "nvidia-rtx-3060"};
//   c.virtual_gpus = 2;  c.plans = 8;  c.seed = 1;
//   auto tasks = gpusim::dojo::expand(c, profile_dirs);        // graphs x GPUs x constraints
//   auto r = gpusim::dojo::generate_shard(*tasks, {0, 4}, "out/", maker);  // shard 0 of 4
// `maker` (target.h) makes each GPU's target in the configuration's tile space: Session::target_maker()
// from the API; [](auto& p, auto) { return gpusim::library_target(p); } with the core alone.
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "gpusim/graph.h"
#include "gpusim/result.h"
#include "gpusim/target.h"

namespace gpusim::dojo {

inline constexpr const char* kSchema = "gpusim.dojo/1";

struct GPUSIM_API Config {
  std::vector<std::string> models;  // ONNX files
  // Dim override sets; each model is imported once per set whose names it has (a set naming
  // no input dim of a model is skipped for it). Empty: each model once, as it is.
  std::vector<std::map<std::string, int64_t>> dim_sets;
  std::vector<std::string> gpus;  // profile ids (or paths); "all": every profile found
  int virtual_gpus = 0;           // virtual GPUs sampled around each profile, besides the profile itself
  // Sub-graphs cut from each graph variant, besides the whole graph: windows spanning 8 to 64
  // nodes that launch kernels, at seeded positions (their family stays the model's).
  int subgraphs = 0;
  std::vector<std::string> objectives = {"latency"};  // latency | throughput | energy | memory
  // Memory budgets as fractions of each GPU's memory (plans over it get offloading, or are
  // marked as not fitting), and power caps as fractions of its TDP (the clock it holds follows).
  std::vector<double> memory_fractions = {1.0};
  std::vector<double> power_fractions = {1.0};
  std::string dtype = "fp16";  // the float type graphs are re-typed to: fp32 | fp16 | bf16
  // The tile space plans are priced in (target.h): generated (gpusim's code generator, as `gpusim
  // plan` ranks) | library (the cost model's whole menu, as vendor libraries run kernels).
  std::string tiles = "generated";
  int plans = 8;                // random plans per task, besides eager and the search's best
  uint64_t seed = 1;
  std::string format = "csv";  // csv | ndjson
  std::string store;            // measurement store for measured labels ("" : none)
};

// A configuration as JSON (the manifest's "config", and what the Python package passes): every
// field of Config by its name; absent fields keep their defaults. Errors name the field, the value
// and what is allowed.
GPUSIM_API Result<Config> config_from_json(const std::string& text);
GPUSIM_API std::string config_to_json(const Config& c);

struct GPUSIM_API GraphVariant {
  std::string id;      // "resnet50" or "bert_base_seq128[batch=8]"
  std::string family;  // the model's file stem: splits by graph family keep its variants together
  std::string path;
  std::map<std::string, int64_t> dims;
  std::shared_ptr<const Graph> graph;
};

struct GPUSIM_API GpuVariant {
  std::string id;      // the profile's name; a virtual GPU's is "<base>-v<k>"
  std::string family;  // the base profile's name: splits by GPU family keep virtual GPUs with it
  bool virtual_gpu = false;
  std::string yaml;    // a virtual GPU's profile (extends the base), written to gpus/<id>.yaml
  std::shared_ptr<const GpuProfile> profile;
};

struct GPUSIM_API Constraint {
  std::string objective = "latency";
  double memory_fraction = 1.0;
  double power_fraction = 1.0;
};

struct GPUSIM_API Task {
  int graph = 0, gpu = 0, constraint = 0;  // indices into Tasks' lists
};

struct GPUSIM_API Tasks {
  Config config;
  std::vector<GraphVariant> graphs;
  std::vector<GpuVariant> gpus;
  std::vector<Constraint> constraints;
  std::vector<Task> tasks;  // graph-major, then GPU, then constraint
  std::vector<std::string> notes;  // variants skipped and why
  std::vector<std::string> profile_dirs;  // where profiles (and the store's devices) resolve
};

// Imports every graph variant, loads and samples every GPU, and lists the tasks. Errors name the
// model, dim set or profile that failed, and the fix.
GPUSIM_API Result<Tasks> expand(const Config& c, const std::vector<std::string>& profile_dirs);

// Nodes [first, last) of `g` (topological order) as a graph of their own: tensors they read that
// earlier nodes produced become its inputs, tensors they produce that later nodes or the graph's
// outputs read become its outputs (the last node's when none are), and only the tensors they touch
// are kept. `first` < `last` <= g.nodes.size().
GPUSIM_API Graph cut_graph(const Graph& g, size_t first, size_t last);

// A virtual GPU: `base` with its unit count, clocks, DRAM and L2 sizes and bandwidths and TDP
// drawn within physically consistent ranges (peak rates follow units x clock), reproducible from
// `seed`; returned as YAML that extends the base profile (`name` is its id).
GPUSIM_API std::string virtual_gpu_yaml(const GpuProfile& base, const std::string& name, uint64_t seed);

struct GPUSIM_API ShardSpec {
  int index = 0;
  int count = 1;
};
// "i/N" (0 <= i < N); errors say the form.
GPUSIM_API Result<ShardSpec> parse_shard(const std::string& text);

struct GPUSIM_API ShardResult {
  int index = 0, count = 1;
  bool skipped = false;  // complete already (its record and files agree): nothing was done
  std::string redone;    // why a shard on disk was generated again ("" if there was none)
  int64_t tasks = 0, plans = 0, kernel_rows = 0;
  double seconds = 0;
  std::string kernels_file, plans_file;
};

// The task indices shard `s` holds: a contiguous range, so a shard builds each graph's search
// space once for all its GPUs and constraints.
GPUSIM_API std::pair<size_t, size_t> shard_range(size_t tasks, ShardSpec s);

// Generates one shard into `out_dir` (created): kernels-IIIII-of-NNNNN.{csv,ndjson} and
// plans-IIIII-of-NNNNN.{csv,ndjson}, each written whole to a temporary file and renamed, then its
// record. A complete shard (shard_problem() empty) is skipped. `progress` is called after each
// task with (tasks done, tasks in the shard). `make_target` makes each GPU's target (a virtual or
// power-capped GPU's too) in the tile space t.config.tiles names.
GPUSIM_API Result<ShardResult> generate_shard(const Tasks& t, ShardSpec s, const std::string& out_dir, const TargetMaker& make_target,
                                   const std::function<void(size_t, size_t)>& progress = {});

// Writes `out_dir`/dojo.json — the schema, the configuration, the graph variants, GPUs,
// constraints and shard count, and the column tables: what a reader needs to interpret shards —
// and each virtual GPU's profile as gpus/<id>.yaml. Calls prepare_out_dir(t, shard_count,
// out_dir, force) first.
GPUSIM_API Status write_manifest(const Tasks& t, int shard_count, const std::string& out_dir, bool force = false);

// Checks `out_dir` before anything is written into it: creatable and writable, and holding no
// dataset (a dojo.json, or shard files without one) of another configuration, shard count or
// schema. Such a dataset is an error naming the keys that differ, unless `force`, which removes
// its files first (shards, their records, dojo.json, DATASET.md, gpus/*.yaml; nothing else).
GPUSIM_API Status prepare_out_dir(const Tasks& t, int shard_count, const std::string& out_dir, bool force);

// The record of a complete shard, shard-IIIII-of-NNNNN.json beside its files.
GPUSIM_API std::string shard_record_name(ShardSpec s);
// Why shard `s` in `out_dir` is not complete, or "" when it is: its record is missing or
// unreadable, names files of another extension than `ext` ("csv", "ndjson", "parquet"), or a file
// it lists is missing, not a regular file, or of another size or hash than recorded.
GPUSIM_API std::string shard_problem(const std::string& out_dir, ShardSpec s, const std::string& ext);
// Records shard `r` as complete: `files` (names in out_dir: the kernels file, then the plans
// file) with their sizes and hashes, and the shard's counts. Written atomically, after the files.
GPUSIM_API Status write_shard_record(const std::string& out_dir, const ShardResult& r, const std::vector<std::string>& files);

// After a run: rewrites dojo.json with the files of every complete shard (table, shard, name,
// bytes, hash, rows) and how many shards are complete, then DATASET.md (the dataset card) from it,
// listing exactly the files present. Returns the number of complete shards.
GPUSIM_API Result<int> finish(const std::string& out_dir);

// The columns of the kernel and plan tables, in file order: name, type ("int", "float",
// "string", "bool") and unit, and what it holds (the dataset card prints them).
struct GPUSIM_API Column {
  const char* name;
  const char* type;
  const char* unit;
  const char* doc;
};
GPUSIM_API const std::vector<Column>& kernel_columns();
GPUSIM_API const std::vector<Column>& plan_columns();

}  // namespace gpusim::dojo
