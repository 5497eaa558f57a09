#!/usr/bin/env python3
"""Checks apps/serve/openapi.json as a contract.

1. The document is valid OpenAPI (openapi-spec-validator, PyPI), and holds what the service relies on:
   the paths tests/apps/serve/test_serve.cpp looks for, a gpusim.error/1 body for every error status, and
   nothing CMake's configure_file(@ONLY) or the raw string it is compiled into would change; the
   examples the schemas give fit them.
2. With --gpusim PATH: starts `PATH serve --port 0` (the port it prints), sends real requests to it
   (upload a model, /healthz, /v1/profiles, /v1/profiles/NAME, /v1/predict, /v1/compare, /v1/plan,
   /v1/validate, /v1/generate, and requests that fail), and checks each answer against the document: the status
   is one the operation declares, the Content-Type is the declared media type, and the body
   validates against the declared schema (jsonschema, JSON Schema 2020-12 as OpenAPI 3.1 uses, with
   every $ref resolved in the document). Each JSON request body sent is checked against the
   operation's request schema too, and each query parameter against the declared parameters, so
   the document accepts what the server accepts. Then it stops the server with SIGTERM.
   --extended also checks the behaviours the document declares beyond those (X-Request-Id on every
   answer, GET /metrics, 401 without the bearer token from --token-file, 403 for a foreign Host,
   405 with Allow, 415, 400 naming an unknown field, the served /openapi.json equal to the file).

   tests/apps/serve/openapi_check.py [--spec FILE] [--gpusim PATH [--extended]] [--source-dir DIR]
Exits 0 when every check passes, 1 otherwise (each failure printed), 2 on bad usage.
"""
import argparse
import http.client
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent.parent

# The paths tests/apps/serve/test_serve.cpp requires, and the ones the service has grown since.
REQUIRED_PATHS = ["/healthz", "/openapi.json", "/v1/profiles", "/v1/profiles/{name}", "/v1/models", "/v1/predict",
                  "/v1/compare", "/v1/plan", "/v1/validate", "/v1/generate", "/metrics"]
DOC_URI = "urn:gpusim:openapi"


class Checker:
    def __init__(self):
        self.failures = []
        self.passed = 0

    def ok(self, what):
        self.passed += 1
        print(f"  ok    {what}")

    def fail(self, what, why):
        self.failures.append(f"{what}: {why}")
        print(f"  FAIL  {what}: {why}")

    def check(self, cond, what, why):
        if cond:
            self.ok(what)
        else:
            self.fail(what, why)
        return cond


def short(x, n=300):
    s = x if isinstance(x, str) else json.dumps(x)
    return s if len(s) <= n else s[: n - 3] + "..."


# ---- 1. the document -----------------------------------------------------------------------------

