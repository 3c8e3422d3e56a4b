#!/usr/bin/python3
"""Exports PyTorch reference models to ONNX with inputs and PyTorch's outputs.

For each model, writes OUT/<model>/model.onnx, input_<i>.npy and
output_<i>.npy (PyTorch's own outputs on those inputs), and the gradients of
loss = sum_i sum(output_i * seed_i) over the outputs that have a seed_<i>.npy
with respect to every initializer PyTorch's parameters became: grads/<k>.npy,
listed with their initializer names in grads.txt. Models are exported in
training mode (BatchNorm on batch statistics) with do_constant_folding=False,
so the importer sees the shape subgraphs PyTorch really emits.

The float32 model is what gets exported; the reference outputs and gradients
come from a float64 copy of it (saved as float64 .npy), so they carry no
float32 rounding of their own. torch32_error.txt says how far PyTorch's own
float32 results are from them (max |t32 - t64| / max |t64| per tensor), the
largest over the inputs and the 8 perturbed points below (2 for models over
100M parameters): an engine cannot be asked to be closer than that. One sample
is not enough where the float64 result is itself rounding noise (a gradient
that is zero in exact arithmetic, like a bias feeding a BatchNorm through a
convolution): two float32 engines' noise there differ by a factor of 2 or more
from run to run. float64_spread.txt says how far the float64 results
themselves move under float32-sized perturbations of the parameters and inputs
(near a ReLU or max-pool kink a gradient jumps).

Families:
  - the original four (resnet18, vgg11, lstm, transformer): float inputs
    input_<i>, a fixed random seed on every output;
  - torchvision classifiers and Hugging Face transformers: real inputs under
    their own names (input/labels, input_ids/attention_mask/labels), output 0
    is the scalar training loss and the only seeded output (seed 1.0), so the
    gradients are d loss / d parameter; data.npz holds the inputs by name.
The Hugging Face models need transformers 4.30.2, installed by
scripts/install_transformers.sh into $PIPETRAIN_PYDEPS (default
/opt/pipetrain/pydeps), which is put on sys.path when it exists.

Uses Debian's torch (/usr/bin/python3). Seeds are fixed: reruns give the same files.
Usage: export_reference_models.py OUT [--models resnet18,lstm] [--force]
"""
import argparse
import contextlib
import copy
import dataclasses
import functools
import os
import sys
import time

PYDEPS = os.environ.get("PIPETRAIN_PYDEPS", "/opt/pipetrain/pydeps")
if os.path.isdir(PYDEPS):
    sys.path.insert(0, PYDEPS)

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

NUM_CLASSES = 10  # torchvision classifiers
VOCAB = 128  # Hugging Face models
TOKENS = (2, 16)  # (batch, sequence) of the Hugging Face inputs


@dataclasses.dataclass
class Reference:
    """One model to export: the module, its example inputs by ONNX input name
    (in argument order), its output names (None: PyTorch's defaults), and
    whether output 0 is a scalar training loss (then it alone is seeded, with
    1.0, and the inputs also go to data.npz)."""
    model: torch.nn.Module
    inputs: dict
    output_names: list = None
    loss_first: bool = False


# --- The original four: random float inputs, random seeds on every output ----------------

class LSTMModel(torch.nn.Module):
    """A 2-layer LSTM over (seq, batch, features) with a linear head."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(input_size=16, hidden_size=32, num_layers=2)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y)


class TransformerModel(torch.nn.Module):
    """A small Transformer encoder (2 layers, d_model 32, 4 heads) with a head."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                                 dropout=0.0, activation="gelu")
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.encoder(x))


def random_inputs(build, *shapes):
    """A builder: the model build() makes, on standard normal inputs input_<i>."""
    def make(gen):
        model = build()
        return Reference(model, {f"input_{i}": torch.randn(*s, generator=gen)
                                 for i, s in enumerate(shapes)})
    return make


# --- torchvision classifiers: (input, labels) -> (mean cross-entropy, logits) -------------

