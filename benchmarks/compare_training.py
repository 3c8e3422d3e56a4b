#!/usr/bin/python3
"""One training step: pipetrain vs PyTorch vs onnxruntime-training, side by side.

A step is forward, cross-entropy loss, backward and an SGD update (momentum 0.9).
Models: resnet18 (batch 32, 3x64x64, 1000 classes), a LeNet-style CNN (batch 64,
1x28x28, the zoo's layout) and a Transformer encoder classifier (4 layers,
d_model 256, 4 heads, sequence 64, batch 16). Each is defined once in PyTorch,
exported to ONNX in training mode, and that same ONNX file is trained by
pipetrain (benchmarks/train_step) and by onnxruntime-training (installed by
scripts/setup.sh under /opt/pipetrain/ort-training); PyTorch trains the module.
Prints the median step time in ms per thread count and the ratios
pipetrain/PyTorch and pipetrain/onnxruntime-training. Each row runs the three
programs --rounds times, alternating their order, and prints the medians of the
times and of the per-round ratios: on a shared VM whose speed drifts by 10-30%
over minutes, one measurement of each, minutes apart, moved a ratio by 0.2. With --device cuda both
pipetrain (--backend cuda) and PyTorch run on the GPU (PyTorch needs a CUDA
build; onnxruntime-training is left out) and resnet50 (batch 32, 3x224x224)
is available. With --precision bf16, pipetrain trains in bf16 mixed precision
(train_step --bf16; on the CPU it needs AVX512-BF16 or AMX) and PyTorch under
torch.autocast(bfloat16), its fp32 master weights and optimizer unchanged;
onnxruntime-training is left out.

Usage: benchmarks/compare_training.py BUILD_DIR [--models resnet18,lenet,transformer]
       [--threads 1,2] [--steps 10] [--rounds 3] [--device cpu|cuda] [--precision fp32|bf16]
       benchmarks/compare_training.py --train-step PATH ...   (a GPU bundle's train_step)
"""
import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ORT_TRAINING = "/opt/pipetrain/ort-training"


def build_models():
    import torch
    import torchvision

    class LeNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 32, 5, padding=2)
            self.conv2 = torch.nn.Conv2d(32, 64, 5, padding=2)
            self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
            self.fc2 = torch.nn.Linear(128, 10)

        def forward(self, x):
            x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
            x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
            return self.fc2(torch.relu(self.fc1(x.flatten(1))))

    class Transformer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                                     dropout=0.0, activation="gelu")
            self.encoder = torch.nn.TransformerEncoder(layer, num_layers=4,
                                                       enable_nested_tensor=False)
            self.head = torch.nn.Linear(256, 10)

        def forward(self, x):
            return self.head(self.encoder(x).mean(0))

    return {
        "resnet18": (lambda: torchvision.models.resnet18(), (32, 3, 64, 64), 1000),
        "resnet50": (lambda: torchvision.models.resnet50(), (32, 3, 224, 224), 1000),
        "lenet": (LeNet, (64, 1, 28, 28), 10),
        "transformer": (Transformer, (64, 16, 256), 10),
    }