def validate_document(path, c):
    print(f"openapi_check: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        c.fail("read the document", str(e))
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        c.fail("parse the document", f"not valid JSON at line {e.lineno} column {e.colno}: {e.msg}")
        return None
    try:
        import openapi_spec_validator as osv
        from importlib.metadata import version
    except ImportError as e:
        c.fail("import openapi_spec_validator", f"{e}; pip install -r {HERE / 'requirements-openapi.txt'}")
        return None
    ver = str(doc.get("openapi", ""))
    classes = {"3.0": "OpenAPIV30SpecValidator", "3.1": "OpenAPIV31SpecValidator", "3.2": "OpenAPIV32SpecValidator"}
    cls = getattr(osv, classes.get(ver[:3], ""), None)
    if cls is None:
        c.fail("OpenAPI version", f"\"openapi\": {ver!r} is not 3.0.x, 3.1.x or 3.2.x")
        return None
    print(f"  openapi-spec-validator {version('openapi-spec-validator')}, jsonschema {version('jsonschema')}; "
          f"the document says OpenAPI {ver}")
    try:
        errors = list(cls(doc).iter_errors())
    except Exception as e:  # an unresolvable $ref is raised, not listed
        ref = getattr(e, "ref", None)
        c.fail("openapi-spec-validator", f"{type(e).__name__}: " + (f"$ref {ref!r} points nowhere" if ref
                                                                   else short(str(e))))
        return None
    if errors:
        for e in errors[:20]:
            where = getattr(e, "json_path", "") or "/".join(str(p) for p in e.absolute_path)
            c.fail("openapi-spec-validator", f"at {where}: {short(e.message)}")
        if len(errors) > 20:
            print(f"  ... and {len(errors) - 20} more")
        return None
    c.ok(f"valid OpenAPI {ver}")

    paths = doc.get("paths", {})
    missing = [p for p in REQUIRED_PATHS if p not in paths]
    c.check(not missing, "the paths the service answers are documented", f"missing {missing}")
    # Every error answer is a gpusim.error/1 document.
    bad = []
    for p, item in paths.items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "delete", "patch"):
                continue
            for status, resp in op.get("responses", {}).items():
                resp = deref(doc, resp)
                if status[0] in "45":
                    schema = resp.get("content", {}).get("application/json", {}).get("schema", {})
                    if schema.get("$ref") != "#/components/schemas/Error":
                        bad.append(f"{method.upper()} {p} {status}")
    c.check(not bad, "every 4xx and 5xx answer is gpusim.error/1", f"not: {bad}")
    # The examples the schemas give are valid instances of them.
    try:
        contract = Contract(doc)
    except ImportError as e:
        c.fail("import jsonschema/referencing", f"{e}; pip install -r {HERE / 'requirements-openapi.txt'}")
    else:
        bad = []
        for name, schema in doc.get("components", {}).get("schemas", {}).items():
            for i, example in enumerate(schema.get("examples", [])):
                bad += [f"{name} examples[{i}]: {e}" for e in contract.schema_errors(f"/components/schemas/{name}",
                                                                                    example)]
        c.check(not bad, "the schemas' examples fit them", "; ".join(bad))
    # apps/serve/CMakeLists.txt compiles the file in with configure_file(@ONLY) into a raw string.
    c.check(not re.search(r"@[A-Za-z0-9_]+@", text) and ")gpusim_openapi\"" not in text,
            "the text survives configure_file(@ONLY) and the raw string it is compiled into",
            "it holds @NAME@ (CMake would substitute it) or the raw string's delimiter")
    return doc


