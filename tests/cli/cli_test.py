#!/usr/bin/python3
"""End-to-end checks of the pipetrain command line: what a user sees.

Builds small models with the onnx Python package, runs the real binary and
checks outputs, exit codes and the one-line error messages for bad input.
Usage: cli_test.py PATH/TO/pipetrain
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


def run(*args):
    return subprocess.run([PIPETRAIN, *map(str, args)], capture_output=True, text=True, timeout=120)


def save(model, path):
    onnx.save(model, path)
    return path


def mlp_model(batch="N"):
    """x (batch, 4) -> Gemm(W, b) -> Relu -> y (batch, 3)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["h"], name="/fc/Gemm", transB=1),
             helper.make_node("Relu", ["h"], ["y"], name="/act/Relu")]
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
                              [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), w, b


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def assert_bad_input(self, result, *needles):
        self.assertEqual(result.returncode, 2, result.stderr + result.stdout)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        self.assertGreaterEqual(len(lines), 1)
        self.assertTrue(lines[0].startswith("error: "), result.stderr)
        for needle in needles:
            self.assertIn(needle, result.stderr)

    def test_help_on_every_subcommand(self):
        for sub in ["inspect", "run"]:
            r = run(sub, "--help")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("model", r.stdout)

    def test_doctor_shows_the_kernels_and_what_the_check_avoided(self):
        r = run("doctor")
        self.assertEqual(r.returncode, 0, r.stderr)
        for needle in ["CPU ", "flags ", "OpenBLAS ", "oneDNN ", "layout ", "openblas-gemm",
                       "onednn-gemm", "ConvGrad", "BatchNormalizationGrad", "0 avoided"]:
            self.assertIn(needle, r.stdout)
        # A wrong kernel (injected) is named, avoided, and the run goes on.
        env = {**os.environ, "PIPETRAIN_INJECT_KERNEL_FAULT": "MaxPoolGrad"}
        r = subprocess.run([PIPETRAIN, "doctor"], capture_output=True, text=True, env=env,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1 avoided", r.stdout)
        self.assertRegex(r.stdout, r"max-pool gradient, row-major .* WRONG .* avoided, the "
                                   r"portable backend's kernel instead \(checked")
        # Any command that makes a CPU backend says so once on stderr, and computes right.
        model, _, _ = mlp_model(batch=2)
        path = save(model, self.path("m.onnx"))
        env["PIPETRAIN_INJECT_KERNEL_FAULT"] = "openblas-gemm,onednn-gemm"
        x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        r = subprocess.run([PIPETRAIN, "run", path, "--input", f"x={self.path('x.npy')}",
                            "--output-dir", self.path("out")], capture_output=True, text=True,
                           env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        notices = [l for l in r.stderr.splitlines() if l.startswith("pipetrain: kernel check:")]
        self.assertEqual(len(notices), 2, r.stderr)
        self.assertIn("plain loops", notices[0])
        w = numpy_helper.to_array(model.graph.initializer[0])
        b = numpy_helper.to_array(model.graph.initializer[1])
        np.testing.assert_allclose(np.load(self.path("out/y.npy")),
                                   np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-6)

    def test_kernel_check_verdict_is_kept_for_later_processes(self):
        cache = self.path("kernel-cache")
        env = {**os.environ, "PIPETRAIN_CACHE_DIR": cache}
        env.pop("PIPETRAIN_KERNEL_CHECK_CACHE", None)
        r = subprocess.run([PIPETRAIN, "doctor"], capture_output=True, text=True, env=env,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"verdict kept for later processes in (\S+)", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertEqual(os.listdir(cache), [os.path.basename(m.group(1))])
        # A later process with the same binary, CPU and variables restores the verdict
        # instead of checking: an avoidance planted in the file takes effect there.
        with open(m.group(1)) as f:
            verdict = json.load(f)
        family = next(f for f in verdict["families"] if f["path"] == "MaxPoolGrad")
        family.update(avoided=True, worst=1e4, worst_case="planted",
                      fallback="the portable backend's kernel")
        verdict["avoided_ops"] = ["MaxPoolGrad"]
        with open(m.group(1), "w") as f:
            json.dump(verdict, f)
        model, _, _ = mlp_model(batch=2)
        path = save(model, self.path("m.onnx"))
        np.save(self.path("x.npy"), np.ones((2, 4), np.float32))
        cmd = [PIPETRAIN, "run", path, "--input", f"x={self.path('x.npy')}",
               "--output-dir", self.path("out")]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kernel check: max-pool gradient, row-major disagrees with the reference "
                      "on this CPU (planted", r.stderr)
        # Another setup (a variable that steers the kernels) checks afresh, in a file of its own.
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env={**env, "OPENBLAS_CORETYPE": "Haswell"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("kernel check:", r.stderr)
        self.assertEqual(len(os.listdir(cache)), 2)
        # And off: every process checks, nothing is read or written.
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env={**env, "PIPETRAIN_KERNEL_CHECK_CACHE": "off"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("kernel check:", r.stderr)
        self.assertEqual(len(os.listdir(cache)), 2)

    def test_run_matches_numpy(self):
        model, w, b = mlp_model()
        m = save(model, self.path("mlp.onnx"))
        x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        r = run("run", m, "--batch", 5, "--input", f"x={self.path('x.npy')}", "--output-dir",
                self.path("out"))
        self.assertEqual(r.returncode, 0, r.stderr)
        y = np.load(self.path("out/y.npy"))
        want = np.maximum(x @ numpy_helper.to_array(w).T + numpy_helper.to_array(b), 0)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)

    def test_resize_antialias_matches_pytorch(self):
        """Resize with antialias = 1 (opset 18) against torch.nn.functional.interpolate's
        antialias, in float64: the same filters where the taps leaving the image are
        dropped (exclude_outside = 1), PIL's cubic a = -0.5."""
        import torch
        x = np.random.default_rng(2).standard_normal((1, 2, 17, 13)).astype(np.float32)
        np.save(self.path("img.npy"), x)
        for mode, torch_mode, a in [("linear", "bilinear", -0.75), ("cubic", "bicubic", -0.5)]:
            for size in [(5, 6), (8, 4), (17, 20)]:  # down by 3.4 and 2.2, by 2.1 and 3.3, up
                sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 2, *size])
                node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode,
                                        antialias=1, exclude_outside=1, cubic_coeff_a=a)
                graph = helper.make_graph(
                    [node], "aa", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, *size])],
                    [sizes])
                m = self.path(f"aa_{mode}_{size[0]}.onnx")
                onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), m)
                out = self.path(f"out_{mode}_{size[0]}")
                r = run("run", m, "--input", f"x={self.path('img.npy')}", "--output-dir", out)
                self.assertEqual(r.returncode, 0, r.stderr)
                want = torch.nn.functional.interpolate(
                    torch.from_numpy(x).double(), size=size, mode=torch_mode, antialias=True,
                    align_corners=False).numpy()
                np.testing.assert_allclose(np.load(os.path.join(out, "y.npy")), want, rtol=1e-5,
                                           atol=1e-5, err_msg=f"{mode} to {size}")

    def test_col2im_matches_torch_fold(self):
        """Col2Im (opset 18) against torch.nn.functional.fold, with padding,
        stride and dilation, so blocks overlap and some taps land in the padding."""
        import torch
        cols = np.random.default_rng(3).standard_normal((2, 3 * 2 * 3, 20)).astype(np.float32)
        np.save(self.path("cols.npy"), cols)
        image = helper.make_tensor("image", TensorProto.INT64, [2], [5, 7])
        block = helper.make_tensor("block", TensorProto.INT64, [2], [2, 3])
        node = helper.make_node("Col2Im", ["cols", "image", "block"], ["y"], dilations=[2, 1],
                                pads=[1, 1, 1, 1], strides=[1, 2])
        graph = helper.make_graph(
            [node], "fold", [helper.make_tensor_value_info("cols", TensorProto.FLOAT, cols.shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5, 7])], [image, block])
        m = self.path("fold.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), m)
        r = run("run", m, "--input", f"cols={self.path('cols.npy')}", "--output-dir",
                self.path("fold_out"))
        self.assertEqual(r.returncode, 0, r.stderr)
        want = torch.nn.functional.fold(torch.from_numpy(cols).double(), (5, 7), (2, 3),
                                        dilation=(2, 1), padding=(1, 1), stride=(1, 2)).numpy()
        np.testing.assert_allclose(np.load(self.path("fold_out/y.npy")), want, rtol=1e-5,
                                   atol=1e-5)

    def test_quantized_model_matches_onnxruntime(self):
        """A uint8 image through DequantizeLinear, a float MatMul, QuantizeLinear to
        int8, QLinearMatMul and MatMulInteger, against onnxruntime: narrow integers
        compute in i32 (importer/narrow_ints.cc) and come out as the same values."""
        import onnxruntime as ort
        rng = np.random.default_rng(4)
        x = rng.integers(0, 256, (3, 8), dtype=np.uint8)
        np.save(self.path("xq.npy"), x)
        inits = [numpy_helper.from_array(np.float32(0.02), "xs"),
                 numpy_helper.from_array(np.uint8(128), "xz"),
                 numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "W"),
                 numpy_helper.from_array(np.float32(0.05), "hs"),
                 numpy_helper.from_array(np.int8(-3), "hz"),
                 numpy_helper.from_array(rng.integers(-128, 128, (6, 5), dtype=np.int8), "Wq"),
                 numpy_helper.from_array(np.float32(0.01), "ws"),
                 numpy_helper.from_array(np.int8(2), "wz"),
                 numpy_helper.from_array(np.float32(0.1), "ys"),
                 numpy_helper.from_array(np.int8(-10), "yz")]
        nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
                 helper.make_node("MatMul", ["xf", "W"], ["h"]),
                 helper.make_node("QuantizeLinear", ["h", "hs", "hz"], ["hq"]),
                 helper.make_node("QLinearMatMul", ["hq", "hs", "hz", "Wq", "ws", "wz", "ys", "yz"],
                                  ["y"]),
                 helper.make_node("MatMulInteger", ["hq", "Wq", "hz", "wz"], ["acc"])]
        graph = helper.make_graph(
            nodes, "q", [helper.make_tensor_value_info("x", TensorProto.UINT8, [3, 8])],
            [helper.make_tensor_value_info("hq", TensorProto.INT8, [3, 6]),
             helper.make_tensor_value_info("y", TensorProto.INT8, [3, 5]),
             helper.make_tensor_value_info("acc", TensorProto.INT32, [3, 5])], inits)
        m = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
                 self.path("q.onnx"))
        r = run("run", m, "--input", f"x={self.path('xq.npy')}", "--output-dir", self.path("qo"))
        self.assertEqual(r.returncode, 0, r.stderr)
        want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})
        for name, w in zip(["hq", "y", "acc"], want):
            got = np.load(self.path(f"qo/{name}.npy"))
            self.assertTrue(np.issubdtype(got.dtype, np.integer), name)
            # onnxruntime rounds h / hs in float32 too; a value within float32 rounding
            # of a .5 may go either way, so allow one step, on at most one element.
            diff = np.abs(got.astype(np.int64) - w.astype(np.int64))
            self.assertLessEqual(diff.max(), 1 if name != "acc" else 0, name)
            self.assertLessEqual(int((diff > 0).sum()), 1, name)

    def test_inspect_lists_layers_params_and_flops(self):
        m = save(mlp_model()[0], self.path("mlp.onnx"))
        r = run("inspect", m, "--batch", 8, "--layer-depth", 1)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("fc", r.stdout)
        self.assertIn("act", r.stdout)
        self.assertIn("15", r.stdout)  # 12 weights + 3 biases
        self.assertIn("(8, 4)", r.stdout)

    def test_fusion_and_no_fuse_give_the_same_outputs(self):
        """x @ W^T + b then exact GELU, as PyTorch exports a Linear and F.gelu:
        fused into Gemm + Gelu by default, left as the file has it with
        --no-fuse; both match numpy."""
        rng = np.random.default_rng(2)
        w = numpy_helper.from_array(rng.standard_normal((6, 4)).astype(np.float32), "W")
        b = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")
        consts = [numpy_helper.from_array(np.array(v, np.float32), n)
                  for n, v in [("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5)]]
        nodes = [helper.make_node("Transpose", ["W"], ["wt"], name="/fc/Transpose", perm=[1, 0]),
                 helper.make_node("MatMul", ["x", "wt"], ["h0"], name="/fc/MatMul"),
                 helper.make_node("Add", ["h0", "b"], ["h"], name="/fc/Add"),
                 helper.make_node("Div", ["h", "sqrt2"], ["u"], name="/act/Div"),
                 helper.make_node("Erf", ["u"], ["e"], name="/act/Erf"),
                 helper.make_node("Add", ["e", "one"], ["e1"], name="/act/Add"),
                 helper.make_node("Mul", ["h", "e1"], ["he"], name="/act/Mul"),
                 helper.make_node("Mul", ["he", "half"], ["y"], name="/act/Mul_1")]
        graph = helper.make_graph(
            nodes, "ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 6])], [w, b, *consts])
        m = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                 self.path("ffn.onnx"))
        fused, plain = run("inspect", m, "--batch", 2), run("inspect", m, "--batch", 2, "--no-fuse")
        self.assertEqual(fused.returncode, 0, fused.stderr)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertIn("4 nodes", fused.stdout.splitlines()[0])  # Reshape, Gemm, Reshape, Gelu
        self.assertIn("8 nodes", plain.stdout.splitlines()[0])
        x = rng.standard_normal((2, 3, 4)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        h = x.astype(np.float64) @ numpy_helper.to_array(w).T.astype(np.float64) + \
            numpy_helper.to_array(b)
        from math import erf
        want = h * 0.5 * (1 + np.vectorize(erf)(h / np.sqrt(2)))
        for flag in [[], ["--no-fuse"]]:
            out = self.path("out" + "".join(flag))
            r = run("run", m, "--batch", 2, "--input", f"x={self.path('x.npy')}",
                    "--output-dir", out, *flag)
            self.assertEqual(r.returncode, 0, r.stderr)
            np.testing.assert_allclose(np.load(os.path.join(out, "y.npy")), want,
                                       rtol=1e-5, atol=1e-6, err_msg=str(flag))

    def test_batchnorm_folds_into_the_conv_for_run_and_matches_onnxruntime(self):
        """Conv -> BatchNormalization (inference) -> Relu, twice, the BatchNorms'
        scale and bias one shared initializer reached through Identity nodes
        (PyTorch's export of fresh BatchNorms): `run` folds each BatchNorm into
        its Conv (the profile lists none), --no-fuse keeps them, and both give
        onnxruntime's outputs."""
        import onnxruntime as ort
        rng = np.random.default_rng(7)
        arr = lambda *shape: rng.standard_normal(shape).astype(np.float32)
        inits = [numpy_helper.from_array(arr(4, 3, 3, 3), "w1"),
                 numpy_helper.from_array(arr(4), "b1"),
                 numpy_helper.from_array(arr(4, 4, 3, 3), "w2"),
                 numpy_helper.from_array(arr(4), "scale"),
                 numpy_helper.from_array(arr(4), "shift")]
        for i in (1, 2):
            inits += [numpy_helper.from_array(arr(4), f"mean{i}"),
                      numpy_helper.from_array(np.abs(arr(4)) + 0.5, f"var{i}")]
        nodes = []
        for i in (1, 2):
            nodes += [helper.make_node("Identity", ["scale"], [f"bn{i}.scale"]),
                      helper.make_node("Identity", ["shift"], [f"bn{i}.bias"])]
        nodes += [
            helper.make_node("Conv", ["x", "w1", "b1"], ["h1"], name="/c1/Conv", pads=[1] * 4),
            helper.make_node("BatchNormalization", ["h1", "bn1.scale", "bn1.bias", "mean1", "var1"],
                             ["n1"], name="/bn1/BatchNormalization", epsilon=1e-3),
            helper.make_node("Relu", ["n1"], ["a1"], name="/r1/Relu"),
            helper.make_node("Conv", ["a1", "w2"], ["h2"], name="/c2/Conv", pads=[1] * 4),
            helper.make_node("BatchNormalization", ["h2", "bn2.scale", "bn2.bias", "mean2", "var2"],
                             ["y"], name="/bn2/BatchNormalization")]
        graph = helper.make_graph(
            nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 6])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 6, 6])], inits)
        m = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]),
                 self.path("cnn_bn.onnx"))
        x = arr(2, 3, 6, 6)
        np.save(self.path("xbn.npy"), x)
        want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        for flag in [[], ["--no-fuse"]]:
            out = self.path("bn_out" + "".join(flag))
            r = run("run", m, "--input", f"x={self.path('xbn.npy')}", "--output-dir", out,
                    "--profile", *flag)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(bool(re.search(r"^ +BatchNormalization +\d+ nodes", r.stdout, re.M)),
                             bool(flag), r.stdout)
            # float32 rounding of 27- and 36-term convolutions, scaled by the BatchNorms
            np.testing.assert_allclose(np.load(os.path.join(out, "y.npy")), want,
                                       rtol=1e-5, atol=1e-5, err_msg=str(flag))

    def test_missing_file(self):
        r = run("inspect", self.path("nope.onnx"))
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.returncode, 2)

    def test_not_onnx(self):
        p = self.path("junk.onnx")
        with open(p, "wb") as f:
            f.write(b"\x00\xffthis is not a protobuf" * 10)
        self.assert_bad_input(run("inspect", p), "junk.onnx")

    def test_truncated(self):
        m = save(mlp_model()[0], self.path("mlp.onnx"))
        with open(m, "rb") as f:
            data = f.read()
        p = self.path("truncated.onnx")
        with open(p, "wb") as f:
            f.write(data[: len(data) // 2])
        self.assert_bad_input(run("inspect", p, "--batch", 2), "truncated.onnx")

    def test_op_coverage_table(self):
        r = run("inspect", "--ops")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        count = int(lines[0].split()[0])
        split = next(i for i, line in enumerate(lines) if "expanded at import" in line)
        rows = {line.split()[0]: line for line in lines[2:split]}
        self.assertEqual(len(rows), count)
        expanded = {line.split()[0]: line for line in lines[split + 1:]}
        self.assertEqual(len(expanded), int(lines[split].split()[0]))
        self.assertIn("into Reshape, Transpose, Reshape", expanded["DepthToSpace"])
        self.assertNotIn("MISSING", r.stdout)
        self.assertRegex(rows["Resize"], r"Resize\s+10\s+yes\s+yes\s+f32")
        self.assertIn("not differentiable", rows["ArgMax"])
        self.assertIn("cuBLAS", rows["MatMul"])
        self.assertNotIn("ResizeGrad", rows, "gradient ops are internal")
        r = run("inspect")
        self.assertEqual(r.returncode, 2)
        self.assertIn("model (or --ops) is required", r.stderr)

    def test_unsupported_ops_listed_at_once(self):
        nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
                 helper.make_node("NonZero", ["a"], ["b"], name="nz1"),
                 helper.make_node("Unique", ["b"], ["c"], name="uniq"),
                 helper.make_node("NonZero", ["c"], ["y"], name="nz2")]
        graph = helper.make_graph(nodes, "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
        m = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                 self.path("u.onnx"))
        self.assert_bad_input(run("inspect", m), "NonZero", "nz1", "nz2", "Unique", "uniq")

    def test_dynamic_dim_without_batch(self):
        m = save(mlp_model()[0], self.path("mlp.onnx"))
        # inspect shows a dynamic batch at 1 and says so; profiling needs the real one.
        r = run("inspect", m)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("leading dimension dynamic; shown at batch 1 (pass --batch N", r.stdout)
        self.assertIn("(1, 4)", r.stdout)
        self.assert_bad_input(run("profile", m, "-o", self.path("p.json")), "'x'", "--batch")

    def test_first_contact_with_the_zoo_lenet(self):
        lenet = self.path("lenet.onnx")
        self.assertEqual(run("zoo", "export", "lenet", "-o", lenet).returncode, 0)
        r = run("inspect", lenet)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("shown at batch 1", r.stdout)
        self.assertIn("layers", r.stdout)

    def test_unknown_command_exits_2_and_names_the_commands(self):
        for args in (["fit", "--help"], ["fit"], ["trian", "m.onnx"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertEqual(r.stdout, "")
            self.assertIn(f"error: unknown command '{args[0]}'; the commands are inspect, run, "
                          "train", r.stderr)
        self.assertEqual(run("train", "--help").returncode, 0)
        self.assertEqual(run("zoo", "list").returncode, 0)

    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"^pipetrain \d+\.\d+\.\d+$")
        fields = {l.split()[0]: l.split(None, 1)[1] for l in lines[1:] if l.strip()}
        self.assertRegex(fields["commit"], r"^[0-9a-f]{12}(-dirty)?$|^unknown")
        self.assertIn("cpu, portable", fields["backends"])
        for key in ("sentencepiece", "OpenBLAS", "oneDNN", "layout"):
            self.assertIn(key, fields)

    def test_error_messages_are_valid_utf8(self):
        """A corrupted file's names reach stderr escaped, never as raw invalid bytes."""
        nodes = [helper.make_node("Frobnicate", ["x"], ["y"], name="node_QQ")]
        graph = helper.make_graph(nodes, "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
        data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        data = data.SerializeToString().replace(b"node_QQ", b"node_\xff\xc3")
        m = self.path("bad-utf8.onnx")
        with open(m, "wb") as f:
            f.write(data)
        r = subprocess.run([PIPETRAIN, "inspect", m, "--batch", "2"], capture_output=True,
                           timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        err = r.stderr.decode("utf-8")  # raises on invalid UTF-8
        self.assertIn("Frobnicate", err)
        self.assertIn("node_\\xFF\\xC3", err)

    def test_wrong_input_shape_and_dtype(self):
        m = save(mlp_model()[0], self.path("mlp.onnx"))
        np.save(self.path("x.npy"), np.zeros((5, 7), np.float32))
        self.assert_bad_input(run("run", m, "--batch", 5, "--input", f"x={self.path('x.npy')}"),
                              "'x'", "(5, 7)", "(5, 4)")
        np.save(self.path("xi.npy"), np.zeros((5, 4), np.int64))
        self.assert_bad_input(run("run", m, "--batch", 5, "--input", f"x={self.path('xi.npy')}"),
                              "'x'", "i64")

    def test_unknown_input_name(self):
        m = save(mlp_model()[0], self.path("mlp.onnx"))
        np.save(self.path("x.npy"), np.zeros((5, 4), np.float32))
        self.assert_bad_input(run("run", m, "--batch", 5, "--input", f"x={self.path('x.npy')}",
                                  "--input", f"z={self.path('x.npy')}"), "'z'")

    def test_bad_shape_in_model_names_node(self):
        nodes = [helper.make_node("Add", ["x", "z"], ["y"], name="bad_add")]
        graph = helper.make_graph(nodes, "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                   helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
        m = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                 self.path("s.onnx"))
        self.assert_bad_input(run("inspect", m), "bad_add", "(2, 3)", "(4)")

    # --- profile / partition / simulate -----------------------------------

    def chain_graph_txt(self):
        """PipeDream graph.txt: an input and a 4-node chain, times in ms."""
        lines = ["node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
                 "activation_size=0.0, parameter_size=0.000"]
        for i in range(4):
            lines.append(f"node{i + 2} -- Layer{i} -- forward_compute_time=10.000, "
                         f"backward_compute_time=20.000, activation_size=1000000.0, "
                         f"parameter_size={[1e6, 1e6, 1e6, 400e6][i]:.3f}")
        lines += [f"\tnode{i + 1} -- node{i + 2}" for i in range(4)]
        path = self.path("graph.txt")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def test_profile_partition_simulate_end_to_end(self):
        model, _, _ = mlp_model()
        m = save(model, self.path("mlp.onnx"))
        r = run("profile", m, "--batch", 8, "--device", "a100", "-o", self.path("p.json"),
                "--graph-txt", self.path("p.txt"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run("partition", self.path("p.json"), "--topology", "2", "--bandwidth", "10e9",
                "-o", self.path("plan.json"), "--baselines")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.strip().splitlines()[-1].startswith("config "), r.stdout)
        r = run("simulate", self.path("plan.json"), "--profile", self.path("p.json"),
                "--trace", self.path("t.json"), "--svg", self.path("t.svg"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1f1b", r.stdout)
        self.assertTrue(os.path.getsize(self.path("t.svg")) > 0)
        # Measured: a timed training step (cross-entropy attached, the mlp has
        # no loss output), so backward times are real, not 2 x forward.
        for loss in ["auto", "mse"]:
            r = run("profile", m, "--batch", 4, "--device", "measured", "--runs", 2,
                    "--loss", loss, "-o", self.path("m.json"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("estimated", r.stdout)
            with open(self.path("m.json")) as f:
                prof = json.load(f)
            self.assertFalse(prof["backward_estimated"])
            self.assertGreater(prof["layers"][0]["backward_s"], 0)

    def test_zoo_compare_predicts_what_the_simulator_measures(self):
        # The paper's two clusters: for every zoo model the cost model's speedup
        # over data parallel (x DP) and the simulated asynchronous 1F1B's
        # (pipedream) agree within 5% (GNMT's lockstep replicas included).
        for topo, bw in (("4x4", "10e9,150e9"), ("2x8", "25e9,150e9")):
            r = run("zoo", "compare", "--topology", topo, "--bandwidth", bw, "--device", "v100")
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = [l.split() for l in r.stdout.splitlines()
                    if re.match(r"^[a-z0-9]+ +[0-9.]+ +[0-9]+ ", l)]
            self.assertGreaterEqual(len(rows), 8, r.stdout)
            for row in rows:
                predicted, simulated = float(row[6].rstrip("x")), float(row[9].rstrip("x"))
                self.assertLessEqual(abs(predicted / simulated - 1), 0.05,
                                     f"{topo} {row[0]}: predicted {predicted}x, simulated "
                                     f"{simulated}x\n{r.stdout}")

    def test_graph_txt_through_both_cost_models(self):
        g = self.chain_graph_txt()
        for model in ["pipetrain", "pipedream"]:
            r = run("partition", g, "--topology", "2x2", "--bandwidth", "1e9,10e9",
                    "--cost-model", model, "-o", self.path(model + ".json"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("config ", r.stdout)

    def test_bad_topology_and_profile(self):
        g = self.chain_graph_txt()
        self.assert_bad_input(run("partition", g, "--topology", "4x0", "--bandwidth", "1e9"),
                              "--topology")
        self.assert_bad_input(run("partition", g, "--topology", "4x4", "--bandwidth", "1,2,3"),
                              "--bandwidth")
        bad = self.path("bad.json")
        with open(bad, "w") as f:
            f.write('{"layers": [{"name": "a", "forward_s": 1}]}')
        self.assert_bad_input(run("partition", bad, "--topology", "2", "--bandwidth", "1e9"),
                              "bad.json", "backward_s")
        with open(bad, "w") as f:
            f.write("{not json")
        self.assert_bad_input(run("partition", bad, "--topology", "2", "--bandwidth", "1e9"),
                              "not valid JSON")

    def test_plan_that_does_not_fit(self):
        g = self.chain_graph_txt()
        # 400 MB of weights on one layer cannot fit 100 MB per worker.
        self.assert_bad_input(run("partition", g, "--topology", "4", "--bandwidth", "1e9",
                                  "--memory", "1e8"), "GB per worker")
        r = run("partition", g, "--topology", "4", "--bandwidth", "1e9", "-o",
                self.path("plan.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        import json
        with open(self.path("plan.json")) as f:
            plan = json.load(f)
        plan["stages"][0]["workers"] = [7] * plan["stages"][0]["replication"]
        with open(self.path("bad_plan.json"), "w") as f:
            json.dump(plan, f)
        self.assert_bad_input(run("simulate", self.path("bad_plan.json"), "--profile", g),
                              "worker 7")
        # A profile that lacks the plan's layers.
        with open(self.path("short.txt"), "w") as f:
            f.write("node1 -- Layer0 -- forward_compute_time=1.0, backward_compute_time=1.0, "
                    "activation_size=1.0, parameter_size=1.0\n")
        self.assert_bad_input(run("simulate", self.path("plan.json"), "--profile",
                                  self.path("short.txt")), "profile lacks")


if __name__ == "__main__":
    PIPETRAIN = sys.argv.pop(1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sharding
    sharding.main()
