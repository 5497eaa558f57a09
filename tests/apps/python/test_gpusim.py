"""The Python package over the Session API: plain-Python results equal to the CLI's documents,
NumPy buffers in and out (NumPy 1 and 2), gpusim.Error with the library's messages, thread safety,
and no crash from an object Python made without its __init__."""
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import gpusim


def cli_json(binary, root, *args):
    out = subprocess.run([binary, *args, "--json"], cwd=root, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_package_metadata():
    assert gpusim.__version__ == gpusim.version()
    assert gpusim.__version__.count(".") == 2
    assert gpusim.data_dir() is not None
    assert gpusim.Session.__doc__ and "Thread-safe" in gpusim.Session.__doc__
    assert "gpusim.predict/1" in gpusim.Session.predict.__doc__
    assert gpusim.Program.run.__doc__


def test_models_from_paths_and_bytes(session, root):
    path = root / "models" / "mobilenet_v2.onnx"
    m = session.open_model(path)
    assert m.source == str(path)
    assert m.inputs == [{"name": "input", "dtype": "fp32", "shape": [1, 3, 224, 224]}]
    assert m.outputs[0]["shape"] == [1, 1000]
    assert m.num_nodes > 100
    data = path.read_bytes()
    b = session.open_model(data, name="mnv2.onnx")
    assert b.source == "mnv2.onnx"
    assert b.content_hash == m.content_hash == gpusim.content_hash(data)
    assert b.size_bytes == len(data)


def test_dims_as_dict_or_strings(session, root):
    bert = root / "models" / "bert_base_seq128.onnx"
    a = session.open_model(bert, dims={"batch": 2})
    b = session.open_model(bert, dims=["batch=2"])
    assert a.inputs == b.inputs
    assert a.inputs[0]["shape"] == [2, 128]
    with pytest.raises(gpusim.Error) as e:
        session.open_model(bert)
    assert "set it with dims={\"batch\": N}" in str(e.value)
    with pytest.raises(gpusim.Error) as e:
        session.open_model(bert, dims={"batch": "two"})
    assert e.value.code == "invalid_argument"
    assert "\"batch\" must be an integer" in e.value.message


def test_a_misspelt_keyword_names_the_closest_one(session, root):
    m = session.open_model(str(root / "models/resnet50.onnx"))
    with pytest.raises(TypeError, match=r"Session\.predict\(\) got an unexpected keyword argument 'dytpe'; "
                                        r"did you mean 'dtype'\? \(it takes model, gpu, dtype, runtime"):
        session.predict(m, "nvidia-rtx-3060", dytpe="fp16")
    with pytest.raises(TypeError, match=r"Session\.open_model\(\) .* 'dim'; did you mean 'dims'\?"):
        session.open_model(str(root / "models/resnet50.onnx"), dim={"batch": 1})
    # Nothing close: the names it takes, without a guess.
    with pytest.raises(TypeError, match=r"Session\.compare\(\) got an unexpected keyword argument 'zzzzzz' \(it takes "):
        session.compare(m, ["nvidia-t4"], zzzzzz=1)
    # The right keyword still goes through, and the docstring is the library's.
    assert session.predict(m, "nvidia-rtx-3060", dtype="fp16")["dtype"] == "fp16"
    assert gpusim.Session.predict.__doc__.startswith("predict(self")


def test_errors_carry_the_library_message_and_code(session, root, tmp_path):
    with pytest.raises(gpusim.Error) as e:
        session.open_model(tmp_path / "missing.onnx")
    assert e.value.code == "io"
    assert "missing.onnx" in str(e.value)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(gpusim.Error) as e:
        session.open_model(junk)
    assert e.value.code == "parse"
    assert str(junk) in str(e.value)
    with pytest.raises(gpusim.Error) as e:
        session.gpu("nvidia-rtx-9090")
    assert e.value.code == "not_found"
    assert "no GPU profile named \"nvidia-rtx-9090\"" in str(e.value)
    m = session.open_model(root / "models" / "mobilenet_v2.onnx")
    with pytest.raises(gpusim.Error, match="dtype: \"fp4\" is not supported"):
        session.predict(m, "nvidia-rtx-3060", dtype="fp4")
    # fp8 is a type, but not an Ampere card's: no fp8 matrix units.
    with pytest.raises(gpusim.Error, match="has no fp8 matrix units"):
        session.predict(m, "nvidia-rtx-3060", dtype="fp8", tiles="library")
    with pytest.raises(gpusim.Error, match="tiles: \"menu\" is not a tile space; use generated"):
        session.predict(m, "nvidia-rtx-3060", tiles="menu")
    with pytest.raises(gpusim.Error, match="tiles: \"menu\" is not a tile space"):
        session.plan(m, "nvidia-rtx-3060", tiles="menu")
    # TF32: off by default (PyTorch's matmul default), on when asked, on an Ampere card.
    plain = session.predict(m, "nvidia-rtx-3060")
    tf32 = session.predict(m, "nvidia-rtx-3060", allow_tf32=True)
    assert not any(k["tf32"] for k in plain["kernels"])
    assert any(k["tf32"] for k in tf32["kernels"]) and "TF32 allowed" in tf32["tiles"]
    assert session.compare(m, ["nvidia-rtx-3060"], allow_tf32=True)["gpus"][0]["total_us"] > 0
    assert session.plan(m, "nvidia-rtx-3060", allow_tf32=True)["plans"]
    with pytest.raises(gpusim.Error, match="matrix_path.*\"tensor\" is not a path to choose"):
        session.compile(m, backend="null", matrix_path="tensor")
    with pytest.raises(gpusim.Error, match="objective: \"speed\" is not one of"):
        session.plan(m, "nvidia-rtx-3060", objective="speed")
    with pytest.raises(gpusim.Error, match="top: 0 is out of range; give an integer from 1 to 100"):
        session.plan(m, "nvidia-rtx-3060", top=0)
    with pytest.raises(gpusim.Error, match="gpu: give a profile id"):
        session.predict(m, 3060)
    # The host that drives the GPU scales a framework runtime's per-call host time.
    lin = session.predict(m, "nvidia-rtx-3060", runtime="pytorch-eager")
    win = session.predict(m, "nvidia-rtx-3060", runtime="pytorch-eager", host="windows")
    assert win["host"] == "windows" and lin["host"] == "" and win["total_us"] > lin["total_us"]
    described = session.compare(m, ["nvidia-rtx-3060"], runtime="pytorch-eager", host="os=windows,single_thread=2200")
    assert described["gpus"][0]["total_us"] > 0
    with pytest.raises(gpusim.Error, match='host.*"beos"; expected linux, windows, macos'):
        session.predict(m, "nvidia-rtx-3060", runtime="pytorch-eager", host="os=beos")
    assert issubclass(gpusim.Error, Exception)


def test_predict_and_plan_price_one_target(session, root):
    m = session.open_model(root / "models" / "mobilenet_v2.onnx")
    p = session.predict(m, "nvidia-h100-sxm")
    r = session.plan(m, "nvidia-h100-sxm", scheduler="eager", top=1)
    assert p["tiles"].startswith("generated (codegen")
    assert r["tiles"] == p["tiles"]
    assert r["eager"]["total_us"] == pytest.approx(p["total_us"], rel=1e-12)
    lib = session.predict(m, "nvidia-h100-sxm", tiles="library")
    assert lib["tiles"] == "library (the cost model's whole menu)"
    assert session.predict(m, "nvidia-h100-sxm", runtime="pytorch-eager")["tiles"] == lib["tiles"]


def test_gpus_by_id_path_and_yaml(session):
    g = session.gpu("nvidia-rtx-3060")
    assert g.name == "nvidia-rtx-3060"
    assert g.vendor == "nvidia"
    doc = g.document()
    assert doc["schema"] == "gpusim.profile/1"
    path = next(p["path"] for p in session.profiles() if p["name"] == "nvidia-t4")
    assert session.gpu(path).name == "nvidia-t4"
    derived = session.gpu_from_yaml("schema: gpusim.profile/1\nname: my-3060\nextends: nvidia-rtx-3060\n",
                                    source="my-3060.yaml")
    assert derived.name == "my-3060"
    # A real profile's text with the default source (it names no file): loads as itself.
    with open(path) as f:
        assert session.gpu_from_yaml(f.read()).name == "nvidia-t4"
    with pytest.raises(gpusim.Error) as e:
        session.gpu_from_yaml("name: [1, 2\n", source="broken.yaml")
    assert "broken.yaml" in str(e.value)


def test_documents_are_the_cli_documents(session, root, gpusim_binary):
    model = "models/mobilenet_v2.onnx"
    m = session.open_model(str(root / model))
    m_rel = session.open_model(root / model)
    assert m_rel.content_hash == m.content_hash
    # The CLI names the model as given; open it the same way here.
    import os
    cwd = os.getcwd()
    os.chdir(root)
    try:
        m = session.open_model(model)
        assert session.predict(m, "nvidia-rtx-3060", dtype="fp16") == cli_json(
            gpusim_binary, root, "predict", model, "--gpu", "nvidia-rtx-3060", "--dtype", "fp16")
        assert session.compare(m, ["nvidia-t4", "nvidia-l4"]) == cli_json(
            gpusim_binary, root, "compare", model, "--gpus", "nvidia-t4,nvidia-l4")
        assert session.plan(m, "nvidia-t4", scheduler="beam", top=2) == cli_json(
            gpusim_binary, root, "plan", model, "--gpu", "nvidia-t4", "--scheduler", "beam", "--top", "2")
    finally:
        os.chdir(cwd)


def test_a_plan_goes_back_in_as_dict_text_or_file(session, root, tmp_path):
    m = session.open_model(root / "models" / "mobilenet_v2.onnx")
    search = session.plan(m, "nvidia-t4", dtype="fp16")
    assert search["schema"] == "gpusim.plan-search/1"
    best = search["plans"][0]
    want = best["total_us"]
    assert session.predict(m, "nvidia-t4", plan=best["plan"])["total_us"] == pytest.approx(want, rel=1e-9)
    assert session.predict(m, "nvidia-t4", plan=json.dumps(best["plan"]))["total_us"] == pytest.approx(want, rel=1e-9)
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(best["plan"]))
    assert session.predict(m, "nvidia-t4", plan=f)["total_us"] == pytest.approx(want, rel=1e-9)
    broken = dict(best["plan"], kernels="all of them")
    with pytest.raises(gpusim.Error) as e:
        session.predict(m, "nvidia-t4", plan=broken)
    assert "kernels" in str(e.value)
    # A path is read by the library: a regular file only, so /dev/zero or a FIFO is refused at once
    # (Python's open() would read the one until memory ran out and block on the other).
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "a character device"), (fifo, "a FIFO (named pipe)")):
        with pytest.raises(gpusim.Error) as e:
            session.predict(m, "nvidia-t4", plan=path)
        assert f"is {kind}, not a regular file; give the plan as a file" in str(e.value)


