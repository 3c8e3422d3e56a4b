#!/usr/bin/python3
"""Language-model training throughput: pipetrain (one worker, and pipelined over
2 stages) against PyTorch on the same GPT, side by side in one run.

The GPT is the demo's shape (scripts/demo.sh): byte-level vocabulary 256,
context 64, d_model 192, 3 heads, 2 blocks, LM head tied to the token
embedding. It is defined once in PyTorch and exported to ONNX; pipetrain trains
that ONNX file from the command line (`pipetrain train --data tokens.npz`),
PyTorch trains the module. Same data (byte tokens of Debian's fortunes, the
demo's corpus), batch, optimizer (AdamW) and thread budget (all cores: one
worker gets them all, 2 stages one each). Each run trains 2 epochs; the second
epoch's training time gives tokens/s (the first warms caches and allocators).

Usage: benchmarks/compare_lm.py BUILD_DIR [--samples 1600] [--batch 16]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blas_core import blas_of_torch, torch_openmp_blas  # noqa: E402

# PyTorch trains in this process: it must load OpenBLAS's OpenMP build (see
# blas_core.torch_openmp_blas), so the script restarts itself with it preloaded.
if __name__ == "__main__" and "openblas-openmp" not in os.environ.get("LD_PRELOAD", ""):
    _env = torch_openmp_blas(os.environ)
    if _env is not os.environ:
        os.execve(sys.executable, [sys.executable] + sys.argv, _env)

import numpy as np  # noqa: E402
import torch  # noqa: E402

CORPUS = "/usr/share/games/fortunes"
VOCAB, SEQ, WIDTH, HEADS, LAYERS = 256, 64, 192, 3, 2


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(WIDTH)
        self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.ln2 = torch.nn.LayerNorm(WIDTH)
        self.fc = torch.nn.Linear(WIDTH, 4 * WIDTH)
        self.out = torch.nn.Linear(4 * WIDTH, WIDTH)
        # Additive causal mask: a constant, so the export needs no Where.
        self.register_buffer("mask", torch.full((SEQ, SEQ), -1e9).triu(1))

    def forward(self, x):
        n, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(WIDTH, dim=2)
        q, k, v = (z.reshape(n, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) * (c // HEADS) ** -0.5 + self.mask, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(n, t, c))
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(VOCAB, WIDTH)
        self.wpe = torch.nn.Parameter(torch.randn(SEQ, WIDTH) * 0.02)
        self.blocks = torch.nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.ln = torch.nn.LayerNorm(WIDTH)

    def forward(self, input_ids):
        x = self.blocks(self.wte(input_ids) + self.wpe)
        return self.ln(x) @ self.wte.weight.t()  # the tied LM head


def corpus_windows(samples):
    """(samples, SEQ) byte ids and their next-byte labels from the fortunes files."""
    text = bytearray()
    for root, _, files in sorted(os.walk(CORPUS)):
        for f in sorted(files):
            if "." not in f:
                with open(os.path.join(root, f), "rb") as fh:
                    text += fh.read()
    ids = np.frombuffer(bytes(text), np.uint8).astype(np.int64)
    n = min(samples, (len(ids) - 1) // SEQ)
    x = ids[: n * SEQ].reshape(n, SEQ)
    y = ids[1: n * SEQ + 1].reshape(n, SEQ)
    return x, y


def pipetrain_run(build, model, data, batch, extra, run_dir):
    cmd = [os.path.join(build, "cli", "pipetrain"), "train", model, "--data", data, "--loss",
           "cross-entropy", "--batch", str(batch), "--epochs", "2", "--optimizer", "adamw",
           "--lr", "0.001", "--test-fraction", "0", "--quiet", "--run-dir", run_dir, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"pipetrain failed: {' '.join(cmd)}\n{r.stderr}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        epochs = [json.loads(line) for line in f if '"train_loss"' in line]
    predicted = re.search(r"simulator predicts ([0-9.]+) samples/s", r.stdout)
    return (epochs[-1]["samples_per_s"] * SEQ, epochs[-1]["train_loss"],
            float(predicted.group(1)) * SEQ if predicted else None)


def torch_run(model, x, y, batch, threads):
    torch.set_num_threads(threads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    steps = len(x) // batch
    elapsed, losses = 0.0, []
    for epoch in range(2):
        perm = np.random.default_rng(epoch).permutation(len(x))
        start = time.perf_counter()
        losses = []
        for s in range(steps):
            idx = perm[s * batch:(s + 1) * batch]
            logits = model(torch.from_numpy(x[idx]))
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                     torch.from_numpy(y[idx]).reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        elapsed = time.perf_counter() - start
    return steps * batch * SEQ / elapsed, float(np.mean(losses))


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":")[1].split() for l in f if l.startswith("flags")), [])
    return " ".join(sorted(f for f in flags if f.startswith(("avx", "amx", "fma"))))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build")
    p.add_argument("--samples", type=int, default=1600, help="training windows per epoch")
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args()
    cores = os.cpu_count()
    torch.manual_seed(0)
    model = GPT()
    x, y = corpus_windows(a.samples)
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "gpt.onnx")
        export_model = GPT()
        export_model.load_state_dict(model.state_dict())
        torch.onnx.export(export_model, (torch.from_numpy(x[: a.batch]),), onnx_path,
                          opset_version=17, input_names=["input_ids"], output_names=["logits"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        data = os.path.join(tmp, "tokens.npz")
        np.savez(data, input_ids=x, labels=y)
        params = sum(p.numel() for p in model.parameters())
        print(f"GPT {params / 1e6:.2f} M parameters (tied), vocab {VOCAB}, context {SEQ}, "
              f"batch {a.batch}, {len(x)} windows per epoch; {cores} cores, CPU flags: {cpu_flags()}; "
              f"PyTorch's OpenBLAS build: {blas_of_torch(os.environ)}")
        one, one_loss, _ = pipetrain_run(a.build, onnx_path, data, a.batch,
                                         ["--threads", str(cores)], os.path.join(tmp, "r1"))
        two, two_loss, predicted = pipetrain_run(
            a.build, onnx_path, data, a.batch,
            ["--stages", "2", "--threads", str(max(1, cores // 2))], os.path.join(tmp, "r2"))
        ref, ref_loss = torch_run(model, x, y, a.batch, cores)
    rows = [("pipetrain, 1 worker", one, one_loss), ("pipetrain, 2 stages (1f1b)", two, two_loss),
            ("PyTorch " + torch.__version__, ref, ref_loss)]
    print(f"{'':28} {'tokens/s':>10} {'epoch-2 loss':>13}")
    for name, rate, loss in rows:
        print(f"{name:28} {rate:10.0f} {loss:13.4f}")
    print(f"pipetrain 1 worker / PyTorch: {one / ref:.2f}x   2 stages / 1 worker: {two / one:.2f}x"
          + (f"   2 stages measured / simulated: {two / predicted:.2f}" if predicted else ""))


if __name__ == "__main__":
    main()