class ClassifierLoss(torch.nn.Module):
    """Wraps an image classifier so its first output is the training loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, labels):
        logits = self.model(x)
        return F.cross_entropy(logits, labels), logits


def classifier(build, batch, size, **kwargs):
    """A builder: torchvision.models.<build>(num_classes=10, **kwargs) on a
    (batch, 3, size, size) standard normal input with random labels."""
    def make(gen):
        model = ClassifierLoss(build(num_classes=NUM_CLASSES, **kwargs))
        x = torch.randn(batch, 3, size, size, generator=gen)
        labels = torch.randint(0, NUM_CLASSES, (batch,), generator=gen)
        return Reference(model, {"input": x, "labels": labels}, ["loss", "logits"], True)
    return make


def tiny_vit(num_classes):
    """A 2-layer ViT on 32x32 images. torchvision zero-initializes the head,
    which would make every other gradient exactly 0: it gets nn.Linear's
    default initialization instead."""
    vit = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                               num_heads=2, hidden_dim=32, mlp_dim=64,
                                               num_classes=num_classes)
    vit.heads.head.reset_parameters()
    return vit


def small_vgg11_bn(num_classes):
    """VGG-11 with BatchNorm for 64x64 inputs: its features end at 2x2, which
    torch 1.13 cannot export through AdaptiveAvgPool2d((7, 7)); a global
    average pool and a 512-wide classifier take their place."""
    vgg = torchvision.models.vgg11_bn(num_classes=num_classes)
    vgg.avgpool = torch.nn.AdaptiveAvgPool2d(1)
    vgg.classifier = torch.nn.Sequential(
        torch.nn.Linear(512, 512), torch.nn.ReLU(True), torch.nn.Dropout(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(True), torch.nn.Dropout(),
        torch.nn.Linear(512, num_classes))
    return vgg


# --- Issue 16's real models: segmentation, UNet, GRU, style transfer ------------------------

class SegmentationLoss(torch.nn.Module):
    """Wraps a torchvision segmentation model: (input, labels) -> (mean per-pixel
    cross-entropy, logits); labels are (N, H, W) class indices."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, labels):
        logits = self.model(x)["out"]
        return F.cross_entropy(logits, labels), logits


def segmentation(build, batch, size, classes=4):
    """A builder: torchvision.models.segmentation.<build>(num_classes=classes),
    no pretrained weights, on a (batch, 3, size, size) input with random labels."""
    def make(gen):
        model = SegmentationLoss(build(weights=None, weights_backbone=None, num_classes=classes))
        x = torch.randn(batch, 3, size, size, generator=gen)
        labels = torch.randint(0, classes, (batch, size, size), generator=gen)
        return Reference(model, {"input": x, "labels": labels}, ["loss", "logits"], True)
    return make