def time_steps(step, steps, warmup=2):
    for _ in range(warmup):
        step()
    samples = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def torch_step_ms(name, threads, steps, device="cpu", precision="fp32"):
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        return None
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    build, shape, classes = build_models()[name]
    model = build().train().to(device)
    x = torch.randn(*shape, device=device)
    batch = shape[1] if name == "transformer" else shape[0]
    y = torch.randint(0, classes, (batch,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
    return time_steps(step, steps)


def export(name, path):
    import torch
    torch.manual_seed(0)
    build, shape, _ = build_models()[name]
    model = build().train()
    args = dict(input_names=["input"], output_names=["logits"])
    if "dynamo" not in inspect.signature(torch.onnx.export).parameters:
        torch.onnx.export(model, (torch.randn(*shape),), path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          **args)
        return
    # PyTorch 2.9+ defaults to the dynamo exporter (other opsets, no training
    # mode): ask for the TorchScript one while it exists.
    try:
        torch.onnx.export(model, (torch.randn(*shape),), path, opset_version=17, dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          **args)
    except Exception as e:  # noqa: BLE001 (any exporter failure: try the other one)
        print(f"{name}: the TorchScript exporter failed ({str(e)[:120]}); using dynamo",
              file=sys.stderr)
        torch.onnx.export(model, (torch.randn(*shape),), path, opset_version=18, dynamo=True,
                          **args)


def ort_worker(model_path, batch, classes, threads, steps):
    """Runs in a child with onnxruntime-training first on sys.path."""
    sys.path.insert(0, ORT_TRAINING)
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxruntime.training import artifacts
    from onnxruntime.training.api import CheckpointState, Module, Optimizer
    model = onnx.load(model_path)
    params = [i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT
              and len(i.dims) > 0 and "running" not in i.name]
    with tempfile.TemporaryDirectory() as d:
        artifacts.generate_artifacts(model, requires_grad=params, frozen_params=[],
                                     loss=artifacts.LossType.CrossEntropyLoss,
                                     optimizer=artifacts.OptimType.SGD, artifact_directory=d)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        state = CheckpointState.load_checkpoint(os.path.join(d, "checkpoint"))
        module = Module(os.path.join(d, "training_model.onnx"), state, session_options=opts)
        opt = Optimizer(os.path.join(d, "optimizer_model.onnx"), module)
        opt.set_learning_rate(0.01)
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        y = np.random.default_rng(1).integers(0, classes, size=(batch,)).astype(np.int64)
        module.train()

        def step():
            module(x, y)
            opt.step()
            module.lazy_reset_grad()
        print(json.dumps({"median_ms": time_steps(step, steps)}))


def run_json(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"], None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--ort-worker":
        a = sys.argv[2:]
        return ort_worker(a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]))
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        a = sys.argv[2:]
        ms = torch_step_ms(a[0], int(a[1]), int(a[2]), a[3], a[4])
        if ms is None:
            sys.exit("this PyTorch has no CUDA: no GPU reference")
        print(json.dumps({"median_ms": ms}))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", help="pipetrain's build folder")
    parser.add_argument("--train-step", help="the train_step program (default BUILD/benchmarks/train_step)")
    parser.add_argument("--models", default="resnet18,lenet,transformer")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3,
                        help="measurements of each program per row, interleaved")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    args = parser.parse_args()
    bf16 = args.precision == "bf16"
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from blas_core import blas_of_torch, cpu_line, same_blas_as_pipetrain, torch_openmp_blas
    same_blas_as_pipetrain()  # before torch loads OpenBLAS (imported lazily below)
    print(cpu_line() + f"; PyTorch's OpenBLAS build: {blas_of_torch(torch_openmp_blas(os.environ))}")
    gpu = args.device == "cuda"
    if not args.build and not args.train_step:
        parser.error("give BUILD_DIR or --train-step")
    step_bin = args.train_step or os.path.join(args.build, "benchmarks", "train_step")
    tmp = tempfile.mkdtemp(prefix="pipetrain-bench-")
    rows = []
    for name in args.models.split(","):
        _, shape, classes = build_models()[name]
        batch = shape[1] if name == "transformer" else shape[0]
        path = os.path.join(tmp, name + ".onnx")
        export(name, path)
        for threads in [int(t) for t in args.threads.split(",")]:
            # OpenBLAS sizes its own pool from the environment when it loads and
            # torch.set_num_threads does not reach it, so every program (PyTorch
            # too) runs in a child whose environment names the thread count.
            env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
            programs = {
                "pipetrain": [step_bin, path, "--batch", str(shape[0]), "--threads", str(threads),
                              "--steps", str(args.steps), "--classes", str(classes),
                              "--backend", args.device] + (["--bf16"] if bf16 else []),
                "PyTorch": [sys.executable, __file__, "--torch-worker", name, str(threads),
                            str(args.steps), args.device, args.precision],
            }
            if not gpu and not bf16:
                programs["onnxruntime-training"] = [sys.executable, __file__, "--ort-worker", path,
                                                    str(batch), str(classes), str(threads),
                                                    str(args.steps)]
            times = {k: [] for k in programs}
            errors = {}
            if gpu or bf16:
                errors["onnxruntime-training"] = "not run on the GPU" if gpu else "not run in bf16"
            for r in range(args.rounds):
                order = list(programs) if r % 2 == 0 else list(reversed(programs))
                for k in order:
                    if k in errors:
                        continue  # a program that failed once is not retried
                    ms, err = run_json(programs[k], torch_openmp_blas(env) if k == "PyTorch" else env)
                    if err:
                        errors[k] = err
                        print(f"{name}: {k}: {err}", file=sys.stderr)
                    else:
                        times[k].append(ms)
            rows.append((name, threads, times, errors))
            print_row(rows[-1])
    print(f"\n{args.precision}: step time in ms (median of {args.rounds} interleaved rounds, each the median of its"
          f" steps); ratios: medians of the per-round ratios; < 1 means pipetrain is faster")


def print_row(r):
    name, threads, times, errors = r
    ours, pt, ort = (times.get(k, []) for k in ("pipetrain", "PyTorch", "onnxruntime-training"))
    med = lambda v: statistics.median(v) if v else None
    f = lambda v: f"{v:9.1f}" if v is not None else "      n/a"

    def ratio(a, b):  # the median of the per-round ratios (rounds both completed)
        pairs = [x / y for x, y in zip(a, b)] if len(a) == len(b) else []
        return f"{statistics.median(pairs):6.2f}" if pairs else "   n/a"
    ort_err = errors.get("onnxruntime-training")
    note = f"  (onnxruntime-training: {ort_err[:60]})" if ort_err else ""
    print(f"{name:<12} {threads} thr  pipetrain {f(med(ours))}  PyTorch {f(med(pt))}"
          f"  ORT-training {f(med(ort))}  ours/PyTorch {ratio(ours, pt)}  ours/ORT {ratio(ours, ort)}"
          f"{note}", flush=True)


if __name__ == "__main__":
    main()
