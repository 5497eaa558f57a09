"""gpusim.dojo: GPU Dojo datasets of (graph, GPU, plan) -> time, generated on Ray and written as Parquet.

The generator is gpusim's C++ library (``gpusim dojo generate`` runs it without Python); this module
runs its shards as Ray tasks — a local Ray by default, a cluster when given an address — converts each
shard to Parquet with pyarrow (explicit column types, so every shard has the same schema), and writes
the dataset card. ``dojo/README.md`` in the source tree documents every column.

Example::

    from gpusim import dojo

    cfg = dojo.Config(models=["models/resnet50.onnx"], gpus=["nvidia-t4", "nvidia-a10"],
                      virtual_gpus=2, plans=16, seed=1)
    info = dojo.generate(cfg, "dojo-data", shards=8)        # local Ray, every core
    kernels = dojo.read("dojo-data", "kernels")             # a pyarrow.Table
    train, test = dojo.split(kernels, by="gpu_family", holdout=["nvidia-a10"])

A shard whose Parquet files exist is skipped, so calling ``generate`` again after an interruption
finishes the rest; the same configuration and seed give the same rows however the run is sharded.
Needs ``pyarrow`` and, for ``executor="ray"``, ``ray`` (both from PyPI).
"""

import dataclasses
import glob
import json
import os
import time

from .. import Error, _gpusim

__all__ = ["Config", "generate", "generate_shard", "read", "split", "columns", "write_card"]


@dataclasses.dataclass
class Config:
    """A Dojo configuration: the fields of the C++ ``gpusim::dojo::Config`` (include/gpusim/dojo.h)."""

    models: list
    gpus: list
    dim_sets: list = dataclasses.field(default_factory=list)  # [{"batch": 1}, {"batch": 8}]
    virtual_gpus: int = 0
    subgraphs: int = 0
    objectives: list = dataclasses.field(default_factory=lambda: ["latency"])
    memory_fractions: list = dataclasses.field(default_factory=lambda: [1.0])
    power_fractions: list = dataclasses.field(default_factory=lambda: [1.0])
    dtype: str = "fp16"
    plans: int = 8
    seed: int = 1
    store: str = ""

    def to_json(self):
        d = dataclasses.asdict(self)
        d["models"] = [os.path.abspath(os.fspath(m)) for m in self.models]
        if d["store"]:
            d["store"] = os.path.abspath(os.fspath(d["store"]))
        d["format"] = "csv"  # shards are converted to Parquet here
        return json.dumps(d, sort_keys=True)


def columns():
    """The kernel and plan tables' columns: {"kernels": [...], "plans": [...]}, each a dict of
    name, type (int, float, string, bool), unit and meaning."""
    return _gpusim.dojo_columns()


def _schema(table):
    import pyarrow as pa

    types = {"int": pa.int64(), "float": pa.float64(), "string": pa.string(), "bool": pa.bool_()}
    return pa.schema([(c["name"], types[c["type"]]) for c in columns()[table]])


def _names(index, count):
    return {t: f"{t}-{index:05d}-of-{count:05d}.parquet" for t in ("kernels", "plans")}


