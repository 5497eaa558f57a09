#!/usr/bin/env python3
"""Generate gpusim's bundled and test ONNX models in "shape-only" form.

Usage (from the repository root, inside the export venv):
    tools/setup-export-venv.sh                      # once: creates .venv-export
    .venv-export/bin/python tools/export_models.py --out models
    .venv-export/bin/python tools/export_models.py --extra --out tests/data/models
    .venv-export/bin/python tools/export_models.py --out models --only resnet50 bert_base_seq128
    .venv-export/bin/python tools/export_models.py --summary models/*.onnx   # inspect files
    .venv-export/bin/python tools/export_models.py --list

Shape-only format
    Every model is exported with torch.onnx.export (eval mode, opset 17 -- the highest
    torch 1.13 supports -- falling back to lower opsets only if 17 fails,
    do_constant_folding=True) into a temporary directory under /tmp. The result is then
    rewritten so that every initializer (including subgraphs') larger than 1024 bytes,
    and every Constant-node value larger than 16 MiB, is marked as external data
    (data_location=EXTERNAL, external_data = location "<model>.weights.bin", offset,
    length, as onnx.external_data_helper would write it, tensors laid out contiguously
    in file order) and its bytes are dropped. The .weights.bin file is never written
    (equivalently: it is deleted). Tensors <= 1024 bytes (shape constants, small biases)
    stay embedded, and so do Constant values up to 16 MiB (position ids, causal masks:
    `gpusim run` needs them; gpusim's reader keeps the same). The resulting .onnx is a valid model whose external weight file is
    deliberately absent; gpusim only needs shapes and attributes. Files carry
    metadata_props "gpusim.shape_only"="1" and "gpusim.source".

Reproducibility
    torch.manual_seed(0) before each model is built; random weights (no downloads, no
    hub access: HF / diffusers models are built from config objects written below).
    The weights are stripped anyway, so the graph only depends on the package versions.

Bundled set (--out models), input shapes:
    resnet50                   torchvision resnet50, input [1,3,224,224]
    mobilenet_v2               torchvision mobilenet_v2, input [1,3,224,224]
    vit_b_16                   torchvision vit_b_16, input [1,3,224,224]
    bert_base_seq128           transformers BertModel, bert-base-uncased config
                               (12 layers, hidden 768, 12 heads, ffn 3072, vocab 30522),
                               inputs input_ids, attention_mask int64 [batch,128];
                               outputs last_hidden_state, pooler_output
    gpt2_prefill_seq512        transformers GPT2LMHeadModel, gpt2 (124M) config,
                               input_ids int64 [batch,512], use_cache=False -> logits
    sd15_unet_64x64            diffusers UNet2DConditionModel, Stable Diffusion 1.5 UNet
                               config; sample f32 [batch,4,64,64], timestep f32 [batch],
                               encoder_hidden_states f32 [batch,77,768] -> [batch,4,64,64]
    sd15_vae_decoder_512       diffusers AutoencoderKL (SD 1.5 VAE config), decode path
                               only (post_quant_conv + decoder, no scaling factor):
                               latent [batch,4,64,64] -> image [batch,3,512,512]
    `batch` is a symbolic dimension (dim_param "batch") on the HF/diffusers models;
    torchvision models have a static batch of 1.

Test set (--extra --out tests/data/models):
    torchvision 0.14 classification models (see EXTRA_TORCHVISION below; batch 1,
    224x224 unless noted: inception_v3 299, efficientnet_v2_s 384), segmentation
    (fcn_resnet50, deeplabv3_mobilenet_v3_large with aux_loss=True as in their published
    weights, lraspp_mobilenet_v3_large; 520x520), video (r3d_18, mc3_18, r2plus1d_18
    at [1,3,16,112,112], s3d at [1,3,16,224,224]);
    opt125m_seq128             transformers OPTModel, facebook/opt-125m config,
                               input_ids + attention_mask int64 [batch,128], no cache;
    bert_base_seq128_opset21   bert_base_seq128 converted to opset 21 with
                               onnx.version_converter (onnx 1.17);
    opset21_mix                hand-built opset-21 graph (onnx.helper), input
                               [2,32,16,16]: Conv, GroupNormalization-21, Gelu-20,
                               Pad (axes input), Slice, Split (num_outputs), ReduceMean /
                               ReduceSum (axes input), Concat, Resize (scales), Reshape,
                               Transpose, LayerNormalization, MatMul, Softmax;
                               numerically checked with onnx.reference before stripping;
    published_macs.json        torchvision's published GMACs ("_ops" in the weights'
                               meta, shown as "GFLOPS" in torchvision's docs tables; they
                               count multiply-accumulates, e.g. resnet50 4.089) for each
                               exported torchvision model, copied from pytorch/vision
                               v0.15.2 torchvision/models/*.py (the first release with
                               "_ops"; Debian's 0.14.1 lacks the field).

Versions used (tools/requirements-export.txt, tools/setup-export-venv.sh):
    Debian 12 python3 3.11, python3-torch 1.13.1, python3-torchvision 0.14.1,
    python3-numpy 1.24.2, python3-protobuf 3.21.12; PyPI: transformers 4.38.2,
    diffusers 0.27.2, huggingface-hub 0.23.5, onnx 1.17.0 (shadows Debian's 1.12).

Memory: the SD UNet has ~860M fp32 parameters (~3.4 GB); torch writes >2 GB models
with per-tensor external files into the temporary directory, which this script reads
back without loading the weights. Tested on a 2-core / 24 GiB machine: the UNet takes
about 5 minutes, the whole bundled set about 8, the test set about 5.
"""

