#!/usr/bin/env python3
# A ReLU chain of N nodes as an ONNX model (issue 56: a large graph under the size limits), written
# with protobuf's wire format by hand so that no onnx package is needed. Node names are left out
# and tensors are named in hex, so a million nodes fit in 22 MB.
#
#   python3 bench/serve_chain.py 1000000 /tmp/chain1m.onnx
import sys
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def field(num, wt, payload):
    key = varint((num << 3) | wt)
    if wt == 0: return key + varint(payload)
    return key + varint(len(payload)) + payload
def s(num, text): return field(num, 2, text.encode())
def value_info(name, dims):
    shape = b"".join(field(1, 2, field(1, 0, d)) for d in dims)
    tensor = field(1, 0, 1) + field(2, 2, shape)
    return s(1, name) + field(2, 2, field(1, 2, tensor))
n = int(sys.argv[1]); out = sys.argv[2]
nodes = bytearray()
for i in range(n):
    nodes += field(1, 2, s(1, f"{i:x}") + s(2, f"{i+1:x}") + s(4, "Relu"))
graph = bytes(nodes) + s(2, "chain") + field(11, 2, value_info("0", [1, 64])) + field(12, 2, value_info(f"{n:x}", [1, 64]))
model = field(1, 0, 8) + s(2, "gpusim-bench") + field(7, 2, graph) + field(8, 2, s(1, "") + field(2, 0, 17))
open(out, "wb").write(model)
