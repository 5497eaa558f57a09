"""gpusim from Python: predict a model on a GPU, search a fused plan, score it, and run the model
once on the CPU reference with NumPy arrays. The README's Python example; the python_example test
runs it.

    python3 examples/python/predict.py [MODEL.onnx] [GPU]
"""
import sys

import numpy as np

import gpusim

model_path = sys.argv[1] if len(sys.argv) > 1 else "models/mobilenet_v2.onnx"
gpu_id = sys.argv[2] if len(sys.argv) > 2 else "nvidia-rtx-3060"

s = gpusim.Session()  # profiles: $GPUSIM_PROFILE_PATH, ~/.config/gpusim/profiles, installed
model = s.open_model(model_path)  # dims={"batch": 1} for models with symbolic dims
gpu = s.gpu(gpu_id)

p = s.predict(model, gpu, dtype="fp16")  # the gpusim.predict/1 document, as a dict
print(f"eager    {p['total_us'] / 1e3:.3f} ms in {p['kernel_count']} kernels on {gpu.display_name}")

best = s.plan(model, gpu, dtype="fp16")["plans"][0]  # ranked plans, best first
print(f"planned  {best['total_us'] / 1e3:.3f} ms in {best['kernels']} kernels "
      f"({best['speedup_vs_eager']:.2f}x over eager)")
scored = s.predict(model, gpu, plan=best["plan"])  # a plan document goes back in as it came out
assert abs(scored["total_us"] - best["total_us"]) <= 1e-6 * best["total_us"]

program = s.compile(model, backend="cpu")  # or "vulkan", "cuda", "hip"
spec = program.inputs[0]
x = np.random.default_rng(0).standard_normal(spec["shape"]).astype(np.float32)
for name, y in program.run([x]).items():
    print(f"output   {name} {list(y.shape)} {y.dtype}, argmax {int(y.argmax())}")

try:
    s.gpu("nvidia-rtx-9090")
except gpusim.Error as e:  # the library's message and an error code
    print(f"error    [{e.code}] {e}")