import argparse
import collections
import json
import os
import sys
import tempfile
import time
import traceback

# onnx 1.17's generated protobuf modules need the pure-Python protobuf runtime: Debian's
# python3-protobuf 3.21 defaults to its C++ one, under which `import onnx` fails
# ("cannot import name 'IR_VERSION_2021_7_30'").
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

SEED = 0
DEFAULT_OPSET = 17
FALLBACK_OPSETS = (16, 15, 14, 13)
SIZE_THRESHOLD = 1024  # bytes; larger tensors become (absent) external data
# A Constant node's value (position ids, a causal mask) stays embedded up to this size: running the
# model needs it, and gpusim's reader keeps node-attribute tensors up to the same size
# (kKeepConstantBytes in core/graph/onnx_wire.h).
CONSTANT_THRESHOLD = 16 << 20
TMP_ROOT = "/tmp"


# --------------------------------------------------------------------------------------
# Shape-only post-processing
# --------------------------------------------------------------------------------------

def _all_tensors(graph, with_kind=False):
    """Yield every TensorProto of a graph: initializers and node attribute tensors,
    recursing into subgraphs; with_kind: (tensor, is_node_attribute) pairs."""
    for t in graph.initializer:
        yield (t, False) if with_kind else t
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield (attr.t, True) if with_kind else attr.t
            for t in attr.tensors:
                yield (t, True) if with_kind else t
            if attr.HasField("g"):
                yield from _all_tensors(attr.g, with_kind)
            for g in attr.graphs:
                yield from _all_tensors(g, with_kind)


def _tensor_nbytes(t):
    if t.data_type in (TensorProto.STRING, TensorProto.UNDEFINED):
        return None
    if t.data_location == TensorProto.EXTERNAL:
        kv = {e.key: e.value for e in t.external_data}
        if "length" in kv:
            return int(kv["length"])
    itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    return int(np.prod(t.dims, dtype=np.int64)) * itemsize


