#!/usr/bin/env python3
"""Write a llama-family decoder with a KV cache as a shape-only ONNX graph, from its description.

The graph is transformers' LlamaForCausalLM forward, op by op as torch.onnx.export writes it
(opset 17) for a step with a cache: token embedding (Gather); per layer RMSNorm (Pow, ReduceMean,
Add, Sqrt, Div, Mul), the q/k/v projections (MatMul by [in, out] weights), heads split (Reshape,
Transpose), rotary embedding (cos/sin gathered by position_ids, rotate_half by Slice/Neg/Concat),
the cache (Concat of past_key_values.N.key/value with the step's keys and values, written out as
present.N.key/value), grouped-query heads repeated (Tile, Reshape), attention (MatMul, scale, the
padding mask from attention_mask, Softmax, MatMul), o_proj and the residual, RMSNorm, the SwiGLU MLP
(gate and up MatMuls, SiLU as x * Sigmoid(x), Mul, down MatMul) and the residual; the final RMSNorm
and lm_head. One graph serves the prompt (past_sequence_length 0, sequence_length = the prompt) and
each generated token (sequence_length 1); total_sequence_length = past + sequence. Left out: the
causal triangle of a prompt's mask (the padding mask's broadcast Add stands in: the same kernels).

--weights q4 writes every projection as ONNX Runtime's int4 quantizer does: com.microsoft
MatMulNBits, 4 bits in blocks of 32 with an fp16 scale each (Q4_0's arithmetic), weights [N, K/32, 16].

Shape-only, as tools/export_models.py writes the bundled models: initializers over 1024 bytes are
external data in "<name>.weights.bin", which is never written (`gpusim run` seeds them); smaller ones
are embedded, RMSNorm weights as ones (as transformers initialises them); nothing is downloaded. Needs the
`onnx` and `pyyaml` packages (tools/setup-export-venv.sh, or any Python with them).

Usage:
    tools/export_llama_onnx.py models/llm/tiny-llama-test.yaml --out models/tiny_llama_decoder.onnx
    tools/export_llama_onnx.py models/llm/llama-2-7b.yaml --out models/llama2_7b_decoder_q4.onnx --weights q4
"""
import argparse
import json
import os

import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper

SIZE_THRESHOLD = 1024
# The element types the graph stores, as numpy types (their sizes, and embedded values).
NP_TYPES = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16, TensorProto.UINT8: np.uint8,
            TensorProto.INT64: np.int64}


class Builder:
    def __init__(self, name, dtype):
        self.name = name
        self.dtype = dtype
        self.nodes, self.inits, self.offset = [], [], 0

    def weight(self, name, dims, dtype=None, ones=False):
        t = TensorProto()
        t.name = name
        t.data_type = dtype if dtype is not None else self.dtype
        t.dims.extend(dims)
        nbytes = int(np.prod(dims)) * np.dtype(NP_TYPES[t.data_type]).itemsize
        if nbytes <= SIZE_THRESHOLD:
            # Small: embedded, as an exporter keeps its small constants: an RMSNorm's weight as
            # transformers initialises it (ones; zeros would make every output after the first
            # norm zero, and `run --check` compare nothing), anything else zeros.
            t.raw_data = (np.ones if ones else np.zeros)(dims, dtype=NP_TYPES[t.data_type]).tobytes()
        else:
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", self.name + ".weights.bin"), ("offset", str(self.offset)), ("length", str(nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            self.offset += nbytes
        self.inits.append(t)
        return name

    def const(self, name, values, dtype=TensorProto.INT64):
        arr = np.array(values, dtype=NP_TYPES[dtype])
        self.inits.append(helper.make_tensor(name, dtype, list(arr.shape), arr.tobytes(), raw=True))
        return name

    def op(self, op, inputs, name, outputs=1, domain=None, **attrs):
        outs = [f"{name}/output_{i}" for i in range(outputs)] if isinstance(outputs, int) else outputs
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs


def load_spec(path):
    with open(path) as f:
        d = yaml.safe_load(f) if path.endswith((".yaml", ".yml")) else json.load(f)
    if "hidden_size" in d:  # a Hugging Face config.json
        return {"name": os.path.basename(os.path.dirname(os.path.abspath(path))), "layers": d["num_hidden_layers"],
                "hidden": d["hidden_size"], "ffn": d["intermediate_size"], "heads": d["num_attention_heads"],
                "kv_heads": d.get("num_key_value_heads", d["num_attention_heads"]), "vocab": d["vocab_size"],
                "context": d.get("max_position_embeddings", 4096), "norm_eps": d.get("rms_norm_eps", 1e-5)}
    return d


