#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora: OUT/<fuzzer>/ for each target.

Text seeds are checked in under fuzz/seeds/; the binary ones (.npy, .npz, IDX,
checkpoints) are written here with NumPy and ONNX, and the importer's are
small models from ONNX's own node tests (libonnx-testdata).
Usage: make_seeds.py OUT
"""
import gzip
import io
import os
import shutil
import struct
import sys
import zlib

import numpy as np
import onnx
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ONNX_TESTS = "/usr/share/libonnx-testdata/data/node"


def write(out, target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data)


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def npz_bytes(compressed, **arrays):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def idx_bytes(a, code):
    head = bytes([0, 0, code, a.ndim]) + b"".join(struct.pack(">I", d) for d in a.shape)
    return head + a.astype(a.dtype.newbyteorder(">")).tobytes()


def checkpoint_bytes(values, roles, meta, with_checksum):
    """As importer/checkpoint.cc writes one, with its CRC-32 over the meaning."""
    crc = 0
    for k in sorted(meta):
        for s in (k, meta[k]):
            crc = zlib.crc32(s.encode() + b"\0", crc)
    for name in sorted(values):
        a = values[name]
        shape = "(" + ", ".join(str(d) for d in a.shape) + ")"
        for s in (name, roles[name], "f32" + shape):
            crc = zlib.crc32(s.encode() + b"\0", crc)
        crc = zlib.crc32(a.astype("<f4").tobytes(), crc)
    props = {"pipetrain.checkpoint": "1", **meta}
    for name in values:
        props["pipetrain.role." + name] = roles[name]
    if with_checksum:
        props["pipetrain.crc32"] = f"{crc:08x}"
    graph = helper.make_graph([], "checkpoint", [], [],
                              [numpy_helper.from_array(v, n) for n, v in values.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    helper.set_model_props(model, props)
    return model.SerializeToString()


def main(out):
    rng = np.random.default_rng(0)
    # Checked-in text seeds.
    for target, folder in [("csv_fuzzer", "csv"), ("text_fuzzer", "text"),
                           ("graph_txt_fuzzer", "graph_txt")]:
        for name in sorted(os.listdir(os.path.join(HERE, "seeds", folder))):
            with open(os.path.join(HERE, "seeds", folder, name), "rb") as f:
                data = f.read()
            write(out, target, name, data)
            if target == "csv_fuzzer":
                write(out, target, name + ".gz", gzip.compress(data, mtime=0))
    for kind, name in enumerate(["plan.json", "profile.json", "topology.json"]):
        with open(os.path.join(HERE, "seeds", "json", name), "rb") as f:
            write(out, "json_fuzzer", name, bytes([kind]) + f.read())

    # .npy: the dtypes and layouts numpy writes.
    arrays = {
        "tokens_i64": np.arange(20, dtype=np.int64) % 7,
        "tokens_u16": np.arange(12, dtype=np.uint16),
        "features_f32": rng.standard_normal((4, 3)).astype(np.float32),
        "labels_i32": np.array([0, 2, 1, 1], dtype=np.int32),
        "big_endian": np.arange(6, dtype=">i4").reshape(2, 3),
        "fortran": np.asfortranarray(rng.standard_normal((3, 2))),
        "bool": np.array([True, False, True]),
        "f16": np.ones((2, 2), dtype=np.float16),
    }
    for name, a in arrays.items():
        write(out, "npy_fuzzer", name + ".npy", npy_bytes(a))
    x = rng.standard_normal((10, 3)).astype(np.float32)
    y = (np.arange(10) % 3).astype(np.int64)
    write(out, "npz_fuzzer", "xy.npz", npz_bytes(False, x=x, y=y))
    write(out, "npz_fuzzer", "xy_compressed.npz", npz_bytes(True, features=x, labels=y))
    write(out, "npz_fuzzer", "split.npz",
          npz_bytes(False, x_train=x[:8], y_train=y[:8], x_test=x[8:], y_test=y[8:]))
    write(out, "npz_fuzzer", "named.npz", npz_bytes(True, tokens=y, mask=y > 0, labels=y))
    # IDX: images (u8, rank 3), labels (u8, rank 1), floats; plain and gzipped.
    images = rng.integers(0, 256, (3, 4, 4), dtype=np.uint8)
    labels = np.array([1, 0, 9], dtype=np.uint8)
    for name, data in [("images-idx3", idx_bytes(images, 0x08)),
                       ("labels-idx1", idx_bytes(labels, 0x08)),
                       ("f32-idx2", idx_bytes(rng.standard_normal((2, 3)).astype(np.float32), 0x0D)),
                       ("i32-idx1", idx_bytes(np.array([3, -1, 4], dtype=np.int32), 0x0C))]:
        write(out, "idx_fuzzer", name, data)
        write(out, "idx_fuzzer", name + ".gz", gzip.compress(data, mtime=0))
    # text: the same bytes serve the tokens: .bin reading.
    write(out, "text_fuzzer", "tokens.bin", np.arange(16, dtype="<u2").tobytes())
    # Checkpoints of the fuzzer's model (w (3, 2), b (2)), with and without a checksum.
    with open(os.path.join(HERE, "seeds", "json", "plan.json")) as f:
        plan = f.read().strip()
    values = {"w": rng.standard_normal((3, 2)).astype(np.float32),
              "b": np.zeros(2, dtype=np.float32),
              "w.momentum": np.full((3, 2), 0.5, dtype=np.float32)}
    roles = {"w": "param", "b": "param", "w.momentum": "optimizer_state"}
    meta = {"step": "12", "epoch": "1", "plan": plan}
    write(out, "checkpoint_fuzzer", "checked.onnx", checkpoint_bytes(values, roles, meta, True))
    write(out, "checkpoint_fuzzer", "unchecked.onnx",
          checkpoint_bytes(values, roles, {"step": "3"}, False))
    # The importer: small models of ONNX's node tests.
    for t in ["test_relu", "test_add_bcast", "test_conv_with_strides_padding",
              "test_reshape_extended_dims", "test_lstm_defaults", "test_gemm_default_no_bias",
              "test_slice", "test_softmax_axis_1", "test_maxpool_2d_pads",
              # bodies (If, Loop, Scan) and the expansions' attribute handling
              "test_if", "test_loop11", "test_scan9_sum", "test_gru_defaults",
              "test_einsum_batch_matmul", "test_resize_upsample_scales_linear"]:
        src = os.path.join(ONNX_TESTS, t, "model.onnx")
        if os.path.exists(src):
            os.makedirs(os.path.join(out, "importer_fuzzer"), exist_ok=True)
            shutil.copy(src, os.path.join(out, "importer_fuzzer", t + ".onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
