"""gpusim: predict how fast an ONNX graph runs on a GPU, search fusion and tiling plans, and run
them for real (CPU reference, Vulkan, CUDA, HIP).

The Python face of gpusim's C++ Session API (include/gpusim/gpusim.h). Every answer is a plain
Python object: the same JSON document that ``gpusim ... --json`` prints and ``gpusim serve``
answers, as dicts and lists. Run inputs and outputs are NumPy arrays. A failed call raises
:class:`gpusim.Error` with the library's message (naming the file, node or field, the value and the
fix) and its error code.

Example::

    import gpusim

    s = gpusim.Session()
    model = s.open_model("models/resnet50.onnx", dims={"batch": 8})
    p = s.predict(model, "nvidia-rtx-3060", dtype="fp16")
    print(p["total_us"] / 1e3, "ms")
    best = s.plan(model, "nvidia-rtx-3060", dtype="fp16")["plans"][0]
    print(best["speedup_vs_eager"], "x over eager")
"""


class Error(Exception):
    """A gpusim call failed for an expected reason (a bad file, an unknown GPU, a wrong buffer).

    ``str(err)`` and ``err.message`` are the library's message; ``err.code`` names the kind:
    io, parse, invalid_model, unsupported, shape, data_dependent, invalid_argument, unavailable,
    device, not_found, internal or limit.
    """

    def __init__(self, message, code="internal"):
        super().__init__(message)
        self.message = message
        self.code = code

    def __repr__(self):
        return f"gpusim.Error({self.message!r}, code={self.code!r})"


from ._gpusim import (  # noqa: E402  (Error must exist before the module raises it)
    Gpu,
    Model,
    Program,
    Session,
    content_hash,
    data_dir,
    read_tensor,
    version,
)

__version__ = version()
__all__ = ["Error", "Gpu", "Model", "Program", "Session", "content_hash", "data_dir", "read_tensor", "version", "__version__"]