def test_run_with_numpy_arrays_reproduces_onnx_test_data(session, onnx_testdata):
    case = onnx_testdata / "pytorch-operator" / "test_operator_addmm"
    data = case / "test_data_set_0"
    inputs = [gpusim.read_tensor(p) for p in sorted(data.glob("input_*.pb"))]
    want = gpusim.read_tensor(data / "output_0.pb")
    prog = session.compile(session.open_model(case / "model.onnx"))
    assert [i["shape"] for i in prog.inputs] == [list(x.shape) for x in inputs]
    out = prog.run(inputs)
    assert list(out) == [o["name"] for o in prog.outputs]
    got = next(iter(out.values()))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # By name too, and with a list converted to the input's dtype.
    by_name = prog.run({spec["name"]: x for spec, x in zip(prog.inputs, inputs)})
    np.testing.assert_allclose(next(iter(by_name.values())), want, rtol=1e-5, atol=1e-5)
    as_lists = prog.run([x.tolist() for x in inputs])
    np.testing.assert_allclose(next(iter(as_lists.values())), want, rtol=1e-5, atol=1e-5)


def test_run_names_a_wrong_buffer(session, onnx_testdata):
    case = onnx_testdata / "pytorch-operator" / "test_operator_addmm"
    prog = session.compile(session.open_model(case / "model.onnx"))
    spec = prog.inputs[0]
    good = np.zeros(spec["shape"], dtype=np.float32)
    with pytest.raises(gpusim.Error) as e:
        prog.run([good.astype(np.int64)])
    assert "dtype int64 given, the model takes fp32" in str(e.value)
    with pytest.raises(gpusim.Error) as e:
        prog.run([np.zeros([7, 7], dtype=np.float32)])
    assert f"input 0 \"{spec['name']}\": shape [7, 7] given, the model takes {spec['shape']}" in str(e.value)
    with pytest.raises(gpusim.Error, match="the model has no input \"nope\""):
        prog.run({"nope": good})
    second = prog.inputs[1]["name"]
    with pytest.raises(gpusim.Error, match=f"input 0 \"{spec['name']}\" is missing"):
        prog.run({second: np.zeros(prog.inputs[1]["shape"], dtype=np.float32)})
    with pytest.raises(gpusim.Error, match="has no gpusim type"):
        prog.run([good.astype(np.complex64)])
    # A transposed (non-contiguous) view is copied to row-major order, not misread.
    t = np.arange(np.prod(spec["shape"]), dtype=np.float32).reshape(spec["shape"][::-1]).T
    assert not t.flags.c_contiguous
    prog.run([t])