def conv_block(cin, cout):
    return torch.nn.Sequential(
        torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU(),
        torch.nn.Conv2d(cout, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU())


class UNet(torch.nn.Module):
    """A 3-level UNet: max-pool down, ConvTranspose up on one skip and bilinear
    Resize on the other, skips joined by Concat, a per-pixel 1x1 head."""

    def __init__(self, channels=3, classes=2, width=8):
        super().__init__()
        w = width
        self.enc1, self.enc2, self.mid = conv_block(channels, w), conv_block(w, 2 * w), conv_block(2 * w, 4 * w)
        self.up2 = torch.nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = conv_block(4 * w, 2 * w)
        self.reduce1 = torch.nn.Conv2d(2 * w, w, 1)
        self.dec1 = conv_block(2 * w, w)
        self.head = torch.nn.Conv2d(w, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        up = F.interpolate(self.reduce1(d2), scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.head(self.dec1(torch.cat([up, e1], 1)))


class GRUModel(torch.nn.Module):
    """A 2-layer bidirectional GRU over (seq, batch, features) with a linear head."""

    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(input_size=16, hidden_size=24, num_layers=2, bidirectional=True)
        self.head = torch.nn.Linear(48, 10)

    def forward(self, x):
        y, _ = self.gru(x)
        return self.head(y)


class StyleTransfer(torch.nn.Module):
    """Johnson et al.'s image transformation net at a small width: reflection-
    padded convolutions with InstanceNorm, residual blocks, nearest-neighbour
    upsampling, one ConvTranspose up-step."""

    def __init__(self, w=8):
        super().__init__()

        def conv(cin, cout, k, stride=1):
            return torch.nn.Sequential(torch.nn.ReflectionPad2d(k // 2),
                                       torch.nn.Conv2d(cin, cout, k, stride))

        def norm_relu(c):
            return torch.nn.Sequential(torch.nn.InstanceNorm2d(c, affine=True), torch.nn.ReLU())

        self.down = torch.nn.Sequential(conv(3, w, 9), norm_relu(w), conv(w, 2 * w, 3, 2),
                                        norm_relu(2 * w), conv(2 * w, 4 * w, 3, 2),
                                        norm_relu(4 * w))
        self.res = torch.nn.ModuleList(
            torch.nn.Sequential(conv(4 * w, 4 * w, 3), torch.nn.InstanceNorm2d(4 * w, affine=True),
                                torch.nn.ReLU(), conv(4 * w, 4 * w, 3),
                                torch.nn.InstanceNorm2d(4 * w, affine=True)) for _ in range(2))
        self.up1 = torch.nn.Sequential(torch.nn.Upsample(scale_factor=2, mode="nearest"),
                                       conv(4 * w, 2 * w, 3), norm_relu(2 * w))
        self.up2 = torch.nn.Sequential(
            torch.nn.ConvTranspose2d(2 * w, w, 3, stride=2, padding=1, output_padding=1),
            norm_relu(w))
        self.out = conv(w, 3, 9)

    def forward(self, x):
        y = self.down(x)
        for block in self.res:
            y = y + block(y)
        return self.out(self.up2(self.up1(y)))


class FlowWarp(torch.nn.Module):
    """Warps its input by a flow a convolution predicts (optical-flow and
    deformable-style): GridSample bilinear with border padding, then bicubic
    with reflection padding and aligned corners, so gradients reach both the
    image and the grid."""

    def __init__(self, size=8):
        super().__init__()
        self.flow = torch.nn.Conv2d(3, 2, 3, padding=1)
        self.head = torch.nn.Conv2d(3, 4, 3, padding=1)
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size),
                                indexing="ij")
        self.register_buffer("base", torch.stack([xs, ys], -1)[None])

    def forward(self, x):
        grid = self.base + 0.3 * torch.tanh(self.flow(x)).permute(0, 2, 3, 1)
        y = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
        y = F.grid_sample(y, grid, mode="bicubic", padding_mode="reflection", align_corners=True)
        return self.head(y)


class RoiHead(torch.nn.Module):
    """A detection head: a small convolutional backbone, torchvision's
    roi_align (aligned, 2x2 sampling) over fixed boxes of both images, a
    linear classifier per box."""

    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                            torch.nn.Conv2d(8, 8, 3, stride=2, padding=1))
        self.register_buffer("boxes", torch.tensor([[0, 1.0, 2.0, 11.5, 9.0],
                                                    [0, 4.2, 0.5, 15.0, 15.5],
                                                    [1, -2.0, 3.0, 8.0, 12.5],
                                                    [1, 6.0, 6.0, 9.5, 7.0]]))
        self.classify = torch.nn.Linear(8 * 3 * 3, 5)

    def forward(self, x):
        features = self.backbone(x)
        pooled = torchvision.ops.roi_align(features, self.boxes, (3, 3), spatial_scale=0.5,
                                           sampling_ratio=2, aligned=True)
        return self.classify(pooled.flatten(1))


def real_models():
    seg = torchvision.models.segmentation
    return {
        "fcn_resnet50": segmentation(seg.fcn_resnet50, 2, 64),
        "deeplabv3_mobilenet_v3_large": segmentation(seg.deeplabv3_mobilenet_v3_large, 4, 64),
        "unet": random_inputs(UNet, (2, 3, 32, 32)),
        "gru": random_inputs(GRUModel, (5, 3, 16)),
        "style_transfer": random_inputs(StyleTransfer, (2, 3, 32, 32)),
        "flow_warp": random_inputs(FlowWarp, (2, 3, 8, 8)),
        "roi_head": random_inputs(RoiHead, (2, 3, 16, 16)),
    }


# --- Hugging Face transformers (4.30.2), random init from small configs -------------------

def transformers_module():
    """Imports transformers, or exits with how to install it."""
    try:
        import transformers
    except ImportError as e:
        sys.exit(f"Hugging Face models need transformers 4.30.2 ({e}); install it with "
                 f"scripts/install_transformers.sh {PYDEPS} (or point PIPETRAIN_PYDEPS at it)")
    return transformers


class KeywordCall(torch.nn.Module):
    """Calls a Hugging Face model with positional arguments as the keyword
    arguments `names`, returning a tuple (return_dict=False), so that
    torch.onnx.export can pass them positionally."""

    def __init__(self, model, names):
        super().__init__()
        self.model = model
        self.names = list(names)

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args)), return_dict=False)