def deref(doc, obj):
    """A local $ref (#/...) followed to what it names, repeatedly."""
    for _ in range(20):
        if not (isinstance(obj, dict) and "$ref" in obj):
            return obj
        ref = obj["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"non-local $ref {ref}")
        node = doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        obj = node
    raise ValueError("a $ref cycle")


# ---- 2. the live server --------------------------------------------------------------------------

class Contract:
    """Validates requests and answers against the document's operations."""

    def __init__(self, doc):
        import jsonschema
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012

        self.doc = doc
        self.jsonschema = jsonschema
        self.registry = Registry().with_resource(DOC_URI, Resource.from_contents(doc, default_specification=DRAFT202012))

    def validator(self, pointer):
        return self.jsonschema.Draft202012Validator({"$ref": f"{DOC_URI}#{pointer}"}, registry=self.registry)

    def absolute(self, schema):
        """An inline schema (a oneOf of answers, say) with its '#/...' references made absolute: the
        validator resolves a bare '#' against the inline schema itself, not the document."""
        if isinstance(schema, dict):
            return {k: (f"{DOC_URI}{v}" if k == "$ref" and isinstance(v, str) and v.startswith("#")
                        else self.absolute(v)) for k, v in schema.items()}
        if isinstance(schema, list):
            return [self.absolute(v) for v in schema]
        return schema

    def schema_errors(self, pointer, instance):
        errs = sorted(self.validator(pointer).iter_errors(instance), key=lambda e: list(e.absolute_path))
        out = []
        for e in errs[:5]:
            where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
            out.append(f"{where}: {short(e.message, 200)}")
        return out

    def operation(self, method, route):
        op = self.doc["paths"].get(route, {}).get(method.lower())
        return op

    def params(self, method, route):
        item = self.doc["paths"].get(route, {})
        op = item.get(method.lower(), {})
        return [deref(self.doc, p) for p in item.get("parameters", []) + op.get("parameters", [])]

    def request_pointer(self, method, route, media):
        op = self.operation(method, route)
        content = op.get("requestBody", {}).get("content", {}) if op else {}
        if media not in content:
            return None, f"{method} {route} declares no {media} request body (declared: {sorted(content)})"
        schema = content[media].get("schema", {})
        if "$ref" in schema:
            return schema["$ref"][1:], None
        # An inline schema: addressed by its place in the document.
        return f"/paths/{route.replace('~', '~0').replace('/', '~1')}/{method.lower()}/requestBody/content/" \
               f"{media.replace('~', '~0').replace('/', '~1')}/schema", None

    def response(self, method, route, status):
        op = self.operation(method, route)
        if op is None:
            return None, f"{method} {route} is not in the document"
        resps = op.get("responses", {})
        key = str(status) if str(status) in resps else f"{str(status)[0]}XX" if f"{str(status)[0]}XX" in resps else \
            "default" if "default" in resps else None
        if key is None:
            return None, f"{method} {route} does not declare status {status} (declared: {sorted(resps)})"
        return (key, deref(self.doc, resps[key])), None


class Server:
    def __init__(self, gpusim, source, extra_args, token=None):
        self.log = tempfile.NamedTemporaryFile(prefix="openapi_check_serve.", suffix=".log", delete=False)
        self.token = token
        args = [gpusim, "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "2"] + extra_args
        print(f"openapi_check: starting {' '.join(args)}")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=source)
        self.host, self.port = None, None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = pathlib.Path(self.log.name).read_text(errors="replace")
            m = re.search(r"listening on http://([^\s:/]+):(\d+)", text)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                break
            if self.proc.poll() is not None:
                os.unlink(self.log.name)
                raise RuntimeError(f"gpusim serve exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        if self.port is None:
            self.stop()
            text = self.output()
            os.unlink(self.log.name)
            raise RuntimeError(f"gpusim serve printed no \"listening on http://HOST:PORT\" line in 30 s:\n{text}")
        print(f"openapi_check: gpusim serve is listening on http://{self.host}:{self.port}")

    def request(self, method, target, body=None, content_type=None, headers=None, auth=True):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        h = dict(headers or {})
        if content_type:
            h["Content-Type"] = content_type
        if self.token and auth:
            h.setdefault("Authorization", f"Bearer {self.token}")
        try:
            conn.request(method, target, body=body, headers=h)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def output(self):
        return pathlib.Path(self.log.name).read_text(errors="replace")


def exchange(c, contract, server, method, route, target=None, body=None, content_type=None, expect=None,
             headers=None, auth=True, check_headers=False, label=None):
    """One request: its JSON body and query checked against the document, its answer too. Returns the
    parsed answer body (None when not JSON)."""
    target = target or route
    what = label or f"{method} {target}" + (f" ({content_type})" if content_type else "")
    # What we send must be what the document allows.
    if content_type == "application/json" and body is not None and contract.operation(method, route):
        pointer, err = contract.request_pointer(method, route, "application/json")
        if err:
            c.fail(what, err)
        else:
            try:
                sent = json.loads(body)
            except ValueError:
                sent = None  # a malformed body on purpose
            if sent is not None and isinstance(sent, dict) and (expect is None or expect < 400):
                errs = contract.schema_errors(pointer, sent)
                c.check(not errs, f"{what}: the request body fits the document", "; ".join(errs))
    query = urllib.parse.urlsplit(target).query
    if query and contract.operation(method, route):
        declared = {p["name"]: p for p in contract.params(method, route) if p.get("in") == "query"}
        patterns = [pat for p in declared.values() if p.get("explode", p.get("style", "form") == "form")
                    for pat in p.get("schema", {}).get("patternProperties", {})]
        unknown = [k for k, _ in urllib.parse.parse_qsl(query)
                   if k not in declared and not any(re.search(pat, k) for pat in patterns)]
        c.check(not unknown, f"{what}: the query parameters are documented", f"undocumented: {unknown}")

    status, hdrs, raw = server.request(method, target, body=body, content_type=content_type, headers=headers,
                                       auth=auth)
    if expect is not None and status != expect:
        c.fail(what, f"status {status}, expected {expect}: {short(raw.decode('utf-8', 'replace'))}")
        return None
    ctype = hdrs.get("content-type", "")
    parsed = None
    if ctype.startswith("application/json"):
        try:
            parsed = json.loads(raw)
        except ValueError as e:
            c.fail(what, f"the answer is not JSON ({e})")
            return None
    if contract.operation(method, route) is None:
        # A path the document does not have: the answer must still be a gpusim.error/1 document.
        errs = contract.schema_errors("/components/schemas/Error", parsed) if parsed is not None else ["not JSON"]
        c.check(not errs, f"{what} -> {status}: a gpusim.error/1 document", "; ".join(errs))
        return parsed
    found, err = contract.response(method, route, status)
    if err:
        c.fail(what, err)
        return parsed
    key, resp = found
    content = resp.get("content", {})
    media = next((m for m in content if m.split(";")[0].strip() == ctype.split(";")[0].strip()), None)
    if media is None:
        c.fail(what, f"status {status} answered Content-Type {ctype!r}; the document declares {sorted(content)}")
        return parsed
    schema = content[media].get("schema")
    if parsed is not None and schema is not None:
        pointer = schema["$ref"][1:] if "$ref" in schema else None
        if pointer is None:
            errs = list(contract.jsonschema.Draft202012Validator(contract.absolute(schema),
                                                                 registry=contract.registry)
                        .iter_errors(parsed))
            errs = [short(e.message, 200) for e in errs[:5]]
        else:
            errs = contract.schema_errors(pointer, parsed)
        c.check(not errs, f"{what} -> {status}: the answer fits {schema.get('$ref', 'its schema')}",
                "; ".join(errs))
    else:
        c.ok(f"{what} -> {status} {ctype}")
    if check_headers:
        for name, h in resp.get("headers", {}).items():
            h = deref(contract.doc, h)
            if h.get("required") and name.lower() not in hdrs:
                c.fail(what, f"status {status} lacks the {name} header the document requires")
    return parsed


def live(c, contract, gpusim, source, extended):
    truth = source / "tests/data/truth/neusight-sample"
    extra = ["--truth", str(truth), "--max-model-mb", "1"]  # resnet50 and bert fit, gpt2 (1.5 MB) does not
    token = None
    tokdir = None
    if extended:
        tokdir = tempfile.TemporaryDirectory(prefix="openapi_check.")
        token = "openapi-check-token-0123456789"
        tok = pathlib.Path(tokdir.name) / "token"
        tok.write_text(token)
        extra += ["--token-file", str(tok)]
    try:
        server = Server(gpusim, source, extra, token)
    except RuntimeError as e:
        c.fail("start gpusim serve", str(e))
        return
    ch = extended
    J = "application/json"
    O = "application/octet-stream"
    try:
        ex = lambda *a, **k: exchange(c, contract, server, *a, check_headers=ch, **k)
        ex("GET", "/healthz", expect=200)
        served = ex("GET", "/openapi.json", expect=200)
        if served is not None:
            same = served == contract.doc
            if extended:
                c.check(same, "GET /openapi.json is apps/serve/openapi.json", "the served document differs (rebuild)")
            elif not same:
                print("  note  the served /openapi.json differs from the file: this binary was built before the "
                      "file changed (it is compiled in)")
        profiles = ex("GET", "/v1/profiles", expect=200)
        names = [p["name"] for p in (profiles or {}).get("profiles", []) if p.get("valid")]
        c.check("nvidia-t4" in names, "GET /v1/profiles lists nvidia-t4", f"listed: {names}")
        for name in names:  # every profile's document, so every shape of it is checked
            ex("GET", "/v1/profiles/{name}", f"/v1/profiles/{name}", expect=200)
        ex("GET", "/v1/profiles/{name}", "/v1/profiles/no-such-gpu", expect=404)

        resnet = (source / "models/resnet50.onnx").read_bytes()
        bert = (source / "models/bert_base_seq128.onnx").read_bytes()
        up = ex("POST", "/v1/models", body=resnet, content_type=O, expect=200)
        model_id = (up or {}).get("model_id")
        c.check(up is not None and up.get("imported") is True, "the uploaded resnet50 imported", short(up or ""))
        up2 = ex("POST", "/v1/models", "/v1/models?model_name=bert.onnx", body=bert, content_type=O, expect=200,
                 label="POST /v1/models (bert, needs its batch dim)")
        c.check(up2 is not None and up2.get("imported") is False, "bert is kept, not imported", short(up2 or ""))
        ex("POST", "/v1/models", "/v1/models?dim.batch=2&model_name=bert.onnx", body=bert, content_type=O,
           expect=200, label="POST /v1/models?dim.batch=2 (bert)")
        ex("POST", "/v1/models", body=(source / "models/gpt2_prefill_seq512.onnx").read_bytes(), content_type=O,
           expect=413, label="POST /v1/models (over --max-model-mb)")
        ex("POST", "/v1/models", body=b"x" * 1000, content_type=O, expect=400, label="POST /v1/models (not ONNX)")

        body = lambda **kw: json.dumps(kw)
        ex("POST", "/v1/predict", body=body(model_id=model_id, gpu="nvidia-t4", dtype="fp16"), content_type=J,
           expect=200)
        ex("POST", "/v1/predict", "/v1/predict?gpu=nvidia-t4&dtype=fp16&runtime=cuda-graph", body=resnet,
           content_type=O, expect=200)
        ex("POST", "/v1/predict", "/v1/predict?gpu=nvidia-l4&dim.batch=2", body=bert, content_type="application/onnx",
           expect=200)
        ex("POST", "/v1/predict", body=body(model_id=up2.get("model_id") if up2 else "", gpu="nvidia-l4",
                                            dims={"batch": 2}), content_type=J, expect=200,
           label="POST /v1/predict (dims object)")
        ex("POST", "/v1/predict", body=body(model_id=up2.get("model_id") if up2 else "", gpu_yaml=(
            "schema: gpusim.profile/1\nname: my-l4\nextends: nvidia-l4\n"), dims=["batch=2"]), content_type=J,
           expect=200, label="POST /v1/predict (gpu_yaml, dims array)")
        ex("POST", "/v1/compare", body=body(model_id=model_id, gpus=["nvidia-t4", "amd-mi300x"]), content_type=J,
           expect=200)
        ex("POST", "/v1/compare", "/v1/compare?gpus=nvidia-t4&gpus=nvidia-l4&dtype=fp16", body=resnet,
           content_type=O, expect=200)
        plans = ex("POST", "/v1/plan", body=body(model_id=model_id, gpu="nvidia-t4", scheduler="greedy", top=2),
                   content_type=J, expect=200)
        if plans and plans.get("plans"):
            ex("POST", "/v1/predict", body=body(model_id=model_id, gpu="nvidia-t4", plan=plans["plans"][0]["plan"]),
               content_type=J, expect=200, label="POST /v1/predict (the plan /v1/plan answered)")
        ex("POST", "/v1/plan", "/v1/plan?gpu=nvidia-t4&scheduler=random&samples=4&seed=7&top=1&objective=energy",
           body=resnet, content_type=O, expect=200)
        ex("POST", "/v1/plan", "/v1/plan?gpu=nvidia-t4&beam_width=4", body=resnet, content_type=O, expect=400,
           label="POST /v1/plan (beam_width for the greedy scheduler)")
        ex("POST", "/v1/validate", body=body(), content_type=J, expect=200)
        ex("POST", "/v1/compare", body=body(llm="llama-2-7b", gpus=["nvidia-rtx-3060", "apple-m2-max"], weights="Q4_0",
                                           prompt=64, generate=8), content_type=J, expect=200,
           label="POST /v1/compare (a language model's generation)")
        ex("POST", "/v1/compare", body=body(llm="llama-2-7b", gpus=["nvidia-rtx-3060", "nvidia-h100-sxm"], weights="Q4_0",
                                           prompt=64, generate=8,
                                           prices={"nvidia-rtx-3060": 329, "nvidia-h100-sxm": "2.49/h"}),
           content_type=J, expect=200, label="POST /v1/compare (a generation's value at prices)")
        ex("POST", "/v1/compare", body=body(llm="llama-2-7b", gpus=["nvidia-rtx-3060"], prices={"nvidia-t4": 1}),
           content_type=J, expect=400, label="POST /v1/compare (a price for a GPU not compared)")
        ex("POST", "/v1/compare", body=body(model_id=model_id, gpu="nvidia-t4", runtimes="pytorch-eager,tensorrt",
                                            batches=[1, 2]), content_type=J, expect=200,
           label="POST /v1/compare (runtimes side by side)")
        ex("POST", "/v1/compare", body=body(model_id=model_id, gpu="nvidia-t4", runtimes="all", runtime="tensorrt"),
           content_type=J, expect=400, label="POST /v1/compare (runtime beside runtimes)")
        ex("POST", "/v1/compare", body=body(model_id=model_id, gpu="nvidia-t4", runtimes="all", batches=[0]),
           content_type=J, expect=400, label="POST /v1/compare (a batch of 0)")
        ex("POST", "/v1/compare", body=body(model_id=model_id, gpus=["nvidia-t4"], prompt=64), content_type=J,
           expect=400, label="POST /v1/compare (a generation's field on a graph)")
        ex("POST", "/v1/generate", body=body(llm="llama-2-7b", gpu="nvidia-rtx-3060", weights="Q4_0", prompt=64,
                                            generate=8), content_type=J, expect=200)
        ex("POST", "/v1/generate", body=body(llm_text=(source / "models/llm/tiny-llama-test.yaml").read_text(),
                                            gpu="apple-m2-max", flash_attention=True, generate=4), content_type=J,
           expect=200, label="POST /v1/generate (llm_text, flash attention)")
        decoder = (source / "models/tiny_llama_decoder.onnx").read_bytes()
        up3 = ex("POST", "/v1/models", "/v1/models?model_name=tiny_llama_decoder.onnx", body=decoder, content_type=O,
                 expect=200, label="POST /v1/models (an ONNX decoder with a KV cache)")
        ex("POST", "/v1/generate", body=body(model_id=(up3 or {}).get("model_id", ""), gpu="nvidia-rtx-3060", prompt=64,
                                            generate=8, batch=2, runtime="pytorch-eager"), content_type=J,
           expect=200, label="POST /v1/generate (an uploaded ONNX decoder)")
        ex("POST", "/v1/generate", "/v1/generate?gpu=nvidia-t4&prompt=32&generate=4&dtype=fp16&tiles=library", body=decoder,
           content_type=O, expect=200, label="POST /v1/generate (an ONNX decoder as the body)")

        # Requests that fail: each answer a documented status with a gpusim.error/1 body.
        ex("POST", "/v1/predict", body="{not json", content_type=J, expect=400, label="POST /v1/predict (not JSON)")
        ex("POST", "/v1/predict", body=body(model_id="0123", gpu="nvidia-t4"), content_type=J, expect=404,
           label="POST /v1/predict (unknown model_id)")
        ex("POST", "/v1/predict", "/v1/predict?gpu=/etc/passwd", body=resnet, content_type=O, expect=400)
        ex("POST", "/v1/plan", "/v1/plan?gpu=nvidia-t4&top=0", body=resnet, content_type=O, expect=400)
        ex("POST", "/v1/compare", body=body(model_id=model_id), content_type=J, expect=400,
           label="POST /v1/compare (no gpus)")
        ex("GET", "/v1/nope", expect=404)
        ex("POST", "/v1/generate", body=body(llm="llama-9-1b", gpu="nvidia-t4"), content_type=J, expect=404,
           label="POST /v1/generate (unknown model)")
        ex("POST", "/v1/generate", body=body(llm="llama-2-7b", gpu="nvidia-t4", weights="Q4_9"), content_type=J,
           expect=400, label="POST /v1/generate (unknown weights)")
        ex("POST", "/v1/generate", "/v1/generate?gpu=nvidia-t4", body=resnet, content_type=O, expect=400,
           label="POST /v1/generate (an ONNX graph without a KV cache)")

        if extended:
            # What the document declares beyond the routes: request ids, metrics, auth, Host, 405, 415, 400.
            st, h, _ = server.request("GET", "/healthz", headers={"X-Request-Id": "openapi-check-42"})
            c.check(h.get("x-request-id") == "openapi-check-42", "X-Request-Id is echoed",
                    f"answered {h.get('x-request-id')!r}")
            st, h, raw = server.request("GET", "/metrics")
            c.check(st == 200 and h.get("content-type", "").startswith("text/plain")
                    and "version=0.0.4" in h.get("content-type", ""),
                    "GET /metrics answers Prometheus text", f"{st} {h.get('content-type')!r}")
            ex("GET", "/v1/profiles", expect=401, auth=False, label="GET /v1/profiles without the token")
            st, h, _ = server.request("GET", "/v1/profiles", auth=False)
            c.check(h.get("www-authenticate", "").lower().startswith("bearer"), "401 says WWW-Authenticate: Bearer",
                    f"{h.get('www-authenticate')!r}")
            ex("GET", "/healthz", expect=200, auth=False, label="GET /healthz without the token")
            ex("GET", "/v1/profiles", expect=403, headers={"Host": "attacker.invalid"},
               label="GET /v1/profiles with a foreign Host")
            st, h, raw = server.request("DELETE", "/v1/predict")
            c.check(st == 405 and "POST" in h.get("allow", ""), "DELETE /v1/predict is 405 with Allow: POST",
                    f"{st} Allow {h.get('allow')!r}")
            c.check(not contract.schema_errors("/components/schemas/Error", json.loads(raw or b"null")),
                    "the 405 answer is gpusim.error/1", short(raw.decode("utf-8", "replace")))
            ex("POST", "/v1/predict", body="gpu=nvidia-t4", content_type="text/plain", expect=415)
            err = ex("POST", "/v1/predict", body=json.dumps({"model_id": model_id, "gpu": "nvidia-t4", "gpux": 1}),
                     content_type=J, expect=400, label="POST /v1/predict (unknown field gpux)")
            c.check(err is not None and "gpux" in err.get("error", {}).get("message", ""),
                    "the 400 names the unknown field", short(err or ""))
    finally:
        rc = server.stop()
        out = server.output()
        os.unlink(server.log.name)
        if tokdir:
            tokdir.cleanup()
        c.check(rc == 0 and "gpusim serve: stopped" in out, "gpusim serve stops on SIGTERM with exit 0",
                f"exit {rc}; output:\n{out[-2000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source-dir", type=pathlib.Path, default=DEFAULT_SOURCE, help="the repository (default: ../..)")
    ap.add_argument("--spec", type=pathlib.Path, help="the document (default: SOURCE/apps/serve/openapi.json)")
    ap.add_argument("--gpusim", help="the gpusim binary: also check a live `gpusim serve` against the document")
    ap.add_argument("--extended", action="store_true",
                    help="with --gpusim: also check X-Request-Id, /metrics, --token-file auth, Host, 405, 415, "
                         "unknown fields and that /openapi.json serves the file")
    a = ap.parse_args()
    source = a.source_dir.resolve()
    spec = a.spec or source / "apps/serve/openapi.json"
    if a.extended and not a.gpusim:
        ap.error("--extended needs --gpusim")
    c = Checker()
    doc = validate_document(spec, c)
    if doc is not None and a.gpusim:
        try:
            contract = Contract(doc)
        except ImportError as e:
            c.fail("import jsonschema/referencing", f"{e}; pip install -r {HERE / 'requirements-openapi.txt'}")
        else:
            live(c, contract, a.gpusim, source, a.extended)
    print(f"openapi_check: {c.passed} passed, {len(c.failures)} failed")
    for f in c.failures:
        print(f"  failed: {short(f, 500)}")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