def test_every_numpy_dtype_maps_to_its_gpusim_type(session, root):
    """Each NumPy dtype gpusim has a type for is told apart by kind and item size, under NumPy 1 and 2
    alike (a module built with pybind11 < 2.12 read NumPy 2's dtype struct wrong and mapped none);
    the arrays the module makes are C-ordered with NumPy's own strides."""
    m = session.open_model(root / "models" / "mobilenet_v2.onnx")
    prog = session.compile(m)
    spec = prog.inputs[0]
    x = np.random.default_rng(0).standard_normal(spec["shape"]).astype(np.float32)
    # Integers and bool are refused, named by the library in its own words.
    for np_type, name in [(np.int8, "int8"), (np.int16, "int16"), (np.int32, "int32"), (np.int64, "int64"),
                          (np.uint8, "uint8"), (np.uint16, "uint16"), (np.uint32, "uint32"), (np.uint64, "uint64"),
                          (np.bool_, "bool")]:
        with pytest.raises(gpusim.Error, match=f"input 0 \"input\": dtype {name} given, the model takes fp32"):
            prog.run([x.astype(np_type)])
    out = prog.run([x])["logits"]
    assert out.dtype == np.float32 and out.shape == (1, 1000)
    assert out.flags.c_contiguous and out.strides == (4000, 4)
    assert np.ptp(out) > 0, "every logit the same: the output array's strides are wrong"
    # Another float type converts: fp64 holding these fp32 values exactly gives the same logits, and
    # fp16 the logits of its own values (read as fp16, not as fp32 bytes).
    assert np.array_equal(prog.run([x.astype(np.float64)])["logits"], out)
    half = x.astype(np.float16)
    assert np.array_equal(prog.run([half])["logits"], prog.run([half.astype(np.float32)])["logits"])