class EncoderRegression(torch.nn.Module):
    """An encoder with no loss of its own: (input_ids, attention_mask, labels)
    -> (mse_loss(last_hidden_state, labels), last_hidden_state). The loss is
    spelled out: torch 1.13 cannot export aten::mse_loss."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask, labels):
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                              return_dict=False)[0]
        diff = hidden - labels
        return (diff * diff).mean(), hidden


def tokens(gen):
    """input_ids (2, 16) and an attention_mask whose second row ends in 2 pads."""
    input_ids = torch.randint(0, VOCAB, TOKENS, generator=gen)
    attention_mask = torch.ones(TOKENS, dtype=torch.int64)
    attention_mask[1, -2:] = 0
    return input_ids, attention_mask


def causal_lm(model_class, config_class, **config):
    """A builder: a causal LM whose loss is next-token prediction of input_ids."""
    def make(gen):
        t = transformers_module()
        model = getattr(t, model_class)(getattr(t, config_class)(**config, use_cache=False))
        input_ids, attention_mask = tokens(gen)
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask,
                  "labels": input_ids.clone()}  # a separate tensor: a separate graph input
        return Reference(KeywordCall(model, inputs), inputs, ["loss", "logits"], True)
    return make


def sequence_classifier(model_class, config_class, **config):
    """A builder: a 3-way sequence classifier with random class labels."""
    def make(gen):
        t = transformers_module()
        model = getattr(t, model_class)(getattr(t, config_class)(**config, num_labels=3))
        input_ids, attention_mask = tokens(gen)
        labels = torch.randint(0, 3, TOKENS[:1], generator=gen)
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
        return Reference(KeywordCall(model, inputs), inputs, ["loss", "logits"], True)
    return make


def t5_encoder(gen):
    t = transformers_module()
    config = t.T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                        num_heads=2, dropout_rate=0.0, use_cache=False)
    model = EncoderRegression(t.T5EncoderModel(config))
    input_ids, attention_mask = tokens(gen)
    labels = torch.randn(*TOKENS, 32, generator=gen)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    return Reference(model, inputs, ["loss", "last_hidden_state"], True)


# --- The table ----------------------------------------------------------------------------

def original_models():
    tv = torchvision.models
    return {
        # Batch 4 at 112x112: with batch statistics, smaller inputs make float32 gradients
        # ill-conditioned (PyTorch float32 vs float64 differ by 1e-2 at batch 2, 224x224).
        "resnet18": random_inputs(lambda: tv.resnet18(num_classes=1000), (4, 3, 112, 112)),
        "vgg11": random_inputs(lambda: tv.vgg11(num_classes=1000), (1, 3, 224, 224)),
        "lstm": random_inputs(LSTMModel, (5, 3, 16)),
        "transformer": random_inputs(TransformerModel, (6, 2, 32)),
    }


def vision_models():
    """torchvision classifiers at small inputs (batch, size) in training mode."""
    tv = torchvision.models
    return {
        "mobilenet_v3_small": classifier(tv.mobilenet_v3_small, 4, 64),
        "efficientnet_b0": classifier(tv.efficientnet_b0, 4, 64),
        "convnext_tiny": classifier(tv.convnext_tiny, 2, 64),
        "densenet121": classifier(tv.densenet121, 4, 64),
        "regnet_y_400mf": classifier(tv.regnet_y_400mf, 4, 64),
        "shufflenet_v2_x0_5": classifier(tv.shufflenet_v2_x0_5, 4, 64),
        "googlenet": classifier(tv.googlenet, 4, 64, aux_logits=False, init_weights=True),
        # Inception v3's stem needs at least 75x75.
        "inception_v3": classifier(tv.inception_v3, 4, 139, aux_logits=False, init_weights=True),
        "resnext50_32x4d": classifier(tv.resnext50_32x4d, 4, 64),
        "vit": classifier(tiny_vit, 4, 32),
        "vgg11_bn": classifier(small_vgg11_bn, 2, 64),
        "regnet_y_400mf_b2": classifier(tv.regnet_y_400mf, 2, 64),
    }


def hf_models():
    """Hugging Face models: 2 layers, 2 heads, width 32, vocabulary 128, no dropout."""
    return {
        "gpt2": causal_lm("GPT2LMHeadModel", "GPT2Config", n_layer=2, n_embd=32, n_head=2,
                          vocab_size=VOCAB, n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0,
                          attn_pdrop=0.0),
        "llama": causal_lm("LlamaForCausalLM", "LlamaConfig", hidden_size=32,
                           intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           vocab_size=VOCAB, max_position_embeddings=32),
        "bert": sequence_classifier("BertForSequenceClassification", "BertConfig",
                                    hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=64, vocab_size=VOCAB,
                                    max_position_embeddings=32, hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0),
        "distilbert": sequence_classifier("DistilBertForSequenceClassification",
                                          "DistilBertConfig", dim=32, hidden_dim=64, n_layers=2,
                                          n_heads=2, vocab_size=VOCAB, max_position_embeddings=32,
                                          dropout=0.0, attention_dropout=0.0,
                                          seq_classif_dropout=0.0),
        "t5_encoder": t5_encoder,
    }


def models():
    return {**original_models(), **vision_models(), **real_models(), **hf_models()}


# --- Gradients ----------------------------------------------------------------------------

def lstm_views(model):
    """ONNX LSTM initializers PyTorch derives from nn.LSTM parameters: gates
    reordered from (i, f, g, o) to ONNX's (i, o, f, c), biases concatenated.
    Yields (value, gradient) pairs."""
    def reorder(t):
        i, f, g, o = t.chunk(4, 0)
        return torch.cat([i, o, f, g], 0)
    for m in model.modules():
        if not isinstance(m, torch.nn.LSTM):
            continue
        for layer in range(m.num_layers):
            w_ih, w_hh = getattr(m, f"weight_ih_l{layer}"), getattr(m, f"weight_hh_l{layer}")
            b_ih, b_hh = getattr(m, f"bias_ih_l{layer}"), getattr(m, f"bias_hh_l{layer}")
            yield reorder(w_ih.detach())[None], reorder(w_ih.grad)[None]
            yield reorder(w_hh.detach())[None], reorder(w_hh.grad)[None]
            yield (torch.cat([reorder(b_ih.detach()), reorder(b_hh.detach())])[None],
                   torch.cat([reorder(b_ih.grad), reorder(b_hh.grad)])[None])


@functools.lru_cache(maxsize=1)
def float_initializers(onnx_path, mtime_ns):
    """(name, tensor) of the model's float initializers, loaded once per export: the
    perturbation trials match gradients 18 times, and loading vgg11's 530 MB file each
    time was 250 s of its 313 s export."""
    import onnx
    from onnx import numpy_helper
    values = [(init.name, torch.from_numpy(numpy_helper.to_array(init).copy()))
              for init in onnx.load(onnx_path).graph.initializer]
    return [(name, value) for name, value in values if value.is_floating_point()]


def matched_gradients(model32, model64, onnx_path):
    """Matches each float initializer to a parameter of model32 by name, else by
    value (unique match), else to an LSTM-derived tensor, and yields
    (initializer name, float32 gradient, float64 gradient of the same parameter)."""
    params32, params64 = dict(model32.named_parameters()), dict(model64.named_parameters())
    # (value, float32 gradient, float64 gradient); values are model32's.
    candidates = [(p.detach(), p.grad, params64[n].grad) for n, p in params32.items()]
    candidates += [(v, g32, g64) for (v, g32), (_, g64)
                   in zip(lstm_views(model32), lstm_views(model64))]
    for name, value in float_initializers(onnx_path, os.stat(onnx_path).st_mtime_ns):
        if name in params32:
            grads = params32[name].grad, params64[name].grad
        else:
            hits = [(g32, g64) for v, g32, g64 in candidates
                    if v.shape == value.shape and torch.equal(v, value)]
            if len(hits) != 1:
                continue
            grads = hits[0]
        if grads[0] is not None:
            yield name, grads[0], grads[1]


# --- float64 references --------------------------------------------------------------------

@contextlib.contextmanager
def float64_stays_float64():
    """Hugging Face code upcasts to float32 for half-precision safety (softmax(...,
    dtype=torch.float32), x.to(torch.float32) in RMS norms, scores.float()); on a
    float64 model those casts would round the reference to float32. Inside this
    block they leave float64 tensors as they are."""
    to, to_float, softmax = torch.Tensor.to, torch.Tensor.float, F.softmax

    def keep_to(self, *args, **kwargs):
        if self.dtype == torch.float64:
            args = tuple(torch.float64 if a is torch.float32 else a for a in args)
            if kwargs.get("dtype") is torch.float32:
                kwargs["dtype"] = torch.float64
        return to(self, *args, **kwargs)

    def keep_float(self, *args, **kwargs):
        return self if self.dtype == torch.float64 else to_float(self, *args, **kwargs)

    def keep_softmax(x, *args, **kwargs):
        if x.dtype == torch.float64 and kwargs.get("dtype") is torch.float32:
            kwargs["dtype"] = torch.float64
        return softmax(x, *args, **kwargs)

    torch.Tensor.to, torch.Tensor.float, F.softmax = keep_to, keep_float, keep_softmax
    try:
        yield
    finally:
        torch.Tensor.to, torch.Tensor.float, F.softmax = to, to_float, softmax


def forward(model, inputs):
    """model(*inputs) as a list of outputs."""
    outputs = model(*inputs)
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def backward(outputs, seeds):
    """Accumulates the gradients of sum_k sum(output_k * seed_k) into the
    parameters' .grad; seeds[k] None leaves output k out of the loss."""
    sum((o * s).sum() for o, s in zip(outputs, seeds) if s is not None).backward()