def make_shape_only(model, base_dir, name, source, threshold=SIZE_THRESHOLD):
    """Rewrite `model` in place: initializers > threshold bytes (and node-attribute
    tensors > CONSTANT_THRESHOLD) become external references to the (never written)
    file <name>.weights.bin; tensors kept that torch stored externally are loaded back
    from base_dir and embedded."""
    location = f"{name}.weights.bin"
    offset = 0
    n_ext = 0
    for t, is_attr in _all_tensors(model.graph, with_kind=True):
        nbytes = _tensor_nbytes(t)
        if nbytes is None:
            continue
        is_ext = t.data_location == TensorProto.EXTERNAL
        if nbytes <= (CONSTANT_THRESHOLD if is_attr else threshold):
            if is_ext:
                onnx.external_data_helper.load_external_data_for_tensor(t, base_dir)
                t.data_location = TensorProto.DEFAULT
                del t.external_data[:]
            continue
        if not is_ext and not t.HasField("raw_data"):
            # typed storage (float_data, int64_data, ...): drop it
            for field in ("float_data", "int32_data", "int64_data", "double_data",
                          "uint64_data"):
                t.ClearField(field)
        t.ClearField("raw_data")
        del t.external_data[:]
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)),
                     ("length", str(nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        offset += nbytes
        n_ext += 1
    del model.metadata_props[:]
    for k, v in (("gpusim.shape_only", "1"),
                 ("gpusim.source", source),
                 ("gpusim.external_weight_bytes", str(offset)),
                 ("gpusim.exporter", "tools/export_models.py")):
        p = model.metadata_props.add()
        p.key, p.value = k, v
    return n_ext, offset


def check_shape_only(model, name, nbytes):
    """onnx.checker on the saved model next to a sparse placeholder weights file of the
    right size (the checker insists that external data files exist)."""
    with tempfile.TemporaryDirectory(prefix="gpusim-check-", dir=TMP_ROOT) as td:
        path = os.path.join(td, name + ".onnx")
        onnx.save(model, path)
        with open(os.path.join(td, name + ".weights.bin"), "wb") as f:
            f.truncate(nbytes)  # sparse: no disk blocks
        onnx.checker.check_model(path)


def finalize(model, base_dir, name, source, out_dir):
    n_ext, nbytes = make_shape_only(model, base_dir, name, source)
    check_shape_only(model, name, nbytes)
    path = os.path.join(out_dir, name + ".onnx")
    onnx.save(model, path)
    stale = os.path.join(out_dir, name + ".weights.bin")
    if os.path.exists(stale):
        os.remove(stale)
    print(f"  wrote {path}: {os.path.getsize(path)} bytes, {n_ext} external tensors "
          f"({nbytes / 2**20:.1f} MiB stripped)", flush=True)
    return path


def fix_output_dims(model):
    """torch names output dims it could not infer (e.g. 'LayerNormalizationlast_hidden_
    state_dim_1'); resolve them by shape propagation at batch 1 and 2: dims equal in
    both become static values, dims equal to the batch become 'batch'."""
    if not any(d.dim_param for vi in model.graph.output
               for d in vi.type.tensor_type.shape.dim):
        return
    r1, _ = propagate_shapes(model, 1)
    r2, _ = propagate_shapes(model, 2)
    for vi in model.graph.output:
        if vi.name not in r1 or vi.name not in r2:
            continue
        d1, d2 = r1[vi.name][1], r2[vi.name][1]
        dims = vi.type.tensor_type.shape.dim
        if len(d1) != len(dims) or len(d2) != len(dims):
            continue
        for d, a, b in zip(dims, d1, d2):
            if a == b:
                d.dim_value = a  # clears dim_param (oneof)
            elif (a, b) == (1, 2):
                d.dim_param = "batch"


def export_torch(name, module, args, input_names, output_names, dynamic_axes,
                 out_dir, source, opset=DEFAULT_OPSET):
    import torch
    module.eval()
    last_err = None
    for op in (opset,) + tuple(o for o in FALLBACK_OPSETS if o < opset):
        with tempfile.TemporaryDirectory(prefix=f"gpusim-export-{name}-",
                                         dir=TMP_ROOT) as td:
            tmp = os.path.join(td, name + ".onnx")
            try:
                t0 = time.time()
                torch.onnx.export(module, args, tmp, opset_version=op,
                                  do_constant_folding=True,
                                  training=torch.onnx.TrainingMode.EVAL,
                                  input_names=input_names, output_names=output_names,
                                  dynamic_axes=dynamic_axes or None)
                print(f"  exported {name} at opset {op} in {time.time() - t0:.0f}s",
                      flush=True)
            except Exception as err:  # noqa: BLE001 - try the next opset
                last_err = err
                print(f"  opset {op} export failed: {type(err).__name__}: "
                      f"{str(err).splitlines()[0] if str(err) else ''}", flush=True)
                continue
            model = onnx.load(tmp, load_external_data=False)
            fix_output_dims(model)
            return finalize(model, td, name, source, out_dir)
    raise RuntimeError(f"{name}: export failed at all opsets") from last_err


# --------------------------------------------------------------------------------------
# Model builders: each returns (module, args, input_names, output_names, dynamic_axes,
# source-description)
# --------------------------------------------------------------------------------------

def _tv(fn_name, shape, video=False, seg=False, **kw):
    def build():
        import torch
        import torchvision
        mod = torchvision.models.video if video else (
            torchvision.models.segmentation if seg else torchvision.models)
        net = getattr(mod, fn_name)(weights=None, **kw)
        if seg:
            net = _SegWrapper(net)
        x = torch.randn(*shape)
        outs = ["out", "aux"] if seg and kw.get("aux_loss") else ["logits" if not seg else "out"]
        desc = f"torchvision {torchvision.__version__} {fn_name}({', '.join(f'{k}={v}' for k, v in kw.items())}) input {list(shape)}"
        return net, (x,), ["input"], outs, None, desc
    return build


def _seg_wrapper_cls():
    import torch

    class SegWrapper(torch.nn.Module):
        """Returns the dict outputs of torchvision segmentation models as a tuple."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            d = self.net(x)
            return tuple(d[k] for k in ("out", "aux") if k in d)
    return SegWrapper


def _SegWrapper(net):
    return _seg_wrapper_cls()(net)


def build_bert():
    import torch
    import transformers
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                     num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                     max_position_embeddings=512, type_vocab_size=2,
                     attn_implementation="eager", return_dict=False)
    net = BertModel(cfg)
    ids = torch.randint(0, cfg.vocab_size, (1, 128), dtype=torch.int64)
    mask = torch.ones(1, 128, dtype=torch.int64)
    dyn = {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"},
           "last_hidden_state": {0: "batch"}, "pooler_output": {0: "batch"}}
    return (net, (ids, {"attention_mask": mask}), ["input_ids", "attention_mask"],
            ["last_hidden_state", "pooler_output"], dyn,
            f"transformers {transformers.__version__} BertModel(bert-base config, random "
            f"weights) input_ids/attention_mask [batch,128]")


def _gpt2_wrapper_cls():
    import torch

    class GPT2Logits(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, input_ids):
            return self.net(input_ids=input_ids, use_cache=False, return_dict=False)[0]
    return GPT2Logits


def build_gpt2():
    import torch
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12,
                     n_head=12, activation_function="gelu_new", use_cache=False,
                     attn_implementation="eager")
    net = _gpt2_wrapper_cls()(GPT2LMHeadModel(cfg))
    ids = torch.randint(0, cfg.vocab_size, (1, 512), dtype=torch.int64)
    dyn = {"input_ids": {0: "batch"}, "logits": {0: "batch"}}
    return (net, (ids,), ["input_ids"], ["logits"], dyn,
            f"transformers {transformers.__version__} GPT2LMHeadModel(gpt2 124M config, "
            f"random weights, use_cache=False) input_ids [batch,512]")


def _opt_wrapper_cls():
    import torch

    class OPTHidden(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, input_ids, attention_mask):
            return self.net(input_ids=input_ids, attention_mask=attention_mask,
                            use_cache=False, return_dict=False)[0]
    return OPTHidden


def build_opt():
    import torch
    import transformers
    from transformers import OPTConfig, OPTModel
    # facebook/opt-125m config
    cfg = OPTConfig(vocab_size=50272, hidden_size=768, num_hidden_layers=12,
                    ffn_dim=3072, num_attention_heads=12, max_position_embeddings=2048,
                    word_embed_proj_dim=768, do_layer_norm_before=True,
                    activation_function="relu", use_cache=False,
                    attn_implementation="eager")
    net = _opt_wrapper_cls()(OPTModel(cfg))
    ids = torch.randint(0, cfg.vocab_size, (1, 128), dtype=torch.int64)
    mask = torch.ones(1, 128, dtype=torch.int64)
    dyn = {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"},
           "last_hidden_state": {0: "batch"}}
    return (net, (ids, mask), ["input_ids", "attention_mask"], ["last_hidden_state"], dyn,
            f"transformers {transformers.__version__} OPTModel(opt-125m config, random "
            f"weights, use_cache=False) input_ids/attention_mask [batch,128]")


# Stable Diffusion 1.5 (runwayml/stable-diffusion-v1-5) unet/config.json
SD15_UNET_CONFIG = dict(
    sample_size=64,
    in_channels=4,
    out_channels=4,
    center_input_sample=False,
    flip_sin_to_cos=True,
    freq_shift=0,
    down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                      "CrossAttnDownBlock2D", "DownBlock2D"),
    mid_block_type="UNetMidBlock2DCrossAttn",
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                    "CrossAttnUpBlock2D"),
    only_cross_attention=False,
    block_out_channels=(320, 640, 1280, 1280),
    layers_per_block=2,
    downsample_padding=1,
    mid_block_scale_factor=1,
    act_fn="silu",
    norm_num_groups=32,
    norm_eps=1e-5,
    cross_attention_dim=768,
    attention_head_dim=8,
    use_linear_projection=False,
)

# Stable Diffusion 1.5 vae/config.json
SD15_VAE_CONFIG = dict(
    in_channels=3,
    out_channels=3,
    down_block_types=("DownEncoderBlock2D",) * 4,
    up_block_types=("UpDecoderBlock2D",) * 4,
    block_out_channels=(128, 256, 512, 512),
    layers_per_block=2,
    act_fn="silu",
    latent_channels=4,
    norm_num_groups=32,
    sample_size=512,
    scaling_factor=0.18215,
)


def _unet_wrapper_cls():
    import torch

    class UNetWrapper(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, sample, timestep, encoder_hidden_states):
            return self.net(sample, timestep, encoder_hidden_states,
                            return_dict=False)[0]
    return UNetWrapper


def _vae_decoder_cls():
    import torch

    class VAEDecoder(torch.nn.Module):
        """vae.decode(): post_quant_conv + decoder (latent -> image)."""

        def __init__(self, vae):
            super().__init__()
            self.vae = vae

        def forward(self, latent):
            return self.vae.decode(latent, return_dict=False)[0]
    return VAEDecoder


def build_sd15_unet():
    import torch
    import diffusers
    from diffusers import UNet2DConditionModel
    net = _unet_wrapper_cls()(UNet2DConditionModel(**SD15_UNET_CONFIG))
    sample = torch.randn(1, 4, 64, 64)
    timestep = torch.tensor([999.0])
    ehs = torch.randn(1, 77, 768)
    dyn = {"sample": {0: "batch"}, "timestep": {0: "batch"},
           "encoder_hidden_states": {0: "batch"}, "out_sample": {0: "batch"}}
    return (net, (sample, timestep, ehs), ["sample", "timestep", "encoder_hidden_states"],
            ["out_sample"], dyn,
            f"diffusers {diffusers.__version__} UNet2DConditionModel(SD-1.5 config, random "
            f"weights) sample [batch,4,64,64] timestep [batch] encoder_hidden_states "
            f"[batch,77,768]")


def build_sd15_vae_decoder():
    import torch
    import diffusers
    from diffusers import AutoencoderKL
    net = _vae_decoder_cls()(AutoencoderKL(**SD15_VAE_CONFIG))
    latent = torch.randn(1, 4, 64, 64)
    dyn = {"latent": {0: "batch"}, "image": {0: "batch"}}
    return (net, (latent,), ["latent"], ["image"], dyn,
            f"diffusers {diffusers.__version__} AutoencoderKL(SD-1.5 VAE config, random "
            f"weights).decode latent [batch,4,64,64] -> image [batch,3,512,512]")


BUNDLED = collections.OrderedDict([
    ("resnet50", _tv("resnet50", (1, 3, 224, 224))),
    ("mobilenet_v2", _tv("mobilenet_v2", (1, 3, 224, 224))),
    ("vit_b_16", _tv("vit_b_16", (1, 3, 224, 224))),
    ("bert_base_seq128", build_bert),
    ("gpt2_prefill_seq512", build_gpt2),
    ("sd15_unet_64x64", build_sd15_unet),
    ("sd15_vae_decoder_512", build_sd15_vae_decoder),
])

IMG224 = (1, 3, 224, 224)
VID112 = (1, 3, 16, 112, 112)
EXTRA_TORCHVISION = collections.OrderedDict([
    ("convnext_tiny", _tv("convnext_tiny", IMG224)),
    ("efficientnet_b0", _tv("efficientnet_b0", IMG224)),
    ("alexnet", _tv("alexnet", IMG224)),
    ("vgg16", _tv("vgg16", IMG224)),
    ("googlenet", _tv("googlenet", IMG224, aux_logits=False, init_weights=True)),
    ("inception_v3", _tv("inception_v3", (1, 3, 299, 299), aux_logits=False,
                         init_weights=True)),
    ("densenet121", _tv("densenet121", IMG224)),
    ("squeezenet1_0", _tv("squeezenet1_0", IMG224)),
    ("shufflenet_v2_x1_0", _tv("shufflenet_v2_x1_0", IMG224)),
    ("mnasnet1_0", _tv("mnasnet1_0", IMG224)),
    ("mobilenet_v3_large", _tv("mobilenet_v3_large", IMG224)),
    ("regnet_y_400mf", _tv("regnet_y_400mf", IMG224)),
    ("resnet18", _tv("resnet18", IMG224)),
    ("resnext50_32x4d", _tv("resnext50_32x4d", IMG224)),
    ("wide_resnet50_2", _tv("wide_resnet50_2", IMG224)),
    ("efficientnet_v2_s", _tv("efficientnet_v2_s", (1, 3, 384, 384))),
    ("swin_t", _tv("swin_t", IMG224)),
    ("maxvit_t", _tv("maxvit_t", IMG224)),
    ("vit_b_32", _tv("vit_b_32", IMG224)),
    ("fcn_resnet50", _tv("fcn_resnet50", (1, 3, 520, 520), seg=True, aux_loss=True,
                         weights_backbone=None)),
    ("deeplabv3_mobilenet_v3_large", _tv("deeplabv3_mobilenet_v3_large",
                                         (1, 3, 520, 520), seg=True, aux_loss=True,
                                         weights_backbone=None)),
    ("lraspp_mobilenet_v3_large", _tv("lraspp_mobilenet_v3_large", (1, 3, 520, 520),
                                      seg=True, weights_backbone=None)),
    ("r3d_18", _tv("r3d_18", VID112, video=True)),
    ("mc3_18", _tv("mc3_18", VID112, video=True)),
    ("r2plus1d_18", _tv("r2plus1d_18", VID112, video=True)),
    ("s3d", _tv("s3d", (1, 3, 16, 224, 224), video=True)),
])

EXTRA_OTHER = collections.OrderedDict([
    ("opt125m_seq128", build_opt),
])

# torchvision's published figures: meta["_ops"] of the named weights in pytorch/vision
# v0.15.2 (torchvision/models/<file>), read from the release's source. Values are
# GMACs (torchvision's docs tables label the column "GFLOPS"). Resolution = the one the
# figure applies to (the weights' crop / resize size, or clip shape for video).
TV_SRC = "pytorch/vision v0.15.2"
PUBLISHED_OPS = collections.OrderedDict([
    # name: (gmacs, weights enum, file, input shape)
    ("resnet50", (4.089, "ResNet50_Weights.IMAGENET1K_V1", "resnet.py", IMG224)),
    ("mobilenet_v2", (0.301, "MobileNet_V2_Weights.IMAGENET1K_V1", "mobilenetv2.py", IMG224)),
    ("vit_b_16", (17.564, "ViT_B_16_Weights.IMAGENET1K_V1", "vision_transformer.py", IMG224)),
    ("convnext_tiny", (4.456, "ConvNeXt_Tiny_Weights.IMAGENET1K_V1", "convnext.py", IMG224)),
    ("efficientnet_b0", (0.386, "EfficientNet_B0_Weights.IMAGENET1K_V1", "efficientnet.py", IMG224)),
    ("alexnet", (0.714, "AlexNet_Weights.IMAGENET1K_V1", "alexnet.py", IMG224)),
    ("vgg16", (15.47, "VGG16_Weights.IMAGENET1K_V1", "vgg.py", IMG224)),
    ("googlenet", (1.498, "GoogLeNet_Weights.IMAGENET1K_V1", "googlenet.py", IMG224)),
    ("inception_v3", (5.713, "Inception_V3_Weights.IMAGENET1K_V1", "inception.py", (1, 3, 299, 299))),
    ("densenet121", (2.834, "DenseNet121_Weights.IMAGENET1K_V1", "densenet.py", IMG224)),
    ("squeezenet1_0", (0.819, "SqueezeNet1_0_Weights.IMAGENET1K_V1", "squeezenet.py", IMG224)),
    ("shufflenet_v2_x1_0", (0.145, "ShuffleNet_V2_X1_0_Weights.IMAGENET1K_V1", "shufflenetv2.py", IMG224)),
    ("mnasnet1_0", (0.314, "MNASNet1_0_Weights.IMAGENET1K_V1", "mnasnet.py", IMG224)),
    ("mobilenet_v3_large", (0.217, "MobileNet_V3_Large_Weights.IMAGENET1K_V1", "mobilenetv3.py", IMG224)),
    ("regnet_y_400mf", (0.402, "RegNet_Y_400MF_Weights.IMAGENET1K_V1", "regnet.py", IMG224)),
    ("resnet18", (1.814, "ResNet18_Weights.IMAGENET1K_V1", "resnet.py", IMG224)),
    ("resnext50_32x4d", (4.23, "ResNeXt50_32X4D_Weights.IMAGENET1K_V1", "resnet.py", IMG224)),
    ("wide_resnet50_2", (11.398, "Wide_ResNet50_2_Weights.IMAGENET1K_V1", "resnet.py", IMG224)),
    ("efficientnet_v2_s", (8.366, "EfficientNet_V2_S_Weights.IMAGENET1K_V1", "efficientnet.py", (1, 3, 384, 384))),
    ("swin_t", (4.491, "Swin_T_Weights.IMAGENET1K_V1", "swin_transformer.py", IMG224)),
    ("maxvit_t", (5.558, "MaxVit_T_Weights.IMAGENET1K_V1", "maxvit.py", IMG224)),
    ("vit_b_32", (4.409, "ViT_B_32_Weights.IMAGENET1K_V1", "vision_transformer.py", IMG224)),
    ("fcn_resnet50", (152.717, "FCN_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1", "segmentation/fcn.py", (1, 3, 520, 520))),
    ("deeplabv3_mobilenet_v3_large", (10.452, "DeepLabV3_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1", "segmentation/deeplabv3.py", (1, 3, 520, 520))),
    ("lraspp_mobilenet_v3_large", (2.086, "LRASPP_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1", "segmentation/lraspp.py", (1, 3, 520, 520))),
    ("r3d_18", (40.697, "R3D_18_Weights.KINETICS400_V1", "video/resnet.py", VID112)),
    ("mc3_18", (43.343, "MC3_18_Weights.KINETICS400_V1", "video/resnet.py", VID112)),
    ("r2plus1d_18", (40.519, "R2Plus1D_18_Weights.KINETICS400_V1", "video/resnet.py", VID112)),
    ("s3d", (17.979, "S3D_Weights.KINETICS400_V1", "video/s3d.py", (1, 3, 16, 224, 224))),
])


def write_published_macs(out_dir, exported, bundled_dir):
    entries = collections.OrderedDict()
    for name, (gmacs, weights, fname, shape) in PUBLISHED_OPS.items():
        if name in exported:
            model_file = name + ".onnx"
        elif bundled_dir and os.path.exists(os.path.join(bundled_dir, name + ".onnx")):
            model_file = os.path.relpath(os.path.join(bundled_dir, name + ".onnx"), out_dir)
        else:
            continue
        entries[name] = collections.OrderedDict([
            ("model", model_file),
            ("gmacs", gmacs),
            ("input_shape", list(shape)),
            ("resolution", list(shape[-2:])),
            ("source", f"{TV_SRC} torchvision/models/{fname}: {weights} "
                       f"meta['_ops'] (docs column 'GFLOPS')"),
        ])
    doc = collections.OrderedDict([
        ("description", "torchvision's published per-model compute (GMACs, the '_ops' "
                        "weight metadata; torchvision's docs label it GFLOPS) for the "
                        "shape-only models exported by tools/export_models.py"),
        ("torchvision_source", f"{TV_SRC} (field '_ops' first appears in 0.15; models "
                               f"exported with Debian torchvision 0.14.1)"),
        ("models", entries),
    ])
    path = os.path.join(out_dir, "published_macs.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"  wrote {path}: {len(entries)} models", flush=True)


# --------------------------------------------------------------------------------------
# Opset-21 test models
# --------------------------------------------------------------------------------------

def convert_to_opset21(src_path, out_dir, name):
    """version_converter on a shape-only model (external references are kept)."""
    from onnx import version_converter
    model = onnx.load(src_path, load_external_data=False)
    conv = version_converter.convert_version(model, 21)
    # the converter keeps the source IR version (8); opset 21 belongs to IR 10
    conv.ir_version = max(conv.ir_version, helper.find_min_ir_version_for(
        list(conv.opset_import)))
    src = f"onnx {onnx.__version__} version_converter(opset 21) of {os.path.basename(src_path)}"
    # re-run the stripping so offsets/locations refer to this model's name
    with tempfile.TemporaryDirectory(prefix="gpusim-opset21-", dir=TMP_ROOT) as td:
        return finalize(conv, td, name, src, out_dir)


def build_opset21_mix(N=2, C=32, H=16, W=16):
    """Hand-built opset-21 graph using opset 18-21 operator forms. Returns a model with
    real (random) weights; the caller checks a small instance numerically (onnx.reference
    Resize is very slow), then strips the full-size one."""
    rng = np.random.default_rng(SEED)

    def init(name, arr):
        return numpy_helper.from_array(np.asarray(arr), name)

    def i64(name, vals):
        return init(name, np.array(vals, dtype=np.int64))

    f32 = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.1  # noqa: E731
    inits = [
        init("conv_w", f32(C, C, 3, 3)), init("conv_b", f32(C)),
        init("gn_scale", np.ones(C, np.float32)), init("gn_bias", np.zeros(C, np.float32)),
        i64("pad_pads", [1, 1, 1, 1]), i64("pad_axes", [2, 3]),
        i64("slice_starts", [1, 1]), i64("slice_ends", [H + 1, W + 1]),
        i64("slice_axes", [2, 3]),
        i64("rmean_axes", [2, 3]), i64("rsum_axes", [1]),
        init("resize_scales", np.array([1, 1, 2, 2], np.float32)),
        i64("reshape_shape", [N, C, -1]),
        init("ln_scale", np.ones(C, np.float32)), init("ln_bias", np.zeros(C, np.float32)),
        init("proj_w", f32(C, 10)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["conv"], pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("GroupNormalization", ["conv", "gn_scale", "gn_bias"], ["gn"],
                         num_groups=8, epsilon=1e-5),
        helper.make_node("Gelu", ["gn"], ["gelu"], approximate="tanh"),
        helper.make_node("Pad", ["gelu", "pad_pads", "", "pad_axes"], ["pad"],
                         mode="constant"),
        helper.make_node("Slice", ["pad", "slice_starts", "slice_ends", "slice_axes"],
                         ["slice"]),
        helper.make_node("Split", ["slice"], ["sa", "sb"], axis=1, num_outputs=2),
        helper.make_node("ReduceMean", ["sa", "rmean_axes"], ["rmean"], keepdims=1),
        helper.make_node("ReduceSum", ["sb", "rsum_axes"], ["rsum"], keepdims=1),
        helper.make_node("Add", ["sa", "rmean"], ["a2"]),
        helper.make_node("Mul", ["sb", "rsum"], ["b2"]),
        helper.make_node("Concat", ["a2", "b2"], ["cat"], axis=1),
        helper.make_node("Resize", ["cat", "", "resize_scales"], ["up"], mode="nearest"),
        helper.make_node("Reshape", ["up", "reshape_shape"], ["flat"]),
        helper.make_node("Transpose", ["flat"], ["tok"], perm=[0, 2, 1]),
        helper.make_node("LayerNormalization", ["tok", "ln_scale", "ln_bias"], ["ln"],
                         axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["ln", "proj_w"], ["proj"]),
        helper.make_node("Softmax", ["proj"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "opset21_mix",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, 4 * H * W, 10])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                              producer_name="gpusim tools/export_models.py")
    onnx.checker.check_model(model, full_check=True)
    return model


def export_opset21_mix(out_dir):
    from onnx.reference import ReferenceEvaluator
    small = build_opset21_mix(1, 16, 4, 4)
    x = np.random.default_rng(SEED + 1).standard_normal((1, 16, 4, 4)).astype(np.float32)
    (y,) = ReferenceEvaluator(small).run(None, {"x": x})
    assert y.shape == (1, 64, 10) and np.allclose(y.sum(-1), 1, atol=1e-5), y.shape
    print(f"  opset21_mix: reference run of a [1,16,4,4] instance ok, y {y.shape}",
          flush=True)
    model = build_opset21_mix()
    # onnx 1.17 has no type/shape inference for GroupNormalization-21 (a function op),
    # so onnx.shape_inference stops there; propagate_shapes falls back to identity.
    info, unresolved = propagate_shapes(model)
    assert info["y"][1] == [2, 1024, 10] and not unresolved, (info.get("y"), unresolved)
    with tempfile.TemporaryDirectory(prefix="gpusim-mix-", dir=TMP_ROOT) as td:
        return finalize(model, td, "opset21_mix",
                        f"hand-built with onnx {onnx.__version__} helper (opset 21)", out_dir)


# --------------------------------------------------------------------------------------
# Summary / checks
# --------------------------------------------------------------------------------------

def _dims(vi):
    t = vi.type.tensor_type
    return [d.dim_param if d.dim_param else (d.dim_value if d.HasField("dim_value") else "?")
            for d in t.shape.dim]


SAME_SHAPE_OPS = {"GroupNormalization", "LayerNormalization", "Gelu", "Relu", "Sigmoid",
                  "Tanh", "Erf", "Softmax", "InstanceNormalization", "Identity"}


def propagate_shapes(model, batch=1):
    """Node-by-node shape propagation with constant folding of small tensors (shape
    arithmetic), after setting symbolic input dims to `batch`. onnx's own
    infer_shapes(data_prop=True) gives up on torch's Shape->Gather->Unsqueeze->Concat
    chains; this evaluates them with onnx.reference. Returns {name: (elem_type, dims)}
    and the number of nodes whose outputs could not be resolved."""
    from onnx.reference import ReferenceEvaluator
    g = model.graph
    info, consts = {}, {}
    for t in g.initializer:
        info[t.name] = (t.data_type, list(t.dims))
        if t.data_location != TensorProto.EXTERNAL:
            consts[t.name] = numpy_helper.to_array(t)
    for vi in g.input:
        if vi.name in info:
            continue
        tt = vi.type.tensor_type
        info[vi.name] = (tt.elem_type, [batch if d.dim_param else d.dim_value
                                        for d in tt.shape.dim])
    unresolved = 0
    for node in g.node:
        ins = [i for i in node.input if i]
        if any(i not in info for i in ins):
            unresolved += 1
            continue
        if node.op_type == "Shape" and not node.attribute:
            consts[node.output[0]] = np.array(info[ins[0]][1], dtype=np.int64)
            info[node.output[0]] = (TensorProto.INT64, [len(info[ins[0]][1])])
            continue
        inits, vis = [], []
        for i in ins:
            if i in consts:
                inits.append(numpy_helper.from_array(consts[i], i))
            else:
                vis.append(helper.make_tensor_value_info(i, *info[i]))
        mini = helper.make_model(
            helper.make_graph([node], "n", vis, [helper.make_value_info(o, onnx.TypeProto())
                                                 for o in node.output if o],
                              initializer=inits),
            opset_imports=model.opset_import, ir_version=model.ir_version)
        all_const = all(i in consts for i in ins)
        small = all(consts[i].size <= 1 << 16 for i in ins) if all_const else False
        if all_const and small and node.op_type not in ("RandomNormal", "RandomUniform"):
            try:
                outs = ReferenceEvaluator(mini).run(None, {})
                for o, v in zip(node.output, outs):
                    v = np.asarray(v)
                    info[o] = (helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
                    if v.size <= 1 << 16:
                        consts[o] = v
                continue
            except Exception:  # noqa: BLE001 - fall back to shape inference
                pass
        try:
            inf = onnx.shape_inference.infer_shapes(mini, strict_mode=False)
        except Exception:  # noqa: BLE001
            unresolved += 1
            continue
        ok = True
        outs = {vi.name: vi for vi in inf.graph.output}
        if node.op_type in SAME_SHAPE_OPS and node.output[0] in outs and \
                not outs[node.output[0]].type.tensor_type.HasField("shape"):
            info[node.output[0]] = info[ins[0]]  # e.g. GroupNormalization-21
            continue
        for vi in inf.graph.output:
            tt = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
            if not tt.HasField("shape") or any(d is None for d in dims):
                ok = False
                continue
            info[vi.name] = (tt.elem_type, dims)
        unresolved += 0 if ok else 1
    return info, unresolved


def count_macs(model, batch=1):
    """MACs of Conv/ConvTranspose/Gemm/MatMul/Einsum with symbolic dims set to `batch`.
    Returns (macs, nodes whose MACs could not be computed)."""
    info, _ = propagate_shapes(model, batch)
    shp = lambda n: info[n][1]  # noqa: E731
    macs, unresolved = 0, 0
    for n in model.graph.node:
        try:
            if n.op_type == "Conv":
                macs += int(np.prod(shp(n.output[0]), dtype=np.int64)) * \
                    int(np.prod(shp(n.input[1])[1:], dtype=np.int64))
            elif n.op_type == "ConvTranspose":
                macs += int(np.prod(shp(n.input[0]), dtype=np.int64)) * \
                    int(np.prod(shp(n.input[1])[1:], dtype=np.int64))
            elif n.op_type in ("MatMul", "Gemm"):
                a = shp(n.input[0])
                trans_a = any(at.name == "transA" and at.i for at in n.attribute)
                k = a[-2] if trans_a else a[-1]
                macs += int(np.prod(shp(n.output[0]), dtype=np.int64)) * k
            elif n.op_type == "Einsum" and len(n.input) == 2:
                eq = next(at.s.decode() for at in n.attribute if at.name == "equation")
                lhs = eq.replace(" ", "").split("->")[0].split(",")
                sizes = {}
                for term, name in zip(lhs, n.input):
                    sizes.update(zip(term, shp(name)))  # no '...' in these models
                macs += int(np.prod(list(sizes.values()), dtype=np.int64))
        except KeyError:
            unresolved += 1
    return macs, unresolved


def summarize(path, macs=False):
    model = onnx.load(path, load_external_data=False)
    g = model.graph
    opset = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    hist = collections.Counter(n.op_type for n in g.node)
    init_names = {t.name for t in g.initializer}
    ins = [(i.name, _dims(i)) for i in g.input if i.name not in init_names]
    outs = [(o.name, _dims(o)) for o in g.output]
    n_ext = sum(1 for t in _all_tensors(g) if t.data_location == TensorProto.EXTERNAL)
    info = collections.OrderedDict(
        file=path, bytes=os.path.getsize(path), nodes=len(g.node), opset=opset,
        ir_version=model.ir_version, inputs=ins, outputs=outs, external_tensors=n_ext,
        ops=dict(sorted(hist.items(), key=lambda kv: -kv[1])))
    if macs:
        m, unres = count_macs(model)
        info["gmacs_conv_matmul"] = round(m / 1e9, 3)
        info["unresolved_mac_nodes"] = unres
    return info


# --------------------------------------------------------------------------------------

def run_set(builders, out_dir, only, failures):
    import torch
    done = []
    for name, build in builders.items():
        if only and name not in only:
            continue
        print(f"[{name}]", flush=True)
        t0 = time.time()
        try:
            torch.manual_seed(SEED)
            np.random.seed(SEED)
            module, args, ins, outs, dyn, desc = build()
            export_torch(name, module, args, ins, outs, dyn, out_dir, desc)
            done.append(name)
        except Exception as err:  # noqa: BLE001 - report and continue
            msg = f"{type(err).__name__}: {err}"
            if err.__cause__ is not None:
                msg += f" <- {type(err.__cause__).__name__}: {err.__cause__}"
            failures[name] = msg.splitlines()[0][:300]
            traceback.print_exc()
        finally:
            module = args = None
            import gc
            gc.collect()
        print(f"  ({time.time() - t0:.0f}s)", flush=True)
    return done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="output directory (models or "
                    "tests/data/models)")
    ap.add_argument("--extra", action="store_true", help="export the test set instead of "
                    "the bundled set")
    ap.add_argument("--bundled-dir", default=None, help="with --extra: directory holding "
                    "the bundled set (for bert_base_seq128_opset21 and published_macs); "
                    "default: <repo>/models")
    ap.add_argument("--only", nargs="+", default=None, help="export only these names")
    ap.add_argument("--list", action="store_true", help="list model names and exit")
    ap.add_argument("--summary", nargs="+", default=None, metavar="ONNX",
                    help="print a JSON summary of existing .onnx files and exit")
    ap.add_argument("--macs", action="store_true", help="with --summary: also count "
                    "Conv/MatMul/Gemm/Einsum MACs after shape propagation (batch=1)")
    a = ap.parse_args()

    if a.list:
        for n in list(BUNDLED) + ["--extra:"] + list(EXTRA_TORCHVISION) + list(EXTRA_OTHER) + \
                ["bert_base_seq128_opset21", "opset21_mix", "published_macs.json"]:
            print(n)
        return 0
    if a.summary:
        for p in a.summary:
            print(json.dumps(summarize(p, a.macs)), flush=True)
        return 0

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = a.out or os.path.join(repo, "tests/data/models" if a.extra else "models")
    os.makedirs(out_dir, exist_ok=True)
    import torch
    import torchvision
    print(f"torch {torch.__version__} torchvision {torchvision.__version__} "
          f"onnx {onnx.__version__}", flush=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    failures = collections.OrderedDict()
    only = set(a.only) if a.only else None

    if not a.extra:
        run_set(BUNDLED, out_dir, only, failures)
    else:
        bundled_dir = a.bundled_dir or os.path.join(repo, "models")
        done = run_set(EXTRA_TORCHVISION, out_dir, only, failures)
        done += run_set(EXTRA_OTHER, out_dir, only, failures)
        if not only or "bert_base_seq128_opset21" in only:
            print("[bert_base_seq128_opset21]", flush=True)
            src = os.path.join(bundled_dir, "bert_base_seq128.onnx")
            try:
                if not os.path.exists(src):
                    raise FileNotFoundError(f"{src} (export the bundled set first)")
                convert_to_opset21(src, out_dir, "bert_base_seq128_opset21")
            except Exception as err:  # noqa: BLE001
                failures["bert_base_seq128_opset21"] = f"{type(err).__name__}: {err}"[:300]
                traceback.print_exc()
        if not only or "opset21_mix" in only:
            print("[opset21_mix]", flush=True)
            try:
                export_opset21_mix(out_dir)
            except Exception as err:  # noqa: BLE001
                failures["opset21_mix"] = f"{type(err).__name__}: {err}"[:300]
                traceback.print_exc()
        if not only or "published_macs" in only or "published_macs.json" in only:
            present = [n for n in PUBLISHED_OPS
                       if os.path.exists(os.path.join(out_dir, n + ".onnx"))]
            write_published_macs(out_dir, set(done) | set(present), bundled_dir)

    if failures:
        print("\nSKIPPED / FAILED:")
        for k, v in failures.items():
            print(f"  {k}: {v}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