def test_program_plan_on_the_reference_names_no_kernels(session, root):
    """The cpu backend is the reference: it runs node by node, so its plan has no kernels."""
    prog = session.compile(session.open_model(root / "models" / "mobilenet_v2.onnx"))
    plan = prog.plan
    assert plan["schema"] == "gpusim.plan/1"
    assert plan["kernels"] == []
    assert "gpusim.plan/1" in gpusim.Program.plan.__doc__


UNINITIALISED = textwrap.dedent('''
    import gpusim
    S, M, G, P = gpusim.Session, gpusim.Model, gpusim.Gpu, gpusim.Program
    s = S()
    m = s.open_model(MODEL)
    g = s.gpu("nvidia-t4")
    calls = {
        "Session.profiles": lambda: S.__new__(S).profiles(),
        "Session.profile_dirs": lambda: S.__new__(S).profile_dirs,
        "Session.open_model": lambda: S.__new__(S).open_model(MODEL),
        "Session.gpu": lambda: S.__new__(S).gpu("nvidia-t4"),
        "Session.gpu_from_yaml": lambda: S.__new__(S).gpu_from_yaml("name: x"),
        "Session.predict": lambda: S.__new__(S).predict(m, "nvidia-t4"),
        "Session.compare": lambda: S.__new__(S).compare(m, ["nvidia-t4"]),
        "Session.plan": lambda: S.__new__(S).plan(m, "nvidia-t4"),
        "Session.compile": lambda: S.__new__(S).compile(m),
        "Session.record": lambda: S.__new__(S).record("x.db", []),
        "Session.validate": lambda: S.__new__(S).validate(runs=[]),
        "Model.source": lambda: M.__new__(M).source,
        "Model.content_hash": lambda: M.__new__(M).content_hash,
        "Model.size_bytes": lambda: M.__new__(M).size_bytes,
        "Model.inputs": lambda: M.__new__(M).inputs,
        "Model.outputs": lambda: M.__new__(M).outputs,
        "Model.num_nodes": lambda: M.__new__(M).num_nodes,
        "Model.__repr__": lambda: repr(M.__new__(M)),
        "Gpu.name": lambda: G.__new__(G).name,
        "Gpu.display_name": lambda: G.__new__(G).display_name,
        "Gpu.vendor": lambda: G.__new__(G).vendor,
        "Gpu.document": lambda: G.__new__(G).document(),
        "Gpu.__repr__": lambda: repr(G.__new__(G)),
        "Program.inputs": lambda: P.__new__(P).inputs,
        "Program.outputs": lambda: P.__new__(P).outputs,
        "Program.plan": lambda: P.__new__(P).plan,
        "Program.run": lambda: P.__new__(P).run(),
        "Program.time": lambda: P.__new__(P).time(),
        "Program.tune": lambda: P.__new__(P).tune(store="off"),
        "predict(model=Model.__new__)": lambda: s.predict(M.__new__(M), g),
        "predict(gpu=Gpu.__new__)": lambda: s.predict(m, G.__new__(G)),
        "compare(Model.__new__)": lambda: s.compare(M.__new__(M), ["nvidia-t4"]),
        "plan(gpu=Gpu.__new__)": lambda: s.plan(m, G.__new__(G)),
        "compile(Model.__new__)": lambda: s.compile(M.__new__(M)),
        "compile(gpu=Gpu.__new__)": lambda: s.compile(m, gpu=G.__new__(G)),
    }
    for name, call in calls.items():
        try:
            call()
        except TypeError as e:
            assert "was never initialised" in str(e), (name, str(e))
            print(name, "TypeError:", e)
        else:
            raise SystemExit(f"{name}: no exception")
    late = S.__new__(S)
    late.__init__()
    assert late.profiles(), "__init__ after __new__ makes a working Session"
    print("ok")
''')