def perturbation_spread(model64, inputs, seeds, onnx_path, model32, outputs64, grads64,
                        torch32, trials=8, scale=2.0 ** -20):
    """How far the float64 results move when every float parameter and input is
    perturbed by a relative `scale` (about float32 rounding accumulated over a
    few ops): max over trials, per output and per gradient. Near a kink (a ReLU
    input or a max-pool tie within rounding of zero) the gradient jumps, and no
    float32 implementation can be held closer to float64 than this. At each
    perturbed point PyTorch's float32 error against that point's float64
    results is taken too, raising `torch32` (key -> error) to the largest."""
    gen = torch.Generator().manual_seed(7)
    spread = {}
    for _ in range(trials):
        model_p = copy.deepcopy(model64)
        with torch.no_grad():
            for p in model_p.parameters():
                p.mul_(perturbation(p.shape, gen, scale))
                p.grad = None
        inputs_p = [t.double() * perturbation(t.shape, gen, scale)
                    if t.is_floating_point() else t for t in inputs]
        with float64_stays_float64():
            outputs_p = forward(model_p, inputs_p)
            backward(outputs_p, [s.double() if s is not None else None for s in seeds])
        for i, (o, o64) in enumerate(zip(outputs_p, outputs64)):
            key = f"output {i}"
            spread[key] = max(spread.get(key, 0.0), relative_error(o.detach(), o64))
        perturbed64 = {}
        for name, _, g in matched_gradients(model32, model_p, onnx_path):
            key = f"grad {name}"
            spread[key] = max(spread.get(key, 0.0), relative_error(g, grads64[name]))
            perturbed64[name] = g
        # The same point in float32: another sample of PyTorch's own rounding.
        model_p32 = copy.deepcopy(model32)
        with torch.no_grad():
            for p32, p64 in zip(model_p32.parameters(), model_p.parameters()):
                p32.copy_(p64.float())
                p32.grad = None
        outputs_p32 = forward(model_p32, [t.float() if t.is_floating_point() else t
                                          for t in inputs_p])
        backward(outputs_p32, seeds)
        for i, (o32, o64) in enumerate(zip(outputs_p32, outputs_p)):
            key = f"output {i}"
            torch32[key] = max(torch32.get(key, 0.0), relative_error(o32.detach(), o64.detach()))
        for name, _, g in matched_gradients(model32, model_p32, onnx_path):
            key = f"grad {name}"
            torch32[key] = max(torch32.get(key, 0.0), relative_error(g, perturbed64[name]))
    return spread


