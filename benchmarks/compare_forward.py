#!/usr/bin/python3
"""Forward time: pipetrain vs PyTorch vs ONNX Runtime, side by side, per thread count.

Exports resnet18 (batch 8, 3x224x224) and a Transformer encoder (6 layers,
d_model 512, 8 heads, batch 8, sequence 128) in inference mode, then times the
same ONNX model in pipetrain (Google Benchmark program forward_bench) and in
onnxruntime, and the same PyTorch module in PyTorch, all on the same number of
threads. Each thread count runs in a child process whose environment names it
(OpenBLAS sizes its pool when it loads), PyTorch on OpenBLAS's OpenMP build
(blas_core.torch_openmp_blas). Prints milliseconds and the ratios
pipetrain/PyTorch and pipetrain/onnxruntime, and pipetrain with every
activation row-major (its blocked layout off) beside it.

Usage: benchmarks/compare_forward.py BUILD_DIR [--models resnet18,transformer] [--threads 1,2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blas_core import blas_of_torch, cpu_line, same_blas_as_pipetrain, torch_openmp_blas  # noqa: E402

BLAS_CORE = same_blas_as_pipetrain()  # before torch loads OpenBLAS
import numpy as np  # noqa: E402

# onnxruntime lives in its own folder (scripts/setup.sh), appended so that
# Debian's numpy and protobuf stay the ones imported.
ORT_DIR = os.environ.get("PIPETRAIN_ORT", "/opt/pipetrain/onnxruntime")
if os.path.isdir(ORT_DIR):
    sys.path.append(ORT_DIR)
import torch  # noqa: E402
import torchvision  # noqa: E402


class Transformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048,
                                                 dropout=0.1, activation="gelu")
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=6, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(), (8, 3, 224, 224)),
    "transformer": (Transformer, (128, 8, 512)),
}


def time_it(fn, min_seconds=3.0, warmup=2):
    for _ in range(warmup):
        fn()
    samples = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_seconds or len(samples) < 5:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e3


def measure(build_dir, names, threads):
    """Rows (name, ours, torch, ort, GFLOP/s, row-major) at `threads`, in this process."""
    torch.set_num_threads(threads)
    import onnxruntime as ort

    out_dir = os.path.join(build_dir, "bench_models")
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for name in names:
        build, shape = MODELS[name]
        torch.manual_seed(0)
        model = build().eval()
        x = torch.randn(*shape)
        path = os.path.join(out_dir, f"{name}.onnx")
        if not os.path.exists(path):
            torch.onnx.export(model, (x,), path, opset_version=17, input_names=["x"])
        with torch.no_grad():
            t_torch = time_it(lambda: model(x))
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feed = {"x": x.numpy()}
        t_ort = time_it(lambda: sess.run(None, feed))
        res = subprocess.run(
            [os.path.join(build_dir, "benchmarks", "forward_bench"), f"--model={name}={path}",
             f"--threads={threads}", "--row-major", "--benchmark_format=json"],
            check=True, capture_output=True, text=True)
        bench = {b["name"].split("/")[0]: b for b in json.loads(res.stdout)["benchmarks"]}
        rows.append((name, bench["forward"]["real_time"], t_torch, t_ort,
                     bench["forward"].get("GFLOP/s", 0), bench["forward_row_major"]["real_time"]))
    return rows


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":  # one thread count, in a child
        print(json.dumps(measure(sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--models", default="resnet18,transformer")
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    torch_env = torch_openmp_blas(os.environ)
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        env = dict(torch_env, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
        res = subprocess.run([sys.executable, __file__, "--worker", args.build, args.models,
                              str(threads)], check=True, capture_output=True, text=True, env=env)
        rows += [(threads, *r) for r in json.loads(res.stdout.strip().splitlines()[-1])]
    print(f"\nforward pass, median ms ({os.uname().nodename})")
    print(cpu_line() + f"; PyTorch's OpenBLAS build: {blas_of_torch(torch_env)}")
    print(f"{'model':<12} {'threads':>7} {'pipetrain':>10} {'PyTorch':>10} {'ORT':>10} "
          f"{'ours/PyTorch':>13} {'ours/ORT':>9} {'GFLOP/s':>8} {'row-major':>10}")
    for threads, name, ours, pt, ort_ms, gflops, row_major in rows:
        print(f"{name:<12} {threads:>7} {ours:>10.1f} {pt:>10.1f} {ort_ms:>10.1f} {ours / pt:>13.2f} "
              f"{ours / ort_ms:>9.2f} {gflops:>8.1f} {row_major:>10.1f}")
    print("pipetrain's mean ms (Google Benchmark), the others' median; row-major: pipetrain "
          "with its blocked activation layout off")


if __name__ == "__main__":
    sys.exit(main())
