#!/usr/bin/python3
"""End-to-end checks of the pipetrain command line: what a user sees.

Builds small models with the onnx Python package, runs the real binary and
checks outputs, exit codes and the one-line error messages for bad input.
Usage: cli_test.py PATH/TO/pipetrain
"""
import os
import subprocess
import sys
import tempfile
import unittest

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

    def test_inspect_lists_layers_params_and_flops(self):
        m = save(mlp_model()[0], self.path("mlp.onnx"))
        r = run("inspect", m, "--batch", 8, "--layer-depth", 1)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("fc", r.stdout)
        self.assertIn("act", r.stdout)
        self.assertIn("15", r.stdout)  # 12 weights + 3 biases
        self.assertIn("(8, 4)", r.stdout)

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

    def test_unsupported_ops_listed_at_once(self):
        nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
                 helper.make_node("HardSwish", ["a"], ["b"], name="hs1"),
                 helper.make_node("Celu", ["b"], ["c"], name="celu"),
                 helper.make_node("HardSwish", ["c"], ["y"], name="hs2")]
        graph = helper.make_graph(nodes, "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
        m = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                 self.path("u.onnx"))
        self.assert_bad_input(run("inspect", m), "HardSwish", "hs1", "hs2", "Celu", "celu")

    def test_dynamic_dim_without_batch(self):
        m = save(mlp_model()[0], self.path("mlp.onnx"))
        self.assert_bad_input(run("inspect", m), "'x'", "--batch")

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


if __name__ == "__main__":
    PIPETRAIN = sys.argv.pop(1)
    unittest.main(verbosity=1)
