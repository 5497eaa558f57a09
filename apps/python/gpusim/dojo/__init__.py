"""gpusim.dojo: GPU Dojo datasets of (graph, GPU, plan) -> time, generated on Ray and written as Parquet.

The generator is gpusim's C++ library (``gpusim dojo generate`` runs it without Python); this module
runs its shards as Ray tasks — a local Ray by default, a cluster when given an address — converts each
shard to Parquet with pyarrow (explicit column types, so every shard has the same schema), and writes
the dataset card. ``core/dojo/README.md`` in the source tree documents every column.

Example::

    from gpusim import dojo

    cfg = dojo.Config(models=["models/resnet50.onnx"], gpus=["nvidia-t4", "nvidia-a10"],
                      virtual_gpus=2, plans=16, seed=1)
    info = dojo.generate(cfg, "dojo-data", shards=8)        # local Ray, every core
    kernels = dojo.read("dojo-data", "kernels")             # a pyarrow.Table
    train, test = dojo.split(kernels, by="gpu_family", holdout=["nvidia-a10"])

Each shard is recorded when whole (shard-IIIII-of-NNNNN.json: its files' sizes and hashes); a shard
whose record and files agree is skipped, so calling ``generate`` again after an interruption finishes
the rest, and one truncated or overwritten since is generated again. A directory holding a dataset
of another configuration or shard count is refused (``force=True`` replaces it). The same
configuration and seed give the same rows however the run is sharded.
Needs ``pyarrow`` and, for ``executor="ray"``, ``ray`` (both from PyPI).
"""

import dataclasses
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
    tiles: str = "generated"  # the tile space plans are priced in: generated | library
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
    whose record and Parquet files agree (sizes and hashes). Returns the C++ generator's figures for
    the shard, with ``redone`` saying why a shard on disk was generated again."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    problem = _gpusim.dojo_shard_problem(out, index, count, "parquet")
    if not problem:
        return {"index": index, "count": count, "skipped": True, "redone": "", "kernel_rows": 0, "seconds": 0.0}
    names = _names(index, count)
    final = {t: os.path.join(out, n) for t, n in names.items()}
    record = os.path.join(out, f"shard-{index:05d}-of-{count:05d}.json")
    redone = problem if any(os.path.lexists(p) for p in (*final.values(), record)) else ""
    if os.path.lexists(record):
        os.remove(record)
    staging = os.path.join(out, ".csv")
    r = _gpusim.dojo_generate_shard(config_json, index, count, staging, list(profiles))
    t0 = time.time()
    for table, csv_file in (("kernels", r["kernels_file"]), ("plans", r["plans_file"])):
        schema = _schema(table)
        opts = pacsv.ConvertOptions(column_types=schema, strings_can_be_null=False)
        tbl = pacsv.read_csv(csv_file, convert_options=opts).select(schema.names)
        tmp = final[table] + f".tmp.{os.getpid()}"
        pq.write_table(tbl, tmp, compression="zstd")
        os.replace(tmp, final[table])
    # The record last: it makes the shard complete.
    _gpusim.dojo_write_shard_record(out, index, count, [names["kernels"], names["plans"]], r["tasks"], r["plans"],
                                    r["kernel_rows"])
    for f in (r["kernels_file"], r["plans_file"], os.path.join(staging, f"shard-{index:05d}-of-{count:05d}.json")):
        if os.path.lexists(f):
            os.remove(f)
    r["parquet_seconds"] = time.time() - t0
    r["skipped"] = False
    r["redone"] = redone
    return r


def generate(config, out, shards=None, executor="ray", address=None, num_cpus=None, profiles=(), progress=True,
             force=False):
    """Generates a dataset into OUT: dojo.json, kernels-*.parquet and plans-*.parquet with a record
    of each shard, gpus/*.yaml (the virtual GPUs' profiles) and DATASET.md (the card, listing the
    files present).

    shards: how many shards (default: 4 per CPU Ray offers, at most the number of tasks).
    executor: "ray" (each shard a Ray task; ``address`` names a cluster, default a local Ray with
    ``num_cpus`` CPUs, all by default) or "local" (in this process, one shard after another).
    force: replace a dataset of another configuration or shard count in OUT (by default an error
    naming what differs).
    Returns a dict: tasks, shards, complete (shards whole at the end), kernel_rows, plans, seconds,
    skipped (shards already complete), redone (shards on disk generated again, with why).
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
    if shards is None:
        tasks = _gpusim.dojo_count_tasks(cfg, list(profiles))
        shards = max(1, min(tasks, 4 * (cpus or 1)))
    if not 1 <= shards <= 100000:
        raise Error(f"shards {shards} is out of range; give 1 to 100000", "invalid_argument")
    info = _gpusim.dojo_write_manifest(cfg, shards, out, list(profiles), force)
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
    complete = _gpusim.dojo_finish(out)
    summary = {
        "tasks": info["tasks"],
        "shards": shards,
        "complete": complete,
        "skipped": sum(1 for r in results if r["skipped"]),
        "redone": {r["index"]: r["redone"] for r in results if r.get("redone")},
        "kernel_rows": sum(r["kernel_rows"] for r in results),
        "plans": sum(r.get("plans", 0) for r in results),
        "seconds": time.time() - t0,
        "notes": info["notes"],
    }
    return summary


def read(out, table="kernels", partial=False):
    """The shards of TABLE ("kernels" or "plans") that OUT/dojo.json lists, as one pyarrow.Table in
    shard order: only the files of this dataset, each checked against its recorded size. A dataset
    missing shards is an error unless partial=True."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if table not in ("kernels", "plans"):
        raise Error(f'table "{table}" is not kernels or plans', "invalid_argument")
    manifest = os.path.join(out, "dojo.json")
    if not os.path.isfile(manifest):
        raise Error(f"{out}: no dojo.json; generate the dataset first", "not_found")
    with open(manifest) as f:
        m = json.load(f)
    if "files" not in m:
        raise Error(f"{manifest} lists no files: the run that wrote it did not finish; call generate again", "not_found")
    if m.get("complete_shards", 0) < m["shards"] and not partial:
        raise Error(f"{out} holds {m.get('complete_shards', 0)} of {m['shards']} shards; call generate again to finish "
                    "it, or read(..., partial=True)", "not_found")
    files = [f for f in m["files"] if f["table"] == table]
    if not files:
        raise Error(f"{out}: no {table} shards; generate the dataset first", "not_found")
    other = [f["name"] for f in files if not f["name"].endswith(".parquet")]
    if other:
        raise Error(f"{out}: its shards are not Parquet ({other[0]}, written by `gpusim dojo generate`); read them "
                    "with pyarrow.csv or pandas, or generate the dataset with gpusim.dojo.generate", "invalid_argument")
    for f in files:
        p = os.path.join(out, f["name"])
        size = os.path.getsize(p) if os.path.isfile(p) else -1
        if size != f["bytes"]:
            raise Error(f"{p}: {size} bytes, dojo.json says {f['bytes']}; call generate again to regenerate it", "io")
    return pa.concat_tables(pq.read_table(os.path.join(out, f["name"])) for f in files)


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
    """Writes OUT/DATASET.md from OUT/dojo.json (after listing in it every complete shard's files):
    what the dataset holds, how it was generated, its splits, its files, and every column with its
    type and unit. Returns the number of complete shards."""
    return _gpusim.dojo_finish(out)
