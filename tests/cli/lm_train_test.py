#!/usr/bin/python3
"""Language models from the command line: a GPT with its LM head tied to the token
embedding trained pipelined on real text (Debian's fortunes), validation loss and
perplexity reported, text generated from the trained model; the same with a
SentencePiece tokenizer trained by `pipetrain tokenize`; token ids from .npy
pairs and named-array .npz files; and every bad dataset refused before any step
with one line and exit code 2.

Usage: lm_train_test.py PATH/TO/pipetrain
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np

PIPETRAIN = None
CORPUS = "/usr/share/games/fortunes/computers"  # Debian's fortunes (scripts/setup.sh)
SEQ = 16


def run(*args, timeout=300):
    return subprocess.run([PIPETRAIN, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


class LanguageModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.gpt = os.path.join(cls.dir, "gpt.onnx")
        r = run("zoo", "export", "gpt2", "--width-divisor", 16, "--layers", 2, "--vocab", 256,
                "--seq-len", SEQ, "-o", cls.gpt)
        assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def ok(self, r):
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        return r

    def refused(self, r, *needles):
        self.assertEqual(r.returncode, 2, r.stderr + r.stdout)
        self.assertTrue(r.stderr.startswith("error: "), r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertNotIn("epoch", r.stdout)  # refused before any step
        for n in needles:
            self.assertIn(n, r.stderr)

    def train(self, *extra):
        return run("train", self.gpt, "--batch", 8, "--loss", "cross-entropy", "--quiet",
                   "--run-dir", self.path("run"), *extra)

    @unittest.skipUnless(os.path.exists(CORPUS), "Debian's fortunes is not installed")
    def test_tied_gpt_trains_pipelined_on_text_and_generates(self):
        trained = self.path("gpt-trained.onnx")
        r = self.ok(self.train("--data", "text:" + CORPUS, "--stages", 2, "--schedule",
                               "1f1b-flush", "--microbatches", 2, "--optimizer", "adam", "--lr",
                               "0.01", "--max-samples", 400, "--test-fraction", "0.1",
                               "-o", trained))
        self.assertIn("pipeline: 2 stages", r.stdout)
        self.assertRegex(r.stdout, r"val loss [0-9.]+  perplexity [0-9.]+ \(unigram [0-9.]+\)")
        with open(self.path("run/metrics.jsonl")) as f:
            epochs = [json.loads(l) for l in f if '"train_loss"' in l]
        self.assertGreater(epochs[-1]["test_perplexity"], 1)
        self.assertGreater(epochs[-1]["unigram_perplexity"], 1)
        self.assertAlmostEqual(np.log(epochs[-1]["test_perplexity"]), epochs[-1]["test_loss"],
                               places=4)
        # evaluate scores the held-out windows as train did, with the unigram baseline.
        e = self.ok(run("evaluate", trained, "--data", "text:" + CORPUS, "--batch", 8,
                        "--loss", "cross-entropy", "--max-samples", 400, "--test-fraction",
                        "0.1", "--quiet"))
        ppl = re.search(r"perplexity ([0-9.]+) \(unigram ([0-9.]+)\)", e.stdout)
        self.assertTrue(ppl, e.stdout)
        self.assertAlmostEqual(float(ppl.group(1)), epochs[-1]["test_perplexity"], places=1)
        self.assertAlmostEqual(float(ppl.group(2)), epochs[-1]["unigram_perplexity"], places=1)
        g = self.ok(run("generate", trained, "--prompt", "The ", "--tokens", 24))
        self.assertTrue(g.stdout.startswith("The "), g.stdout)
        self.assertGreaterEqual(len(g.stdout.encode("utf-8", "surrogateescape")), 4 + 24)
        # Greedy decoding is deterministic; top-k sampling follows its seed.
        self.assertEqual(g.stdout, run("generate", trained, "--prompt", "The ", "--tokens",
                                       24).stdout)
        s1 = run("generate", trained, "--prompt", "A", "--tokens", 16, "--top-k", 5, "--seed", 1)
        s2 = run("generate", trained, "--prompt", "A", "--tokens", 16, "--top-k", 5, "--seed", 1)
        self.assertEqual(self.ok(s1).stdout, s2.stdout)

    @unittest.skipUnless(os.path.exists(CORPUS), "Debian's fortunes is not installed")
    def test_sentencepiece_tokenizer_trains_and_generates(self):
        tok = self.path("tok.model")
        r = self.ok(run("tokenize", CORPUS, "--vocab", 500, "-o", tok))
        self.assertIn("vocab 500", r.stdout)
        gpt = self.path("gpt-spm.onnx")
        self.ok(run("zoo", "export", "gpt2", "--width-divisor", 16, "--layers", 2, "--vocab", 500,
                    "--seq-len", SEQ, "-o", gpt))
        trained = self.path("gpt-spm-trained.onnx")
        r = self.ok(run("train", gpt, "--data", "text:" + CORPUS, "--tokenizer", tok, "--loss",
                        "cross-entropy", "--batch", 8, "--stages", 2, "--max-samples", 200,
                        "--quiet", "--run-dir", self.path("run-spm"), "-o", trained))
        self.assertRegex(r.stdout, r"perplexity [0-9.]+ \(unigram [0-9.]+\)")
        g = self.ok(run("generate", trained, "--tokenizer", tok, "--prompt", "The computer",
                        "--tokens", 12, "--top-k", 4, "--seed", 3))
        self.assertTrue(g.stdout.startswith("The computer"), g.stdout)
        self.assertGreater(len(g.stdout.strip()), len("The computer"))
        # The byte-level GPT (256 logits) cannot take this tokenizer's 500 ids.
        self.refused(self.train("--data", "text:" + CORPUS, "--tokenizer", tok),
                     "outside the rows of the embedding", "[0, 256)")
        self.refused(run("tokenize", CORPUS, "--vocab", 500, "-o", self.path("tok.bin")),
                     "must end in .model")

    def test_token_id_pairs_and_named_arrays(self):
        rng = np.random.default_rng(0)
        ids = rng.integers(0, 256, size=(40, SEQ + 1))
        np.save(self.path("x.npy"), ids[:, :-1])  # int64 token ids, as in the issue
        np.save(self.path("y.npy"), ids[:, 1:])  # next-token ids (N, T)
        self.ok(self.train("--data", self.path("x.npy"), "--max-steps", 3))
        labels = ids[:, 1:].copy()
        labels[:, :4] = -100  # ignored positions (Hugging Face's convention)
        np.savez(self.path("named.npz"), input_ids=ids[:, :-1].astype(np.int32), labels=labels)
        self.ok(self.train("--data", self.path("named.npz"), "--max-steps", 3, "--stages", 2))
        # pipetrain run takes the same named arrays as its inputs.
        np.savez(self.path("batch.npz"), input_ids=ids[:2, :-1])
        r = self.ok(run("run", self.gpt, "--batch", 2, "--input", self.path("batch.npz"),
                        "--output-dir", self.path("out")))
        self.assertEqual(np.load(self.path("out/logits.npy")).shape, (2, SEQ, 256))

    def test_bad_datasets_are_refused_before_training(self):
        ids = np.zeros((16, SEQ), np.int64)
        np.savez(self.path("wrong_name.npz"), tokens=ids, labels=ids)
        self.refused(self.train("--data", self.path("wrong_name.npz")), "'tokens'", "input_ids")
        np.savez(self.path("float_ids.npz"), input_ids=ids.astype(np.float32), labels=ids)
        self.refused(self.train("--data", self.path("float_ids.npz")), "is f32",
                     "takes i64")
        big = ids.copy()
        big[3, 5] = 300
        np.savez(self.path("big_ids.npz"), input_ids=big, labels=ids)
        self.refused(self.train("--data", self.path("big_ids.npz"), "--test-fraction", "0"),
                     "id 300", "position 5", "[0, 256)")
        np.savez(self.path("big_labels.npz"), input_ids=ids, labels=big)
        self.refused(self.train("--data", self.path("big_labels.npz"), "--test-fraction", "0"),
                     "id 300", "256 classes")
        np.savez(self.path("long.npz"), input_ids=np.zeros((16, SEQ * 2), np.int64),
                 labels=np.zeros((16, SEQ * 2), np.int64))
        self.refused(self.train("--data", self.path("long.npz")), "(32)", "(16)")
        text = self.path("t.txt")
        with open(text, "w") as f:
            f.write("hello world, " * 100)
        self.refused(self.train("--data", "text:" + text, "--seq-len", SEQ * 2),
                     "--seq-len 32 is beyond the model's 16 positions")
        with open(self.path("latin1.txt"), "wb") as f:
            f.write(b"caf\xe9 au lait")
        self.refused(self.train("--data", "text:" + self.path("latin1.txt")), "latin1.txt",
                     "not UTF-8", "offset 3")
        open(self.path("empty.txt"), "w").close()
        self.refused(self.train("--data", "text:" + self.path("empty.txt")), "empty")


if __name__ == "__main__":
    PIPETRAIN = sys.argv.pop(1)
    unittest.main()
