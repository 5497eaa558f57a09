"""gpusim.dojo: the bindings to the C++ generator, and the Ray path to Parquet.

The Parquet and Ray cases need pyarrow and ray (PyPI): the package tier (tests/apps/python/pip_install.sh)
installs them and sets GPUSIM_DOJO_DEPS=required, so there they run or fail; elsewhere they skip
saying so."""
import json
import os

import pytest

import gpusim
from gpusim import dojo


def deps(*names):
    missing = []
    for n in names:
        try:
            __import__(n)
        except ImportError:
            missing.append(n)
    if missing:
        if os.environ.get("GPUSIM_DOJO_DEPS") == "required":
            pytest.fail(f"{missing} not installed, and GPUSIM_DOJO_DEPS=required")
        pytest.skip(f"{missing} not installed (pip install pyarrow ray); the package tier runs this")


def small(root, **kw):
    cfg = dict(models=[root / "models" / "mobilenet_v2.onnx", root / "models" / "resnet50.onnx"],
               gpus=["nvidia-t4", "nvidia-a10"], virtual_gpus=1, plans=2, seed=5)
    cfg.update(kw)
    return dojo.Config(**cfg)


def test_columns_are_the_generators():
    cols = dojo.columns()
    names = [c["name"] for c in cols["kernels"]]
    assert names[:3] == ["task", "graph", "graph_family"]
    assert "predicted_us" in names and "measured_us" in names
    assert all(c["type"] in ("int", "float", "string", "bool") for c in cols["kernels"] + cols["plans"])


def test_bad_configurations_name_the_field(tmp_path, root):
    with pytest.raises(gpusim.Error, match='unknown field "modles"'):
        gpusim._gpusim.dojo_write_manifest(json.dumps({"modles": []}), 1, str(tmp_path))
    with pytest.raises(gpusim.Error, match="nested deeper than 64 levels"):
        gpusim._gpusim.dojo_write_manifest("[" * 100000, 1, str(tmp_path))
    with pytest.raises(gpusim.Error, match='field "plans" is "many"'):
        gpusim._gpusim.dojo_write_manifest(json.dumps({"plans": "many"}), 1, str(tmp_path))
    with pytest.raises(gpusim.Error, match="nvidia-t5"):
        cfg = small(root, gpus=["nvidia-t5"])
        gpusim._gpusim.dojo_write_manifest(cfg.to_json(), 1, str(tmp_path))
    with pytest.raises(gpusim.Error, match='executor "spark" is not ray or local'):
        dojo.generate(small(root), str(tmp_path), executor="spark")