def test_uninitialised_objects_raise_and_do_not_crash(root):
    """Session, Model, Gpu and Program made with __new__ (no __init__): every method, property and
    argument use raises TypeError naming how to get a real one. In a child interpreter, so a crash
    fails this test instead of ending the suite."""
    script = f"MODEL = {str(root / 'models' / 'mobilenet_v2.onnx')!r}\n" + UNINITIALISED
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert r.stdout.strip().endswith("ok")
    assert "Session.profiles TypeError: gpusim.Session: this object was never initialised (Session.__new__ without " \
           "__init__); get one from gpusim.Session()" in r.stdout
    assert "get one from Session.compile()" in r.stdout and "get one from Session.open_model()" in r.stdout


def mobilenet_on_vulkan(session, root):
    """MobileNetV2 compiled for Vulkan with the lavapipe profile; skips where no Vulkan device loads."""
    m = session.open_model(root / "models" / "mobilenet_v2.onnx")
    try:
        return session.compile(m, backend="vulkan", gpu="lavapipe")
    except gpusim.Error as e:
        if e.code == "unavailable":
            pytest.skip(f"no Vulkan device: {e}")
        raise


def test_time_record_and_validate_on_vulkan(session, root, tmp_path):
    prog = mobilenet_on_vulkan(session, root)
    run = prog.time(repeat=1, check=True)
    assert run["schema"] == "gpusim.run/1"
    assert run["backend"] == "vulkan"
    assert run["check"] and all(c["pass"] for c in run["check"])
    store = tmp_path / "store.db"
    first = session.record(str(store), run)
    assert first["added"] == len(run["kernels"]) > 0
    assert session.record(str(store), [run])["duplicates"] == first["added"]
    device = {run["device"]["name"]: "lavapipe"}
    card = session.validate(runs=[run], profile_for=device)
    assert card["schema"] == "gpusim.validate/1"
    from_store = session.validate(truth=store, profile_for=device)
    assert from_store["overall"]["model"]["n"] == card["overall"]["model"]["n"] > 0
    with pytest.raises(gpusim.Error, match="give either truth"):
        session.validate()
    with pytest.raises(gpusim.Error) as e:
        prog.time(repeat=0)
    assert "repeat 0 is not a count of timed runs" in str(e.value)


