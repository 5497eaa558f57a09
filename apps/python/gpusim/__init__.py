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



def _param_names(fn):
    """The keyword names a pybind11 function takes, in order, read from its signature line(s)."""
    import re

    names = []
    for line in (getattr(fn, "__doc__", None) or "").splitlines():
        m = re.match(r"\s*(?:\d+\.\s*)?\w*\((.*)\)\s*->", line)
        if not m:
            continue
        for part in re.finditer(r"(?:^|,\s*)(\w+)\s*:", m.group(1)):
            if part.group(1) != "self" and part.group(1) not in names:
                names.append(part.group(1))
    return names


def _checked(qualname, fn):
    """fn, refusing a keyword it does not take with the closest it does ("did you mean"), where
    pybind11 would say only that the arguments are incompatible."""
    import difflib
    import functools

    names = _param_names(fn)
    if not names:
        return fn

    @functools.wraps(fn)
    def call(*args, **kwargs):
        for k in kwargs:
            if k not in names:
                close = difflib.get_close_matches(k, names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise TypeError(f"{qualname}() got an unexpected keyword argument {k!r}{hint} "
                                f"(it takes {', '.join(names)})")
        return fn(*args, **kwargs)

    return call


for _cls in (Session, Program, Model, Gpu):
    for _name, _fn in list(vars(_cls).items()):
        if not _name.startswith("_") and callable(_fn):
            setattr(_cls, _name, _checked(f"{_cls.__name__}.{_name}", _fn))
content_hash = _checked("content_hash", content_hash)
read_tensor = _checked("read_tensor", read_tensor)
data_dir = _checked("data_dir", data_dir)
del _cls, _name, _fn

__version__ = version()
__all__ = ["Error", "Gpu", "Model", "Program", "Session", "content_hash", "data_dir", "read_tensor", "version", "__version__"]