def generate_shard(config_json, index, count, out, profiles=()):
    """Generates shard INDEX of COUNT into OUT as Parquet (what each Ray task runs). Skips a shard
    whose two Parquet files exist. Returns the C++ generator's figures for the shard."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    names = _names(index, count)
    final = {t: os.path.join(out, n) for t, n in names.items()}
    if all(os.path.exists(p) for p in final.values()):
        return {"index": index, "count": count, "skipped": True, "kernel_rows": 0, "seconds": 0.0}
    staging = os.path.join(out, ".csv")
    r = _gpusim.dojo_generate_shard(config_json, index, count, staging, list(profiles))
    t0 = time.time()
    # Kernels first, plans last: a shard is complete when both Parquet files exist.
    for table, csv_file in (("kernels", r["kernels_file"]), ("plans", r["plans_file"])):
        schema = _schema(table)
        opts = pacsv.ConvertOptions(column_types=schema, strings_can_be_null=False)
        tbl = pacsv.read_csv(csv_file, convert_options=opts).select(schema.names)
        tmp = final[table] + f".tmp.{os.getpid()}"
        pq.write_table(tbl, tmp, compression="zstd")
        os.replace(tmp, final[table])
    for f in (r["kernels_file"], r["plans_file"]):
        os.remove(f)
    r["parquet_seconds"] = time.time() - t0
    r["skipped"] = False
    return r


def generate(config, out, shards=None, executor="ray", address=None, num_cpus=None, profiles=(), progress=True):
    """Generates a dataset into OUT: dojo.json, kernels-*.parquet and plans-*.parquet, gpus/*.yaml
    (the virtual GPUs' profiles) and DATASET.md (the card).

    shards: how many shards (default: 4 per CPU Ray offers, at most the number of tasks).
    executor: "ray" (each shard a Ray task; ``address`` names a cluster, default a local Ray with
    ``num_cpus`` CPUs, all by default) or "local" (in this process, one shard after another).
    Returns a dict: tasks, shards, kernel_rows, plans, seconds, skipped (shards already complete).
    """
    os.makedirs(out, exist_ok=True)
    cfg = config.to_json() if isinstance(config, Config) else json.dumps(config)
    t0 = time.time()
    cpus = None
    ray = None
    if executor == "ray":
        import ray  # noqa: F811

        if not ray.is_initialized():
            ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        cpus = int(ray.available_resources().get("CPU", 1))
    elif executor != "local":
        raise Error(f'executor "{executor}" is not ray or local', "invalid_argument")
    if shards is None:  # the task count first (the manifest is rewritten with the shard count below)
        tasks = _gpusim.dojo_write_manifest(cfg, 1, out, list(profiles))["tasks"]
        shards = max(1, min(tasks, 4 * (cpus or 1)))
    if not 1 <= shards <= 100000:
        raise Error(f"shards {shards} is out of range; give 1 to 100000", "invalid_argument")
    info = _gpusim.dojo_write_manifest(cfg, shards, out, list(profiles))
    results = []
    if executor == "ray":
        task = ray.remote(num_cpus=1)(generate_shard)
        pending = [task.remote(cfg, i, shards, out, list(profiles)) for i in range(shards)]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            results.extend(ray.get(done))
            if progress:
                print(f"gpusim.dojo: {len(results)}/{shards} shards", flush=True)
    else:
        for i in range(shards):
            results.append(generate_shard(cfg, i, shards, out, profiles))
            if progress:
                print(f"gpusim.dojo: {i + 1}/{shards} shards", flush=True)
    staging = os.path.join(out, ".csv")
    if os.path.isdir(staging) and not os.listdir(staging):
        os.rmdir(staging)
    summary = {
        "tasks": info["tasks"],
        "shards": shards,
        "skipped": sum(1 for r in results if r["skipped"]),
        "kernel_rows": sum(r["kernel_rows"] for r in results),
        "plans": sum(r.get("plans", 0) for r in results),
        "seconds": time.time() - t0,
        "notes": info["notes"],
    }
    write_card(out)
    return summary


def read(out, table="kernels"):
    """Every shard of TABLE ("kernels" or "plans") in OUT as one pyarrow.Table, in shard order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if table not in ("kernels", "plans"):
        raise Error(f'table "{table}" is not kernels or plans', "invalid_argument")
    files = sorted(glob.glob(os.path.join(out, f"{table}-*-of-*.parquet")))
    if not files:
        raise Error(f"{out}: no {table} shards (*.parquet); generate the dataset first", "not_found")
    return pa.concat_tables(pq.read_table(f) for f in files)


def split(table, by="gpu_family", holdout=()):
    """(train, test): the rows whose BY column (gpu_family or graph_family) is in HOLDOUT are the
    test set — whole families, so a model is tested on GPUs (or graphs) it never saw."""
    import pyarrow.compute as pc

    if by not in ("gpu_family", "graph_family"):
        raise Error(f'split by "{by}": give gpu_family or graph_family', "invalid_argument")
    values = set(table.column(by).to_pylist())
    missing = [h for h in holdout if h not in values]
    if missing:
        raise Error(f"split: {missing} not among the {by} values {sorted(values)}", "invalid_argument")
    mask = pc.is_in(table.column(by), value_set=__import__("pyarrow").array(list(holdout), type="string"))
    return table.filter(pc.invert(mask)), table.filter(mask)


def write_card(out):
    """Writes OUT/DATASET.md from OUT/dojo.json: what the dataset holds, how it was generated, its
    splits, and every column with its type and unit."""
    with open(os.path.join(out, "dojo.json")) as f:
        m = json.load(f)
    c = m["config"]
    lines = [
        "# GPU Dojo dataset",
        "",
        f"Schema `{m['schema']}`, generated by gpusim's Dojo (`gpusim.dojo.generate`, or `gpusim dojo generate`); "
        "the generator's documentation is `dojo/README.md` in gpusim's source.",
        "",
        "## What it holds",
        "",
        f"- {len(m['graphs'])} graph variants: " + ", ".join(g["id"] for g in m["graphs"]),
        f"- {len(m['gpus'])} GPUs: " + ", ".join(g["id"] + (" (virtual)" if g["virtual"] else "") for g in m["gpus"]),
        f"- {len(m['constraints'])} constraints (objective, memory fraction, power fraction): "
        + ", ".join(f"({k['objective']}, {k['memory_fraction']}, {k['power_fraction']})" for k in m["constraints"]),
        f"- {m['tasks']} tasks in {m['shards']} shards; each task has the eager plan, the greedy search's best "
        f"and {c['plans']} random plans; dtype {c['dtype']}, seed {c['seed']}",
        "",
        "## How to reproduce",
        "",
        "The same configuration and seed give the same rows:",
        "",
        "```",
        json.dumps(c, indent=1, sort_keys=True),
        "```",
        "",
        "Virtual GPUs are profiles in `gpus/` (each extends its base profile): "
        "every gpusim command takes them (`gpusim predict MODEL --profiles gpus --gpu ID`).",
        "",
        "## Splits",
        "",
        "Hold out whole `gpu_family` values (a base profile and its virtual GPUs) to test on unseen GPUs, "
        "whole `graph_family` values to test on unseen graphs: `gpusim.dojo.split(table, by, holdout)`.",
        "",
    ]
    for table, key in (("kernels", "kernel_columns"), ("plans", "plan_columns")):
        lines += [f"## Table `{table}` ({table}-*.parquet)", "", "| column | type | unit | meaning |", "|---|---|---|---|"]
        lines += [f"| `{col['name']}` | {col['type']} | {col['unit']} | {col['doc']} |" for col in m[key]]
        lines.append("")
    tmp = os.path.join(out, "DATASET.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines))
    os.replace(tmp, os.path.join(out, "DATASET.md"))