def perturbation(shape, gen, scale):
    """1 + scale * (2 * U[0, 1) - 1) in float64, computed in place: the same values as
    the expression, without its three temporaries of vgg11's 133M parameters."""
    r = torch.rand(shape, generator=gen, dtype=torch.float64)
    return r.mul_(2).sub_(1).mul_(scale).add_(1)


def abs_max(t, minus=None):
    """max |t - minus| (max |t| without minus) in float64, as (t.double() - minus).abs().max()
    gives it (NaN included), taken in 1M-element chunks: no temporaries the size of
    vgg11's 1 GB gradients (their allocation and page faults were a third of its export)."""
    if minus is not None and minus.shape != t.shape:
        return (t.double() - minus).abs().max().item()
    a = t.reshape(-1)
    b = minus.reshape(-1) if minus is not None else None
    step = 1 << 20
    parts = []
    for i in range(0, a.numel(), step):
        d = a[i:i + step].double()
        if b is not None:
            d = d - b[i:i + step]
        parts.append(d.abs().max())
    return torch.stack(parts).max().item()


def relative_error(t32, t64):
    """max |t32 - t64| / max |t64|, as reference_check measures."""
    if t64.numel() == 0:
        return 0.0
    return abs_max(t32, t64) / max(abs_max(t64), 1e-30)