def export(spec, weights, out):
    name = os.path.splitext(os.path.basename(out))[0]
    ft = TensorProto.FLOAT16
    b = Builder(name, ft)
    L, H, F = spec["layers"], spec["hidden"], spec["ffn"]
    nh, nkv, V, ctx = spec["heads"], spec.get("kv_heads", spec["heads"]), spec["vocab"], spec.get("context", 4096)
    hd = H // nh
    eps = float(spec.get("norm_eps", 1e-5))
    q4 = weights == "q4"

    def rmsnorm(x, w, p):
        sq = b.op("Pow", [x, b.const(f"{p}/two", 2.0, ft)], f"{p}/Pow")
        mean = b.op("ReduceMean", [sq], f"{p}/ReduceMean", axes=[-1], keepdims=1)
        var = b.op("Add", [mean, b.const(f"{p}/eps", eps, ft)], f"{p}/Add")
        rms = b.op("Sqrt", [var], f"{p}/Sqrt")
        normed = b.op("Div", [x, rms], f"{p}/Div")
        return b.op("Mul", [b.weight(w, [H], ones=True), normed], f"{p}/Mul")

    def linear(x, wname, k, n, p):
        if not q4:
            return b.op("MatMul", [x, b.weight(wname, [k, n])], f"{p}/MatMul")
        blocks = k // 32
        return b.op("MatMulNBits", [x, b.weight(wname + ".qweight", [n, blocks, 16], TensorProto.UINT8),
                                    b.weight(wname + ".scales", [n * blocks])],
                    f"{p}/MatMulNBits", domain="com.microsoft", K=k, N=n, bits=4, block_size=32)

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", ft, ["batch_size", "sequence_length", V])]
    kv_shape = ["batch_size", nkv, "past_sequence_length", hd]
    present_shape = ["batch_size", nkv, "total_sequence_length", hd]
    for i in range(L):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", ft, kv_shape))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kind}", ft, present_shape))

    x = b.op("Gather", [b.weight("model.embed_tokens.weight", [V, H]), "input_ids"], "/model/embed_tokens/Gather")
    # The padding mask: (1 - mask) x -10000, [batch, 1, 1, total].
    m = b.op("Cast", ["attention_mask"], "/model/mask/Cast", to=ft)
    m = b.op("Sub", [b.const("/model/mask/one", 1.0, ft), m], "/model/mask/Sub")
    m = b.op("Mul", [m, b.const("/model/mask/min", -10000.0, ft)], "/model/mask/Mul")
    mask = b.op("Unsqueeze", [m, b.const("/model/mask/axes", [1, 2])], "/model/mask/Unsqueeze")
    # Rotary tables gathered once by position: [batch, 1, seq, head_dim].
    cos = b.op("Gather", [b.weight("model.rotary_emb.cos_cached", [ctx, hd]), "position_ids"], "/model/rotary/cos/Gather")
    sin = b.op("Gather", [b.weight("model.rotary_emb.sin_cached", [ctx, hd]), "position_ids"], "/model/rotary/sin/Gather")
    axis1 = b.const("/model/rotary/axis1", [1])
    cos = b.op("Unsqueeze", [cos, axis1], "/model/rotary/cos/Unsqueeze")
    sin = b.op("Unsqueeze", [sin, axis1], "/model/rotary/sin/Unsqueeze")
    heads_shape = b.const("/model/shape/heads", [0, 0, nh, hd])
    kv_heads_shape = b.const("/model/shape/kv_heads", [0, 0, nkv, hd])
    merged = b.const("/model/shape/hidden", [0, 0, H])
    rep_shape = b.const("/model/shape/rep", [0, nh, -1, hd])
    half_lo = b.const("/model/rotary/zero", [0])
    half_mid = b.const("/model/rotary/half", [hd // 2])
    half_hi = b.const("/model/rotary/end", [hd])
    last = b.const("/model/rotary/last", [-1])
    tiles = b.const("/model/gqa/tiles", [1, 1, nh // nkv, 1, 1])
    axis2 = b.const("/model/gqa/axis2", [2])
    scale = b.const("/model/attn/scale", float(np.sqrt(hd)), ft)

    def rope(t, p):
        x1 = b.op("Slice", [t, half_lo, half_mid, last], f"{p}/Slice")
        x2 = b.op("Slice", [t, half_mid, half_hi, last], f"{p}/Slice_1")
        rot = b.op("Concat", [b.op("Neg", [x2], f"{p}/Neg"), x1], f"{p}/Concat", axis=-1)
        return b.op("Add", [b.op("Mul", [t, cos], f"{p}/Mul"), b.op("Mul", [rot, sin], f"{p}/Mul_1")], f"{p}/Add")

    for i in range(L):
        p = f"/model/layers.{i}"
        h = rmsnorm(x, f"model.layers.{i}.input_layernorm.weight", f"{p}/input_layernorm")
        q = linear(h, f"model.layers.{i}.self_attn.q_proj.weight", H, H, f"{p}/self_attn/q_proj")
        k = linear(h, f"model.layers.{i}.self_attn.k_proj.weight", H, nkv * hd, f"{p}/self_attn/k_proj")
        v = linear(h, f"model.layers.{i}.self_attn.v_proj.weight", H, nkv * hd, f"{p}/self_attn/v_proj")
        q = b.op("Transpose", [b.op("Reshape", [q, heads_shape], f"{p}/self_attn/Reshape")], f"{p}/self_attn/Transpose",
                 perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [k, kv_heads_shape], f"{p}/self_attn/Reshape_1")],
                 f"{p}/self_attn/Transpose_1", perm=[0, 2, 1, 3])
        v = b.op("Transpose", [b.op("Reshape", [v, kv_heads_shape], f"{p}/self_attn/Reshape_2")],
                 f"{p}/self_attn/Transpose_2", perm=[0, 2, 1, 3])
        q = rope(q, f"{p}/self_attn/rotary_q")
        k = rope(k, f"{p}/self_attn/rotary_k")
        k = b.op("Concat", [f"past_key_values.{i}.key", k], f"{p}/self_attn/Concat_k", [f"present.{i}.key"], axis=2)
        v = b.op("Concat", [f"past_key_values.{i}.value", v], f"{p}/self_attn/Concat_v", [f"present.{i}.value"], axis=2)
        if nh != nkv:  # grouped-query attention: each KV head serves nh / nkv query heads
            k = b.op("Reshape", [b.op("Tile", [b.op("Unsqueeze", [k, axis2], f"{p}/self_attn/repeat_k/Unsqueeze"), tiles],
                                      f"{p}/self_attn/repeat_k/Tile"), rep_shape], f"{p}/self_attn/repeat_k/Reshape")
            v = b.op("Reshape", [b.op("Tile", [b.op("Unsqueeze", [v, axis2], f"{p}/self_attn/repeat_v/Unsqueeze"), tiles],
                                      f"{p}/self_attn/repeat_v/Tile"), rep_shape], f"{p}/self_attn/repeat_v/Reshape")
        kt = b.op("Transpose", [k], f"{p}/self_attn/Transpose_3", perm=[0, 1, 3, 2])
        s = b.op("Div", [b.op("MatMul", [q, kt], f"{p}/self_attn/MatMul"), scale], f"{p}/self_attn/Div")
        s = b.op("Add", [s, mask], f"{p}/self_attn/Add")
        a = b.op("MatMul", [b.op("Softmax", [s], f"{p}/self_attn/Softmax", axis=-1), v], f"{p}/self_attn/MatMul_1")
        a = b.op("Reshape", [b.op("Transpose", [a], f"{p}/self_attn/Transpose_4", perm=[0, 2, 1, 3]), merged],
                 f"{p}/self_attn/Reshape_3")
        o = linear(a, f"model.layers.{i}.self_attn.o_proj.weight", H, H, f"{p}/self_attn/o_proj")
        x = b.op("Add", [x, o], f"{p}/Add")
        h = rmsnorm(x, f"model.layers.{i}.post_attention_layernorm.weight", f"{p}/post_attention_layernorm")
        g = linear(h, f"model.layers.{i}.mlp.gate_proj.weight", H, F, f"{p}/mlp/gate_proj")
        u = linear(h, f"model.layers.{i}.mlp.up_proj.weight", H, F, f"{p}/mlp/up_proj")
        g = b.op("Mul", [g, b.op("Sigmoid", [g], f"{p}/mlp/act_fn/Sigmoid")], f"{p}/mlp/act_fn/Mul")
        d = linear(b.op("Mul", [g, u], f"{p}/mlp/Mul"), f"model.layers.{i}.mlp.down_proj.weight", F, H,
                   f"{p}/mlp/down_proj")
        x = b.op("Add", [x, d], f"{p}/Add_1")
    h = rmsnorm(x, "model.norm.weight", "/model/norm")
    b.op("MatMul", [h, b.weight("lm_head.weight", [H, V])], "/lm_head/MatMul", ["logits"])

    graph = helper.make_graph(b.nodes, name, inputs, outputs, b.inits)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.microsoft", 1)] if q4 else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="gpusim tools/export_llama_onnx.py")
    model.ir_version = 8
    for k, v in (("gpusim.shape_only", "1"),
                 ("gpusim.source", f"tools/export_llama_onnx.py from {spec.get('name', name)}: {L} layers, hidden {H}, "
                                   f"ffn {F}, {nh} heads ({nkv} KV), vocab {V}, fp16"
                                   + (", projections MatMulNBits 4-bit blocks of 32" if q4 else ""))):
        e = model.metadata_props.add()
        e.key, e.value = k, v
    onnx.save(model, out)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("spec", help="a gpusim.llm/1 description (models/llm/*.yaml) or a Hugging Face config.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--weights", choices=["f16", "q4"], default="f16")
    a = ap.parse_args()
    m = export(load_spec(a.spec), a.weights, a.out)
    print(f"{a.out}: {len(m.graph.node)} nodes, {len(m.graph.initializer)} initializers, "
          f"{os.path.getsize(a.out) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
