#!/usr/bin/python3
"""Issue 53's measurement, with the model's conditioning beside it.

One SGD step (lr 1, mse against zero labels, batch 2, 64x64) through
`pipetrain train` on a torchvision export (opset 17, training-mode BatchNorm),
compared per parameter with PyTorch's float64 gradient: error = max |moved - g|
/ max |g| (less the float32 rounding of the stored weight), over parameters
whose gradient is not zero in exact arithmetic. Beside it, what no float32
trainer can beat: PyTorch's own float32 error, and how far the float64
gradient itself moves when the inputs and weights move by 2^-22 and 2^-20
relative (8 trials each; float32's unit roundoff is 2^-24, and a forward
pass's rounding grows far past it): near a max-pool tie or a ReLU kink that
is large, and any float32 result within it is as good as another.

Usage: gradient_conditioning.py MODEL PIPETRAIN [pipetrain train options...]
  MODEL: vgg11_bn (a global pool and a 512-wide classifier), vgg11_bn_flat
  (the 2x2x512 features flattened into a 2048-wide classifier) or regnet_y_400mf.
  PIPETRAIN_ENV="VAR=value ..." sets variables for pipetrain alone (e.g.
  OPENBLAS_CORETYPE=Haswell), so that the float64 reference is not touched.
"""
import copy
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper


def classifier(features):
    return torch.nn.Sequential(torch.nn.Linear(features, 512), torch.nn.ReLU(True),
                               torch.nn.Dropout(0.0), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(True), torch.nn.Dropout(0.0),
                               torch.nn.Linear(512, 10))


def vgg11_bn(flat):
    m = torchvision.models.vgg11_bn(num_classes=10)
    m.avgpool = torch.nn.Identity() if flat else torch.nn.AdaptiveAvgPool2d(1)
    m.classifier = classifier(2048 if flat else 512)
    return m


MODELS = {"vgg11_bn": lambda: vgg11_bn(False), "vgg11_bn_flat": lambda: vgg11_bn(True),
          "regnet_y_400mf": lambda: torchvision.models.regnet_y_400mf(num_classes=10)}


def grads_of(model, x):
    y = model(x)
    (y * y).mean().backward()  # mse against zero labels
    return {n: p.grad.double().numpy() for n, p in model.named_parameters()}


def worst(grads, ref):
    """max over parameters of max |g - ref| / max |ref|, skipping exact zeros."""
    return max(np.abs(grads[n] - r).max() / np.abs(r).max()
               for n, r in ref.items() if np.abs(r).max() >= 1e-12)


def main():
    name, pipetrain, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    torch.manual_seed(0)
    model = MODELS[name]()
    model.train()
    x = torch.randn(2, 3, 64, 64)
    ref = grads_of(copy.deepcopy(model).double(), x.double())
    t32 = worst(grads_of(copy.deepcopy(model), x), ref)
    spread = {22: 0.0, 20: 0.0}
    for e in spread:
        for trial in range(8):
            gen = torch.Generator().manual_seed(trial)
            moved = copy.deepcopy(model).double()
            with torch.no_grad():
                for p in moved.parameters():
                    p.mul_(1 + 2.0**-e * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            xp = x.double() * (1 + 2.0**-e * torch.randn(x.shape, generator=gen, dtype=torch.float64))
            spread[e] = max(spread[e], worst(grads_of(moved, xp), ref))
    with tempfile.TemporaryDirectory() as tmp:
        path, trained = os.path.join(tmp, "model.onnx"), os.path.join(tmp, "trained.onnx")
        torch.onnx.export(copy.deepcopy(model), x, path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["input"], output_names=["logits"])
        np.savez(os.path.join(tmp, "data.npz"), input=x.numpy(),
                 labels=np.zeros((2, 10), np.float32))
        env = dict(os.environ)
        env.update(kv.split("=", 1) for kv in os.environ.get("PIPETRAIN_ENV", "").split())
        cmd = [pipetrain, "train", path, "--data", os.path.join(tmp, "data.npz"), "--loss", "mse",
               "--optimizer", "sgd", "--lr", "1", "--momentum", "0", "--weight-decay", "0",
               "--epochs", "1", "--test-fraction", "0", "--quiet", "--batch", "2",
               "--run-dir", os.path.join(tmp, "run"), "-o", trained, *extra]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode:
            sys.exit(r.stderr)
        w0 = {t.name: numpy_helper.to_array(t).astype(np.float64)
              for t in onnx.load(path).graph.initializer}
        w1 = {t.name: numpy_helper.to_array(t).astype(np.float64)
              for t in onnx.load(trained).graph.initializer}
    rows = []
    for n, g in ref.items():
        if n not in w0 or np.abs(g).max() < 1e-12:
            continue
        storage = 2.0**-24 * max(np.abs(w0[n]).max(), np.abs(w1[n]).max())
        rows.append((max(0.0, np.abs((w0[n] - w1[n]) - g).max() - storage) / np.abs(g).max(), n))
    rows.sort(reverse=True)
    for e, n in rows[:5]:
        print(f"  {n}: {e:.2e}")
    print(f"{name} {' '.join(extra)}: pipetrain {rows[0][0]:.2e}, float32 PyTorch {t32:.2e}, "
          f"float64 spread {spread[22]:.2e} under 2^-22 and {spread[20]:.2e} under 2^-20 "
          f"(worst of {len(rows)} parameters)")


if __name__ == "__main__":
    main()