# --- Export --------------------------------------------------------------------------------

def export(name, out_dir, force):
    path = os.path.join(out_dir, name)
    if os.path.exists(os.path.join(path, "float64_spread.txt")) and not force:  # written last
        return
    start = time.time()
    os.makedirs(path, exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)  # inputs, then the original four's seeds
    ref = models()[name](gen)
    model = ref.model
    # Dropout masks come from PyTorch's RNG, which no other runtime reproduces:
    # p = 0 keeps the Dropout nodes in the graph (training mode) but makes them exact.
    # StochasticDepth (convnext, efficientnet) at p = 0 is the identity.
    for m in model.modules():
        if isinstance(m, (torch.nn.Dropout, torchvision.ops.StochasticDepth)):
            m.p = 0.0
    model.train()
    names, inputs = list(ref.inputs), list(ref.inputs.values())
    # Export first: exporting in training mode runs the model once, which moves
    # BatchNorm's running statistics; the reference outputs come from fresh copies.
    state = {k: v.clone() for k, v in model.state_dict().items()}
    onnx_path = os.path.join(path, "model.onnx")
    torch.onnx.export(model, tuple(inputs), onnx_path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=names, output_names=ref.output_names)
    model.load_state_dict(state)
    model64 = copy.deepcopy(model).double()

    outputs32 = forward(model, inputs)
    if ref.loss_first:
        seeds = [torch.ones(outputs32[0].shape)] + [None] * (len(outputs32) - 1)
    else:
        seeds = [torch.randn(*o.shape, generator=gen) for o in outputs32]
    backward(outputs32, seeds)
    with float64_stays_float64():
        outputs64 = forward(model64, [t.double() if t.is_floating_point() else t for t in inputs])
        backward(outputs64, [s.double() if s is not None else None for s in seeds])
    outputs32, outputs64 = [o.detach() for o in outputs32], [o.detach() for o in outputs64]

    for i, t in enumerate(inputs):
        np.save(os.path.join(path, f"input_{i}.npy"), t.numpy())
    if ref.loss_first:
        np.savez(os.path.join(path, "data.npz"), **{n: t.numpy() for n, t in ref.inputs.items()})
    torch32 = {}  # "output i" / "grad name" -> PyTorch float32's error
    for i, (t32, t64) in enumerate(zip(outputs32, outputs64)):
        np.save(os.path.join(path, f"output_{i}.npy"), t64.numpy())
        if seeds[i] is not None:
            np.save(os.path.join(path, f"seed_{i}.npy"), seeds[i].numpy())
        torch32[f"output {i}"] = relative_error(t32, t64)
    os.makedirs(os.path.join(path, "grads"), exist_ok=True)
    lines = []
    for init_name, g32, g64 in matched_gradients(model, model64, onnx_path):
        np.save(os.path.join(path, "grads", f"{len(lines)}.npy"), g64.numpy())
        lines.append(f"{init_name}\t{len(lines)}.npy")
        torch32[f"grad {init_name}"] = relative_error(g32, g64)
    grads64 = {n: g64 for n, _, g64 in matched_gradients(model, model64, onnx_path)}
    # vgg11's 133M parameters made 8 trials a quarter of the whole export (79 s of the suite's
    # CPU time); 2 suffice there: its worst gradient sits at 0.00 of its bound. Fewer trials
    # can only lower a bound, never widen it.
    trials = 2 if sum(p.numel() for p in model.parameters()) > 100_000_000 else 8
    spread = perturbation_spread(model64, inputs, seeds, onnx_path, model, outputs64, grads64,
                                 torch32, trials)
    with open(os.path.join(path, "torch32_error.txt"), "w") as f:
        f.write("".join(f"{k} {v:.3e}\n" for k, v in torch32.items()))
    with open(os.path.join(path, "float64_spread.txt"), "w") as f:
        f.write("".join(f"{k} {v:.3e}\n" for k, v in spread.items()))
    with open(os.path.join(path, "grads.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    params = list(model.parameters())
    print(f"exported {name}: {sum(p.numel() for p in params)} parameters in {len(params)} "
          f"tensors, {len(lines)} gradients, "
          f"{time.time() - start:.1f} s -> {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--models", default=",".join(models()))
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.models.split(",")
    for name in names:
        if name not in models():
            sys.exit(f"unknown model '{name}' (known: {', '.join(models())})")
    if any(name in hf_models() for name in names):
        transformers_module()  # fail before exporting anything
    for name in names:
        export(name, args.out, args.force)


if __name__ == "__main__":
    main()
