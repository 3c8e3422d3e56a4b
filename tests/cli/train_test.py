#!/usr/bin/python3
"""`pipetrain train` end to end: the trained model loads in onnxruntime and gives
pipetrain's outputs, nothing but the weights changes, BatchNorm running statistics
are written, seeded runs are bitwise repeatable, and bad input gets one clear error.

Usage: train_test.py PATH/TO/pipetrain
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

# onnxruntime lives in its own folder (scripts/setup.sh), appended so that
# Debian's numpy and protobuf stay the ones imported.
ORT_DIR = os.environ.get("PIPETRAIN_ORT", "/opt/pipetrain/onnxruntime")
if os.path.isdir(ORT_DIR):
    sys.path.append(ORT_DIR)

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PIPETRAIN = None


def run(*args, timeout=300):
    return subprocess.run([PIPETRAIN, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def bn_model(path):
    """conv-BatchNorm-ReLU-pool-fc for 1x28x28 images, BatchNorm in inference form
    (PyTorch's exporter folds it into the conv, so the model is written directly)."""
    rng = np.random.default_rng(0)
    f32 = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(v, n) for n, v in [
        ("conv.weight", f32(4, 1, 3, 3)), ("conv.bias", f32(4)),
        ("bn.weight", np.ones(4, np.float32)), ("bn.bias", np.zeros(4, np.float32)),
        ("bn.running_mean", np.zeros(4, np.float32)), ("bn.running_var", np.ones(4, np.float32)),
        ("fc.weight", f32(10, 4 * 14 * 14)), ("fc.bias", f32(10))]]
    nodes = [
        helper.make_node("Conv", ["input", "conv.weight", "conv.bias"], ["c"], name="/conv/Conv",
                         pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean",
                                                "bn.running_var"], ["b"], name="/bn/BatchNorm",
                         momentum=0.9),
        helper.make_node("Relu", ["b"], ["r"], name="/relu/Relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="/flatten/Flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm",
                         transB=1)]
    graph = helper.make_graph(
        nodes, "bn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


class TrainTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def ok(self, result):
        self.assertEqual(result.returncode, 0, result.stderr + result.stdout)
        return result

    def zoo(self, name):
        out = self.path(name + ".onnx")
        self.ok(run("zoo", "export", name, "-o", out))
        return out

    def train(self, model, *extra):
        out = self.path("trained.onnx")
        self.ok(run("train", model, "--loss", "cross-entropy", "--quiet", "--run-dir",
                    self.path("run"), "-o", out, *extra))
        return out

    def assert_same_forward_as_onnxruntime(self, model, x, rtol=1e-4, atol=1e-5):
        import onnxruntime as ort
        np.save(self.path("x.npy"), x)
        self.ok(run("run", model, "--batch", x.shape[0], "--input", "input=" + self.path("x.npy"),
                    "--output-dir", self.path("out")))
        ours = np.load(self.path("out/logits.npy"))
        theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, {"input": x})[0]
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)

    def test_trained_mlp_runs_in_onnxruntime_and_only_weights_change(self):
        model = self.zoo("mlp")
        trained = self.train(model, "--data", "digits", "--batch", 32, "--epochs", 2,
                             "--optimizer", "adam", "--lr", "0.003")
        before, after = onnx.load(model), onnx.load(trained)
        self.assertEqual(before.graph.node, after.graph.node)
        self.assertEqual(before.graph.input, after.graph.input)
        self.assertEqual(before.graph.output, after.graph.output)
        self.assertEqual([i.name for i in before.graph.initializer],
                         [i.name for i in after.graph.initializer])
        changed = [not np.array_equal(numpy_helper.to_array(a), numpy_helper.to_array(b))
                   for a, b in zip(before.graph.initializer, after.graph.initializer)]
        self.assertTrue(all(changed), "every parameter should have moved")
        x = np.random.default_rng(0).random((5, 64), dtype=np.float32)
        self.assert_same_forward_as_onnxruntime(trained, x)

    def retyped_mlp(self, np_dtype, onnx_dtype):
        """The zoo's MLP with its weights, input and output in another float dtype."""
        model = onnx.load(self.zoo("mlp"))
        for init in model.graph.initializer:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np_dtype),
                                                  init.name))
        for vi in [*model.graph.input, *model.graph.output]:
            vi.type.tensor_type.elem_type = onnx_dtype
        path = self.path(f"mlp_{np.dtype(np_dtype).name}.onnx")
        onnx.save(model, path)
        return path

    def assert_trained_in_file_dtype(self, model, onnx_dtype):
        trained = self.train(model, "--data", "digits", "--batch", 32, "--epochs", 1,
                             "--optimizer", "sgd", "--lr", "0.05")
        before, after = onnx.load(model), onnx.load(trained)
        for a, b in zip(before.graph.initializer, after.graph.initializer):
            self.assertEqual(b.data_type, onnx_dtype, b.name)
            self.assertFalse(np.array_equal(numpy_helper.to_array(a), numpy_helper.to_array(b)),
                             b.name + " never moved")
        return trained

    def test_evaluate_scores_the_split_train_held_out(self):
        # The trained model on train's held-out split: the loss and accuracy train
        # printed after its last epoch, to the digit; --split train scores the rest.
        model = self.zoo("mlp")
        r = self.ok(run("train", model, "--loss", "cross-entropy", "--quiet", "--run-dir",
                        self.path("run"), "-o", self.path("t.onnx"), "--data", "digits",
                        "--batch", 32, "--epochs", 2, "--seed", 4))
        last = re.findall(r"test loss ([0-9.]+)  test accuracy ([0-9.]+)%", r.stdout)[-1]
        common = ["evaluate", self.path("t.onnx"), "--data", "digits", "--batch", 32,
                  "--loss", "cross-entropy", "--seed", 4]
        e = self.ok(run(*common))
        self.assertIn(f"test split of 'digits', 359 samples (359 labels scored): loss {last[0]}"
                      f"  accuracy {last[1]}%", e.stdout)
        self.assertIn("359/359 samples", e.stderr)  # the progress bar
        t = self.ok(run(*common, "--split", "train", "--quiet"))
        self.assertIn("train split of 'digits', 1438 samples", t.stdout)
        self.assertEqual(t.stderr, "")
        model_only = ["evaluate", self.path("t.onnx"), "--batch", 32]
        for args, why in ((common + ["--split", "dev"], "--split: dev not in {test,train}"),
                          (model_only + ["--data", "digits", "--loss", "hinge"], "hinge"),
                          (model_only + ["--data", self.path("none.csv"), "--loss",
                                         "cross-entropy"], "none.csv")):
            b = run(*args)
            self.assertEqual(b.returncode, 2, b.stdout + b.stderr)
            self.assertIn(why, b.stderr)
            self.assertEqual(b.stdout, "")

    def test_float64_model_trains_in_float32_and_is_written_back_as_float64(self):
        trained = self.assert_trained_in_file_dtype(
            self.retyped_mlp(np.float64, TensorProto.DOUBLE), TensorProto.DOUBLE)
        x = np.random.default_rng(0).random((5, 64))
        self.assert_same_forward_as_onnxruntime(trained, x)

    def test_float16_model_trains_with_float32_master_weights(self):
        trained = self.assert_trained_in_file_dtype(
            self.retyped_mlp(np.float16, TensorProto.FLOAT16), TensorProto.FLOAT16)
        # `run` computes in float32, onnxruntime in the file's float16.
        x = np.random.default_rng(0).random((5, 64)).astype(np.float16)
        self.assert_same_forward_as_onnxruntime(trained, x, rtol=2e-2, atol=2e-2)

    def test_batchnorm_running_statistics_are_trained_and_written(self):
        model = self.path("bn.onnx")
        bn_model(model)
        trained = self.train(model, "--data", "fashion-mnist", "--max-samples", 512, "--batch", 32,
                             "--max-steps", 8, "--optimizer", "sgd", "--lr", "0.05")
        stats = {i.name: numpy_helper.to_array(i) for i in onnx.load(trained).graph.initializer}
        mean = [v for k, v in stats.items() if k.endswith("running_mean")]
        var = [v for k, v in stats.items() if k.endswith("running_var")]
        self.assertEqual(len(mean), 1)
        self.assertFalse(np.allclose(mean[0], 0), "running_mean never moved from its start")
        self.assertFalse(np.allclose(var[0], 1), "running_var never moved from its start")
        x = np.random.default_rng(1).random((3, 1, 28, 28), dtype=np.float32)
        self.assert_same_forward_as_onnxruntime(trained, x)

    def test_seeded_runs_are_bitwise_repeatable(self):
        model = self.zoo("lenet")
        args = ["--data", "fashion-mnist", "--max-samples", 640, "--batch", 32, "--epochs", 1,
                "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--seed", 7]
        read = lambda path: open(path, "rb").read()  # noqa: SIM115
        first = read(self.train(model, *args))
        second = read(self.train(model, *args))
        self.assertEqual(first, second, "two runs with the same seed wrote different weights")
        third = read(self.train(model, *args[:-1], 8))
        self.assertNotEqual(first, third, "another seed should shuffle differently")

    def test_no_fuse_keeps_activations_row_major_with_the_same_weights(self):
        """--no-fuse imports without the fusion passes and gives every backend of
        the run (one worker's, a pipeline's profile, workers and test-set pass)
        row-major activations: oneDNN then reorders the convolutions'
        activations in and out (its verbose log counts them; on AVX-512 the
        LeNet's training steps block nothing either way, its test-set pass
        does), and the weights come out bitwise the same. Counted per
        convolution run: the profile's neighbour threads train for as long as
        the profile takes, so the totals vary from run to run (one CI run under
        ASan gave 1,675 fused against 1,555 unfused; per convolution 2.02
        against 2.24 in every run here)."""
        model = self.zoo("lenet")
        env = dict(os.environ, ONEDNN_VERBOSE="1")
        for extra in ([], ["--stages", 2, "--schedule", "gpipe"]):
            reorders, weights = {}, {}
            for flag in ([], ["--no-fuse"]):
                out = self.path("nf.onnx")
                r = subprocess.run(
                    [PIPETRAIN, "train", model, "--loss", "cross-entropy", "--quiet", "--run-dir",
                     self.path("nf"), "-o", out, "--data", "fashion-mnist", "--max-samples", "640",
                     "--batch", "32", "--seed", "7", "--max-steps", "3", *map(str, extra + flag)],
                    capture_output=True, text=True, env=env, timeout=300)
                self.assertEqual(r.returncode, 0, r.stderr)
                convs = r.stdout.count("exec,cpu,convolution")
                self.assertGreater(convs, 0, extra + flag)
                reorders[bool(flag)] = r.stdout.count("exec,cpu,reorder") / convs
                weights[bool(flag)] = open(out, "rb").read()  # noqa: SIM115
            self.assertGreater(reorders[True], reorders[False], extra)
            self.assertEqual(weights[True], weights[False], extra)

    def test_mse_regression_learns(self):
        model = self.path("reg.onnx")
        self.ok(run("zoo", "export", "mlp", "--in-features", 2, "--classes", 1, "-o", model))
        r = self.ok(run("train", model, "--data", "synthetic:regression", "--batch", 16, "--epochs", 5,
                        "--loss", "mse", "--optimizer", "adam", "--lr", "0.01", "--quiet",
                        "--run-dir", self.path("run")))
        lines = [json.loads(line) for line in open(self.path("run/metrics.jsonl"))]
        first_step = lines[0]["loss"]
        last_epoch = [m for m in lines if "test_loss" in m][-1]
        # The targets carry N(0, 0.5^2) noise: a fitted model's MSE approaches 0.25.
        self.assertLess(last_epoch["test_loss"], min(0.5, 0.25 * first_step), r.stdout)
        self.assertNotIn("accuracy", r.stdout)

    def test_bad_input_gets_one_clear_error(self):
        mlp = self.zoo("mlp")
        r = run("train", mlp, "--data", "fashion-mnist", "--batch", 8, "--loss", "cross-entropy",
                "--max-samples", 64, "--quiet", "--run-dir", self.path("r"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertTrue(r.stderr.startswith("error: "), r.stderr)
        self.assertIn("(1, 28, 28)", r.stderr)
        self.assertIn("(64)", r.stderr)
        r = run("train", mlp, "--data", "no-such-dataset", "--batch", 8, "--loss", "cross-entropy")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("no-such-dataset", r.stderr)
        r = run("train", mlp, "--data", "digits", "--batch", 8)  # no loss in the model, none asked
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--loss", r.stderr)
        r = run("train", mlp, "--data", "digits", "--batch", 8, "--loss", "hinge")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("hinge", r.stderr)

    def test_bad_outputs_and_data_fail_before_the_first_step(self):
        mlp = self.zoo("mlp")
        common = ["train", mlp, "--batch", 32, "--loss", "cross-entropy", "--quiet"]
        # Unwritable outputs, one worker and pipelined: exit 2, and no step was run.
        for extra, names in [(["-o", "/nonexistent/dir/x.onnx"], ["-o", "/nonexistent/dir"]),
                             (["--run-dir", "/proc/no/such"], ["--run-dir", "/proc/no/such"]),
                             (["--stages", 2, "--checkpoint", self.dir], ["--checkpoint",
                                                                         "is a directory"])]:
            run_dir = [] if "--run-dir" in extra else ["--run-dir", self.path("ok")]
            r = run(*common, "--data", "digits", *run_dir, *extra)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            for name in names:
                self.assertIn(name, r.stderr)
            self.assertNotIn("epoch 1", r.stdout)
            self.assertFalse(os.path.exists(self.path("ok/metrics.jsonl")))
        # A NaN feature and a label past the classes name the sample of the file (not of
        # the shuffled train split).
        rng = np.random.default_rng(0)
        x = rng.standard_normal((200, 64)).astype(np.float32)
        y = rng.integers(0, 10, 200).astype(np.int64)
        x[37, 5] = np.nan
        np.savez(self.path("nan.npz"), input=x, labels=y)
        x[37, 5] = 0
        y[151] = 10
        np.savez(self.path("label.npz"), input=x, labels=y)
        for data, want in [("nan.npz", "NaN in sample 37 (element 5)"),
                           ("label.npz", "id 10 (sample 151) is outside the model's 10 classes")]:
            r = run(*common, "--data", self.path(data), "--run-dir", self.path("bad"))
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(want, r.stderr)
            self.assertFalse(os.path.exists(self.path("bad/metrics.jsonl")))


if __name__ == "__main__":
    PIPETRAIN = sys.argv.pop(1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sharding
    sharding.main()