def test_local_parquet_resumes_and_matches_the_cli(tmp_path, root, gpusim_binary):
    deps("pyarrow")
    out = tmp_path / "local"
    r = dojo.generate(small(root), str(out), shards=3, executor="local", progress=False)
    assert r["shards"] == 3 and r["skipped"] == 0 and r["kernel_rows"] > 500
    k = dojo.read(str(out), "kernels")
    p = dojo.read(str(out), "plans")
    assert k.num_rows == r["kernel_rows"]
    assert p.num_rows == r["tasks"] * (2 + 2)
    assert str(k.schema.field("measured_us").type) == "double"
    assert str(k.schema.field("virtual_gpu").type) == "bool"
    # The card lists every column and the six files present (each row quotes its name and hash).
    card = (out / "DATASET.md").read_text()
    assert card.count("| `") == len(dojo.columns()["kernels"]) + len(dojo.columns()["plans"]) + 2 * 6
    assert "| `kernels-00002-of-00003.parquet` | kernels | 2 |" in card
    assert sorted(os.listdir(out / "gpus")) == ["nvidia-a10-v1.yaml", "nvidia-t4-v1.yaml"]
    # An interruption: one shard's Parquet lost; generating again redoes only that shard.
    os.remove(out / "plans-00001-of-00003.parquet")
    again = dojo.generate(small(root), str(out), shards=3, executor="local", progress=False)
    assert again["skipped"] == 2
    assert dojo.read(str(out), "kernels").equals(k)
    # A shard truncated or overwritten after it was written is not complete: it is generated again.
    victim = out / "kernels-00000-of-00003.parquet"
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(gpusim.Error, match="kernels-00000-of-00003.parquet: 100 bytes"):
        dojo.read(str(out), "kernels")
    (out / "plans-00002-of-00003.parquet").write_bytes((out / "plans-00001-of-00003.parquet").read_bytes())
    again = dojo.generate(small(root), str(out), shards=3, executor="local", progress=False)
    assert again["skipped"] == 1 and again["complete"] == 3
    assert "kernels-00000-of-00003.parquet is 100 bytes" in again["redone"][0]
    assert "plans-00002-of-00003.parquet" in again["redone"][2]
    assert dojo.read(str(out), "kernels").equals(k)
    assert dojo.read(str(out), "plans").equals(p)
    # Another configuration or shard count in the same directory is refused, naming what differs;
    # nothing is written.
    before = sorted(os.listdir(out))
    with pytest.raises(gpusim.Error, match=r"another configuration: plans \(2 -> 3\), seed \(5 -> 6\).*force=True to replace it"):
        dojo.generate(small(root, plans=3, seed=6), str(out), shards=3, executor="local", progress=False)
    with pytest.raises(gpusim.Error, match=r"shards \(3 -> 2\)"):
        dojo.generate(small(root), str(out), shards=2, executor="local", progress=False)
    assert sorted(os.listdir(out)) == before
    assert dojo.read(str(out), "kernels").equals(k)
    # force replaces it: only the new shard set is there and read.
    r2 = dojo.generate(small(root), str(out), shards=2, executor="local", progress=False, force=True)
    assert r2["skipped"] == 0 and r2["complete"] == 2
    assert not list(out.glob("*-of-00003.*"))
    assert dojo.read(str(out), "kernels").equals(k)
    # The same rows as the C++ program's CSV (one shard).
    import subprocess
    import pyarrow.csv as pacsv

    cli = tmp_path / "cli"
    subprocess.run([gpusim_binary, "dojo", "generate", "--model", str(root / "models" / "mobilenet_v2.onnx"),
                    "--model", str(root / "models" / "resnet50.onnx"), "--gpu", "nvidia-t4,nvidia-a10",
                    "--virtual-gpus", "1", "--plans", "2", "--seed", "5", "--out", str(cli), "--quiet"], check=True)
    csv = pacsv.read_csv(cli / "kernels-00000-of-00001.csv")
    with pytest.raises(gpusim.Error, match="its shards are not Parquet"):
        dojo.read(str(cli))
    assert csv.num_rows == k.num_rows
    assert csv.column("predicted_us").to_pylist() == k.column("predicted_us").to_pylist()
    # Splits keep whole families.
    train, test = dojo.split(k, by="gpu_family", holdout=["nvidia-a10"])
    assert set(test.column("gpu").to_pylist()) == {"nvidia-a10", "nvidia-a10-v1"}
    assert train.num_rows + test.num_rows == k.num_rows
    with pytest.raises(gpusim.Error, match="not among the gpu_family values"):
        dojo.split(k, by="gpu_family", holdout=["nvidia-h100-sxm"])


def test_ray_writes_the_same_parquet(tmp_path, root):
    deps("pyarrow", "ray")
    import ray

    local = tmp_path / "local"
    dojo.generate(small(root), str(local), shards=2, executor="local", progress=False)
    out = tmp_path / "ray"
    try:
        r = dojo.generate(small(root), str(out), shards=4, executor="ray", num_cpus=2, progress=False)
    finally:
        ray.shutdown()
    assert r["shards"] == 4 and r["skipped"] == 0
    # Sharded differently, the same rows in the same order.
    assert dojo.read(str(out), "kernels").equals(dojo.read(str(local), "kernels"))
    assert dojo.read(str(out), "plans").equals(dojo.read(str(local), "plans"))
    manifest = json.loads((out / "dojo.json").read_text())
    assert manifest["shards"] == 4


def test_readme_dojo_block(root, tmp_path, monkeypatch):
    """The README's gpusim.dojo example runs as printed (its output directory moved to a temporary one)."""
    deps("pyarrow", "ray")
    import ray

    text = (root / "README.md").read_text()
    section = text.split("### `gpusim.dojo`", 1)[1]
    block = section.split("```python\n", 1)[1].split("\n```", 1)[0]
    assert "dojo.generate(" in block and "dojo.split(" in block
    monkeypatch.chdir(root)
    scope = {}
    try:
        exec(compile(block.replace('"dojo-data"', repr(str(tmp_path / "d"))), "README.md (gpusim.dojo)", "exec"), scope)
    finally:
        ray.shutdown()
    assert scope["info"]["kernel_rows"] == scope["kernels"].num_rows
    assert scope["test"].num_rows > 0 and scope["train"].num_rows > 0
