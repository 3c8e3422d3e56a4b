#!/usr/bin/python3
"""Exports PyTorch reference models to ONNX with inputs and PyTorch's outputs.

For each model, writes OUT/<model>/model.onnx, input_<i>.npy and
output_<i>.npy (PyTorch's own outputs on those inputs), and the gradients of
loss = sum_i sum(output_i * seed_i) (seed_<i>.npy, fixed random) with respect
to every initializer PyTorch's parameters became: grads/<k>.npy, listed with
their initializer names in grads.txt. Models are exported in
training mode (BatchNorm on batch statistics) with do_constant_folding=False,
so the importer sees the shape subgraphs PyTorch really emits.

Uses Debian's torch (/usr/bin/python3). Seeds are fixed: reruns give the same files.
Usage: export_reference_models.py OUT [--models resnet18,lstm] [--force]
"""
import argparse
import os
import sys

import numpy as np
import torch
import torchvision


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


def models():
    return {
        # Batch 4 at 112x112: with batch statistics, smaller inputs make float32 gradients
        # ill-conditioned (PyTorch float32 vs float64 differ by 1e-2 at batch 2, 224x224).
        "resnet18": (lambda: torchvision.models.resnet18(num_classes=1000), [(4, 3, 112, 112)]),
        "vgg11": (lambda: torchvision.models.vgg11(num_classes=1000), [(1, 3, 224, 224)]),
        "lstm": (LSTMModel, [(5, 3, 16)]),
        "transformer": (TransformerModel, [(6, 2, 32)]),
    }


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


def save_gradients(model, onnx_path, out_dir):
    """Matches each float initializer to a parameter by name, else by value
    (unique match), else to an LSTM-derived tensor, and saves its gradient."""
    import onnx
    from onnx import numpy_helper
    params = dict(model.named_parameters())
    candidates = [(p.detach(), p.grad) for p in params.values()] + list(lstm_views(model))
    os.makedirs(os.path.join(out_dir, "grads"), exist_ok=True)
    lines = []
    for init in onnx.load(onnx_path).graph.initializer:
        value = torch.from_numpy(numpy_helper.to_array(init).copy())
        if not value.is_floating_point():
            continue
        if init.name in params:
            grad = params[init.name].grad
        else:
            hits = [g for v, g in candidates if v.shape == value.shape and torch.equal(v, value)]
            if len(hits) != 1:
                continue
            grad = hits[0]
        if grad is None:
            continue
        np.save(os.path.join(out_dir, "grads", f"{len(lines)}.npy"), grad.numpy())
        lines.append(f"{init.name}\t{len(lines)}.npy")
    with open(os.path.join(out_dir, "grads.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def export(name, out_dir, force):
    path = os.path.join(out_dir, name)
    if os.path.exists(os.path.join(path, "grads.txt")) and not force:
        return
    os.makedirs(path, exist_ok=True)
    torch.manual_seed(0)
    build, shapes = models()[name]
    model = build()
    # Dropout masks come from PyTorch's RNG, which no other runtime reproduces:
    # p = 0 keeps the Dropout nodes in the graph (training mode) but makes them exact.
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model.train()
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randn(*s, generator=gen) for s in shapes]
    # Export first: exporting in training mode runs the model once, which moves
    # BatchNorm's running statistics; the reference outputs come from a fresh copy.
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.onnx.export(model, tuple(inputs), os.path.join(path, "model.onnx"), opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=[f"input_{i}" for i in range(len(inputs))])
    model.load_state_dict(state)
    outputs = model(*inputs)
    if not isinstance(outputs, (tuple, list)):
        outputs = [outputs]
    seeds = [torch.randn(*o.shape, generator=gen) for o in outputs]
    loss = sum((o * r).sum() for o, r in zip(outputs, seeds))
    loss.backward()
    for i, t in enumerate(inputs):
        np.save(os.path.join(path, f"input_{i}.npy"), t.numpy())
    for i, t in enumerate(outputs):
        np.save(os.path.join(path, f"output_{i}.npy"), t.detach().numpy())
        np.save(os.path.join(path, f"seed_{i}.npy"), seeds[i].numpy())
    save_gradients(model, os.path.join(path, "model.onnx"), path)
    print(f"exported {name}: {sum(p.numel() for p in model.parameters())} parameters -> {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--models", default=",".join(models()))
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.models.split(","):
        if name not in models():
            sys.exit(f"unknown model '{name}' (known: {', '.join(models())})")
        export(name, args.out, args.force)


if __name__ == "__main__":
    main()
