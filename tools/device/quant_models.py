#!/usr/bin/env python3
"""Write shape-only quantized ONNX models of a Llama-7B decode step's projections (no weight data:
gpusim fills what a model lacks from a seed), for `gpusim run --check` and timing on a lent GPU.

  MatMulNBits (com.microsoft), 4 bits in blocks of 32 with a scale each: Q4_0's arithmetic
  MatMulNBits, 8 bits in blocks of 32 (zero point 128): Q8_0's arithmetic
  QDQ int8: DequantizeLinear of an int8 [K, N] weight per output channel, then MatMul

Each at 1 row (a decode step) and 512 rows (a prompt), for the shapes N x K of q/k/v/o (4096 x
4096), gate/up (11008 x 4096) and down (4096 x 11008). Needs only the `onnx` package.

Usage: tools/device/quant_models.py OUTDIR
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008)]


def init(name, dtype, dims):
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    return t


def nbits(n, k, rows, bits, block=32):
    blocks = k // block
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows, k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("MatMulNBits", ["x", "w", "s"], ["y"], name="proj", domain="com.microsoft", K=k, N=n,
                            bits=bits, block_size=block)
    g = helper.make_graph([node], "nbits", [x], [y],
                          [init("w", TensorProto.UINT8, [n, blocks, block * bits // 8]),
                           init("s", TensorProto.FLOAT, [n * blocks])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])


def qdq(n, k, rows):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"], name="dq_w", axis=1),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")]
    g = helper.make_graph(nodes, "qdq", [x], [y],
                          [init("wq", TensorProto.INT8, [k, n]), init("ws", TensorProto.FLOAT, [n])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for n, k in SHAPES:
        for rows in (1, 512):
            for name, m in ((f"q4_0_{n}x{k}_m{rows}", nbits(n, k, rows, 4)), (f"q8_0_{n}x{k}_m{rows}", nbits(n, k, rows, 8)),
                            (f"int8_{n}x{k}_m{rows}", qdq(n, k, rows))):
                m.ir_version = 10
                onnx.save(m, os.path.join(out, name + ".onnx"))
                print(name)


if __name__ == "__main__":
    main()