def test_tune_then_time_on_vulkan(session, root, tmp_path, monkeypatch):
    """Program.tune() takes `gpusim tune`'s defaults: store=None is the default tuning store
    ($GPUSIM_TUNING_DB, else $XDG_CACHE_HOME/gpusim/tuning.db), "off" keeps nothing, a path another
    store; Program.plan is the tuned plan, which compiles again as it is."""
    prog = mobilenet_on_vulkan(session, root)
    eager = prog.plan
    assert eager["schema"] == "gpusim.plan/1" and len(eager["kernels"]) > 50
    default = tmp_path / "default" / "tuning.db"
    monkeypatch.setenv("GPUSIM_TUNING_DB", str(default))
    cold = prog.tune(top_k=2)
    assert cold["schema"] == "gpusim.tune/1"
    assert cold["store"] == str(default) and default.is_file()
    assert cold["kernels_measured"] > 0
    assert 0 <= cold["report_card"]["top1_within_3pct"] <= 1
    tuned = prog.plan
    assert [k["nodes"] for k in tuned["kernels"]] == [k["nodes"] for k in eager["kernels"]]
    for k in cold["kernels"]:
        assert tuned["kernels"][k["kernel"]]["tile"] == k["tile"], k["name"]
    # The same default store again: every kernel from the cache.
    warm = prog.tune(top_k=2)
    assert warm["kernels_measured"] == 0 and warm["candidates_run"] == 0
    assert warm["kernels_cached"] == cold["kernels_measured"] + cold["kernels_cached"]
    # The tuned plan goes back in as it came out.
    model = session.open_model(root / "models" / "mobilenet_v2.onnx")
    assert session.compile(model, backend="vulkan", gpu="lavapipe", plan=tuned).plan == tuned
    assert session.predict(model, "lavapipe", plan=tuned)["schema"] == "gpusim.predict/1"
    run = prog.time(repeat=1, check=True)
    assert all(c["pass"] for c in run["check"])
    # "off": nothing kept; a path (os.PathLike too): that store. A budget keeps these short.
    off = prog.tune(top_k=2, store="off", budget_s=0.001)
    assert off["store"] == "" and off["kernels_cached"] == 0 and off["budget_hit"]
    other = tmp_path / "other.db"
    assert prog.tune(top_k=2, store=other, budget_s=0.001)["store"] == str(other) and other.is_file()
    # With no $GPUSIM_TUNING_DB, the user's cache directory.
    monkeypatch.delenv("GPUSIM_TUNING_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert prog.tune(top_k=2, budget_s=0.001)["store"] == str(tmp_path / "xdg" / "gpusim" / "tuning.db")
    with pytest.raises(gpusim.Error, match="top_k=0 is out of range"):
        prog.tune(top_k=0)
    doc = gpusim.Program.tune.__doc__
    assert "None (the default) is `gpusim" in doc and "$GPUSIM_TUNING_DB" in doc and "\"off\" keeps nothing" in doc


def test_many_threads_predicting_on_one_session(session, root):
    m = session.open_model(root / "models" / "resnet50.onnx")
    want = session.predict(m, "nvidia-l4", dtype="fp16")
    same = []

    def work():
        for _ in range(4):
            same.append(session.predict(m, "nvidia-l4", dtype="fp16") == want)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert same == [True] * 24


def test_profiles_are_listed_with_their_figures(session):
    all_ = session.profiles()
    names = [p["name"] for p in all_]
    assert "nvidia-rtx-3060" in names and names == sorted(names)
    assert all("path" in p for p in all_)


def test_readme_python_block(root):
    """The README's Python example runs as printed there: in a fresh interpreter, from the repository
    root, against the package under test (the one this process imported: build/python under ctest,
    the installed one in the package tier)."""
    text = (root / "README.md").read_text()
    section = text.split("\n## Python\n", 1)[1]
    block = section.split("```python\n", 1)[1].split("\n```", 1)[0]
    assert "s.predict(" in block and "program.run(" in block
    probe = "\nimport gpusim as _g\nprint('gpusim from', _g.__file__)\n"
    r = subprocess.run([sys.executable, "-c", block + probe], cwd=root, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "ms in" in r.stdout and "not_found no GPU profile named" in r.stdout
    assert f"gpusim from {gpusim.__file__}" in r.stdout


def test_generate_equals_the_cli_and_refuses_bad_options(session, root, gpusim_binary):
    # A bundled description by name, its path, and its text give the same generation as the CLI.
    by_name = session.generate("llama-2-7b", "nvidia-rtx-3060", weights="Q4_0", prompt=128, generate=16)
    path = root / "models" / "llm" / "llama-2-7b.yaml"
    by_text = session.generate(path.read_text(), "nvidia-rtx-3060", weights="Q4_0", prompt=128, generate=16)
    cli = cli_json(gpusim_binary, root, "predict", str(path), "--gpu", "nvidia-rtx-3060", "--weights", "Q4_0", "--prompt", "128",
                   "--generate", "16")
    assert by_name["schema"] == "gpusim.generation/1"
    for doc in (by_text, cli):
        assert doc["ttft_us"] == pytest.approx(by_name["ttft_us"], rel=1e-12)
        assert doc["token_mean_us"] == pytest.approx(by_name["token_mean_us"], rel=1e-12)
        assert doc["memory"] == by_name["memory"]
    assert by_name["decode"]["bound"] == "dram"
    with pytest.raises(gpusim.Error, match='weights "Q4_9"'):
        session.generate("llama-2-7b", "nvidia-rtx-3060", weights="Q4_9")
    with pytest.raises(gpusim.Error, match="no model description"):
        session.generate("llama-9-1b", "nvidia-rtx-3060")
    # An ONNX decoder with a KV cache, as the CLI predicts it.
    dec = root / "models" / "tiny_llama_decoder.onnx"
    onnx_gen = session.generate(str(dec), "nvidia-rtx-3060", prompt=32, generate=8)
    cli_dec = cli_json(gpusim_binary, root, "predict", str(dec), "--gpu", "nvidia-rtx-3060", "--prompt", "32", "--generate", "8")
    assert onnx_gen["backend"] == "onnx"
    assert onnx_gen["ttft_us"] == pytest.approx(cli_dec["ttft_us"], rel=1e-12)
    assert onnx_gen["token_mean_us"] == pytest.approx(cli_dec["token_mean_us"], rel=1e-12)
    with pytest.raises(gpusim.Error, match="no past_key_values inputs"):
        session.generate(str(root / "models" / "resnet50.onnx"), "nvidia-rtx-3060")
    # The decoder's passes under a runtime and a dtype, as the CLI prices them; llama.cpp's options refused.
    eager = session.generate(str(dec), "nvidia-rtx-3060", prompt=32, generate=8, dtype="fp32", runtime="pytorch-eager")
    cli_eager = cli_json(gpusim_binary, root, "predict", str(dec), "--gpu", "nvidia-rtx-3060", "--prompt", "32", "--generate",
                         "8", "--dtype", "fp32", "--runtime", "pytorch-eager")
    assert eager["runtime"] == "pytorch-eager"
    assert eager["weights"] == "fp32"
    assert eager["ttft_us"] == pytest.approx(cli_eager["ttft_us"], rel=1e-12)
    with pytest.raises(gpusim.Error, match="describe llama.cpp"):
        session.generate(str(dec), "nvidia-rtx-3060", weights="Q4_0")
    with pytest.raises(gpusim.Error, match="dtype and tiles apply to an ONNX decoder"):
        session.generate("llama-2-7b", "nvidia-rtx-3060", dtype="fp16")


def test_compare_generation_equals_the_cli(session, root, gpusim_binary):
    rows = session.compare_generation("llama-2-7b", ["nvidia-rtx-3060", "apple-m2-max"], weights="Q4_0", prompt=128,
                                      generate=16)
    cli = cli_json(gpusim_binary, root, "compare", "llama-2-7b", "--gpus", "nvidia-rtx-3060,apple-m2-max", "--weights",
                   "Q4_0", "--prompt", "128", "--generate", "16")
    assert rows["schema"] == "gpusim.compare-generation/1"
    assert [r["gpu"] for r in rows["gpus"]] == ["nvidia-rtx-3060", "apple-m2-max"]
    for mine, theirs in zip(rows["gpus"], cli["gpus"]):
        assert mine["token_mean_us"] == pytest.approx(theirs["token_mean_us"], rel=1e-12)
        assert mine["backend"] == theirs["backend"]
    dec = root / "models" / "tiny_llama_decoder.onnx"
    onnx_rows = session.compare_generation(str(dec), ["nvidia-t4", "nvidia-h100-sxm"], prompt=16, generate=4)
    assert [r["backend"] for r in onnx_rows["gpus"]] == ["onnx", "onnx"]
    with pytest.raises(gpusim.Error, match="no GPU profile named"):
        session.compare_generation("llama-2-7b", ["nvidia-t4", "no-such-gpu"])


def test_compare_runtimes_equals_the_cli(session, root, gpusim_binary):
    model = session.open_model(str(root / "models" / "mobilenet_v2.onnx"))
    doc = session.compare_runtimes(model, "nvidia-rtx-3060", runtimes=["pytorch-eager", "tensorrt", "gpusim-plan"],
                                   batches=[1, 8], host="windows")
    cli = cli_json(gpusim_binary, root, "compare", "models/mobilenet_v2.onnx", "--gpu", "nvidia-rtx-3060",
                   "--runtimes", "pytorch-eager,tensorrt,gpusim-plan", "--batches", "1,8", "--host", "windows")
    assert doc["schema"] == "gpusim.compare-runtimes/1"
    assert [b["batch"] for b in doc["batches"]] == [1, 8]
    for mine, theirs in zip(doc["batches"], cli["batches"]):
        assert [r["runtime"] for r in mine["runtimes"]] == [r["runtime"] for r in theirs["runtimes"]]
        for a, b in zip(mine["runtimes"], theirs["runtimes"]):
            assert a["total_us"] == pytest.approx(b["total_us"], rel=1e-12)
        assert mine["verdict"] == theirs["verdict"]
    everything = session.compare_runtimes(model, "nvidia-rtx-3060")
    assert {s["runtime"] for s in everything["skipped"]} >= {"llamacpp-cuda", "pytorch-eager-rocm"}
    with pytest.raises(TypeError, match="batches must be ints"):
        session.compare_runtimes(model, "nvidia-rtx-3060", batches=[1, "8"])
    with pytest.raises(gpusim.Error, match="runtime \"tensorrt\" runs on nvidia GPUs"):
        session.compare_runtimes(model, "amd-mi300x", runtimes="tensorrt")


def test_compare_generation_takes_prices(session):
    doc = session.compare_generation("llama-2-7b", ["nvidia-rtx-3060", "nvidia-h100-sxm"], weights="Q4_0", prompt=64,
                                     generate=8, prices={"nvidia-rtx-3060": 329, "nvidia-h100-sxm": "2.49/h"})
    rows = doc["gpus"]
    assert rows[0]["value"]["per"] == "purchase"
    assert rows[1]["value"]["per"] == "hour"
    assert rows[1]["value"]["usd_per_million_tokens"] > 0
    assert all(r["decode_j_per_token"] > 0 for r in rows)
    plain = session.compare_generation("llama-2-7b", ["nvidia-rtx-3060"], weights="Q4_0", prompt=64, generate=8)
    assert plain["gpus"][0]["value"] is None
    with pytest.raises(TypeError, match="prices must be a dict"):
        session.compare_generation("llama-2-7b", ["nvidia-rtx-3060"], prices=["nvidia-rtx-3060=329"])
    with pytest.raises(gpusim.Error, match="is not one of the GPUs compared"):
        session.compare_generation("llama-2-7b", ["nvidia-rtx-3060"], prices={"nvidia-t4": 100})


def test_plan_refuses_a_schedulers_setting_given_for_another(session, root):
    model = session.open_model(str(root / "models" / "mobilenet_v2.onnx"))
    with pytest.raises(gpusim.Error, match="beam_width applies to the beam scheduler; the greedy scheduler does not"):
        session.plan(model, "nvidia-t4", beam_width=4)
    with pytest.raises(gpusim.Error, match="seed applies to the random scheduler"):
        session.plan(model, "nvidia-t4", scheduler="beam", seed=3)
    ranked = session.plan(model, "nvidia-t4", scheduler="random", samples=4, seed=3, top=1)
    assert len(ranked["plans"]) == 1
