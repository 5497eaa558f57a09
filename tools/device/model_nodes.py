#!/usr/bin/env python3
"""The GEMM-like nodes of ONNX graphs with their shapes, for timing each one in a vendor library.

For every Conv, Gemm and MatMul node of each model, with its symbolic dims set,
writes the node's name (the kernel name `gpusim run` reports for an eager plan), its operand shapes
and attributes, so that tools/device/torch_measure.py can time the same operation through PyTorch
(cuBLAS, cuDNN) and set it beside gpusim's generated kernel. Needs the `onnx` package; reads the
graph only (weights are not needed).

    tools/device/model_nodes.py --out nodes.json models/resnet50.onnx models/bert_base_seq128.onnx:batch=1
"""
import argparse
import json
import sys

import onnx
from onnx import shape_inference


def dims_of(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    out = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        else:
            return None
    return out


def model_nodes(path, sets):
    m = onnx.load(path, load_external_data=False)
    g = m.graph
    inits = {i.name: list(i.dims) for i in g.initializer}
    for inp in g.input:
        if inp.name in inits:
            continue
        for d in inp.type.tensor_type.shape.dim:
            if d.HasField("dim_param"):
                if d.dim_param not in sets:
                    sys.exit(f"{path}: input {inp.name} has symbolic dim {d.dim_param}; give {path}:{d.dim_param}=N")
                v = sets[d.dim_param]
                d.Clear()
                d.dim_value = v
    inferred = shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    shapes = dict(inits)
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        s = dims_of(vi)
        if s is not None:
            shapes.setdefault(vi.name, s)
    out = []
    for n in g.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
        ins = [shapes.get(i) for i in n.input]
        if any(s is None for s in ins[:2]):
            print(f"{path}: node {n.name}: operand shapes unknown, skipped", file=sys.stderr)
            continue
        rec = {"name": n.name, "op": n.op_type, "a": ins[0], "b": ins[1], "b_weight": n.input[1] in inits,
               "bias": len(n.input) > 2 and n.input[2] != ""}
        if n.op_type == "Conv":
            k = len(ins[1]) - 2
            rec.update(group=int(a.get("group", 1)), strides=list(a.get("strides", [1] * k)),
                       pads=list(a.get("pads", [0] * (2 * k))), dilations=list(a.get("dilations", [1] * k)))
            if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                print(f"{path}: node {n.name}: auto_pad not handled, skipped", file=sys.stderr)
                continue
        if n.op_type == "Gemm":
            rec.update(trans_a=int(a.get("transA", 0)), trans_b=int(a.get("transB", 0)))
        out.append(rec)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="MODEL.onnx[:dim=N[,dim=N]]")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    res = {}
    for spec in args.models:
        path, _, rest = spec.partition(":")
        sets = {k: int(v) for k, v in (kv.split("=") for kv in rest.split(",") if kv)}
        res[path] = {"dims": sets, "nodes": model_nodes(path, sets)}
        print(f"{path}: {len(res[path]['nodes'])} nodes", file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
