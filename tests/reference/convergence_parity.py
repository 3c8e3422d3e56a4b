#!/usr/bin/python3
"""300 steps of pipetrain against PyTorch: a GPT-2-shaped and a BERT-shaped
Hugging Face model (transformers 4.30.2, random init, small width) trained from
the same export on the same batches in the same order, with AdamW, linear
warm-up then cosine decay, weight decay and gradient clipping.

GPT-2: causal LM on fortunes tokenized by a byte-level BPE tokenizer.json,
sequences padded with attention_mask 0 and label -100 (ignored). BERT:
sequence classification of the fortunes' categories from csv: data, tokenized
by pipetrain's own loader from a WordPiece tokenizer.json ([CLS] ... [SEP],
padding, attention_mask, token_type_ids); PyTorch gets the same batches from
the `tokenizers` library.

The bound comes from float32 itself: PyTorch float32 trained again from
weights perturbed by 2^-20 (relative, random sign) gives a second curve; its
distance from the first, held at its running maximum, is the spread two
equally careful float32 runs show by that step. pipetrain's curve must stay
within twice that spread of PyTorch's (two runs each that far from a shared
ideal are at most twice apart), plus 1e-6 relative for the printed digits.
pipetrain runs on one worker and pipelined over 2 stages (1f1b-flush); the
asynchronous 1F1B run is reported beside them and not bound (its updates use
stale weights by design).

Usage: convergence_parity.py PATH/TO/pipetrain [--report]
Exit 77 (skip) without transformers (scripts/install_transformers.sh).
"""
import csv
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.environ.get("PIPETRAIN_PYDEPS", "/opt/pipetrain/pydeps"))
try:
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers
except ImportError as e:
    print(f"needs torch, transformers and tokenizers ({e}): scripts/install_transformers.sh")
    sys.exit(77)

PIPETRAIN = None
FORTUNES = "/usr/share/games/fortunes"
CLASSES = ["computers", "politics", "science", "songs-poems"]
STEPS, BATCH, SAMPLES, SEQ = 300, 16, 1600, 32
LR, WARMUP, WEIGHT_DECAY, CLIP = 2e-3, 30, 0.01, 1.0
SEED = 0


# --- pipetrain's shuffle (data/random.h): mt19937_64, Fisher-Yates with rejection ----------

M64 = (1 << 64) - 1


class MT19937_64:
    def __init__(self, seed):
        self.mt = [seed & M64] + [0] * 311
        for i in range(1, 312):
            p = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (p ^ (p >> 62)) + i) & M64
        self.i = 312

    def __call__(self):
        if self.i >= 312:
            mt = self.mt
            for k in range(312):
                y = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                mt[k] = mt[(k + 156) % 312] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
            self.i = 0
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return (y ^ (y >> 43)) & M64


def permutation(n, seed):
    v, rng = list(range(n)), MT19937_64(seed)
    for i in range(n, 1, -1):
        limit = M64 - M64 % i
        while True:
            x = rng()
            if x < limit:
                break
        j = x % i
        v[i - 1], v[j] = v[j], v[i - 1]
    return v


def batches():
    """The rows of each step's batch, as pipetrain's loader visits them (drop_last)."""
    per_epoch = SAMPLES // BATCH
    order = []
    for step in range(STEPS):
        epoch, k = divmod(step, per_epoch)
        if k == 0:
            perm = permutation(SAMPLES, SEED + epoch)
        order.append(perm[k * BATCH:(k + 1) * BATCH])
    return order


def lr_at(step):
    """executor/optim/optimizer.h: warm-up from 0, then cosine to 0 at the last step."""
    if step < WARMUP:
        return LR * step / WARMUP
    t, span = step - WARMUP, STEPS - WARMUP
    return LR * (1 + math.cos(math.pi * t / span)) / 2 if t < span else 0.0


# --- data and models -----------------------------------------------------------------------

def fortunes():
    rows = []
    for c in CLASSES:
        with open(os.path.join(FORTUNES, c), encoding="utf-8", errors="replace") as f:
            rows += [(" ".join(t.split()), c) for t in f.read().split("\n%\n") if t.strip()]
    random.Random(0).shuffle(rows)
    return rows[:SAMPLES]


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        names = ["input_ids", "attention_mask", "token_type_ids"][:len(inputs)]
        return self.model(**dict(zip(names, inputs))).logits


def export(model, inputs, path):
    names = ["input_ids", "attention_mask", "token_type_ids"][:len(inputs)]
    axes = {n: {0: "batch"} for n in names + ["logits"]}
    torch.onnx.export(model, tuple(t[:BATCH] for t in inputs), path, opset_version=17,
                      input_names=names, output_names=["logits"], dynamic_axes=axes,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)


def gpt2_case(d):
    """(model, inputs, labels, pipetrain data args) for the causal LM."""
    texts = [t for t, _ in fortunes()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=512, special_tokens=["<pad>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    ids = torch.zeros(SAMPLES, SEQ, dtype=torch.int64)
    mask = torch.zeros(SAMPLES, SEQ, dtype=torch.int64)
    labels = torch.full((SAMPLES, SEQ), -100, dtype=torch.int64)
    for i, e in enumerate(tok.encode_batch(texts)):
        seq = e.ids[:SEQ + 1]
        n = min(len(seq), SEQ)
        ids[i, :n] = torch.tensor(seq[:n])
        mask[i, :n] = 1
        labels[i, :len(seq) - 1] = torch.tensor(seq[1:])
    np.savez(os.path.join(d, "gpt.npz"), input_ids=ids.numpy(), attention_mask=mask.numpy(),
             labels=labels.numpy())
    config = transformers.GPT2Config(
        vocab_size=tok.get_vocab_size(), n_positions=SEQ, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(1)
    model = Logits(transformers.GPT2LMHeadModel(config)).train()
    return model, [ids, mask], labels, ["--data", os.path.join(d, "gpt.npz")]


def bert_case(d):
    rows = fortunes()
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator([t for t, _ in rows], trainers.WordPieceTrainer(
        vocab_size=1000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"],
        show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tok.token_to_id("[CLS]")),
                                                 ("[SEP]", tok.token_to_id("[SEP]"))])
    tok_path = os.path.join(d, "wordpiece.json")
    tok.save(tok_path)
    with open(os.path.join(d, "bert.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(rows)
    tok.enable_truncation(SEQ)
    tok.enable_padding(length=SEQ, pad_id=tok.token_to_id("[PAD]"))
    enc = tok.encode_batch([t for t, _ in rows])
    ids = torch.tensor([e.ids for e in enc])
    mask = torch.tensor([e.attention_mask for e in enc])
    types = torch.zeros_like(ids)
    labels = torch.tensor([sorted(CLASSES).index(c) for _, c in rows])
    config = transformers.BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=SEQ,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=len(CLASSES))
    torch.manual_seed(2)
    model = Logits(transformers.BertForSequenceClassification(config)).train()
    return model, [ids, mask, types], labels, [
        "--data", "csv:" + os.path.join(d, "bert.csv"), "--tokenizer", tok_path]


# --- training ------------------------------------------------------------------------------

def torch_curve(model, state, inputs, labels, perturb=0.0):
    """PyTorch's loss at each step, float32, from `state` (scaled by 1 +- perturb)."""
    model.load_state_dict(state)
    if perturb:
        gen = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for p in model.parameters():
                sign = torch.randint(0, 2, p.shape, generator=gen) * 2 - 1
                p.mul_(1 + perturb * sign)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100)
    losses = []
    for step, rows in enumerate(batches()):
        logits = model(*(t[rows] for t in inputs))
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), labels[rows].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.step()
        losses.append(loss.item())
    return losses


def pipetrain_curve(onnx, data_args, run_dir, *pipeline):
    args = [PIPETRAIN, "train", onnx, *data_args, "--batch", BATCH, "--loss", "cross-entropy",
            "--optimizer", "adamw", "--lr", LR, "--weight-decay", WEIGHT_DECAY, "--lr-schedule",
            "cosine", "--warmup", WARMUP, "--clip-norm", CLIP, "--max-steps", STEPS, "--epochs",
            100, "--test-fraction", 0, "--seed", SEED, "--log-every", 1, "--quiet", "--run-dir",
            run_dir, *pipeline]
    r = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise AssertionError(f"pipetrain train {' '.join(map(str, pipeline))}: {r.stderr}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        steps = [json.loads(line) for line in f if '"step"' in line]
    losses = {s["step"]: s["loss"] for s in steps}
    return [losses[k] for k in range(STEPS)]


def compare(name, make):
    with tempfile.TemporaryDirectory(prefix=f"parity_{name}_") as d:
        return compare_in(d, make)


def compare_in(d, make):
    model, inputs, labels, data_args = make(d)
    onnx = os.path.join(d, "model.onnx")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    export(model, inputs, onnx)
    reference = torch_curve(model, state, inputs, labels)
    perturbed = torch_curve(model, state, inputs, labels, perturb=2.0 ** -20)
    curves = {
        "one worker": pipetrain_curve(onnx, data_args, os.path.join(d, "one")),
        "2 stages, 1f1b-flush": pipetrain_curve(onnx, data_args, os.path.join(d, "flush"),
                                                "--stages", 2, "--schedule", "1f1b-flush"),
        "2 stages, async 1f1b": pipetrain_curve(onnx, data_args, os.path.join(d, "async"),
                                                "--stages", 2, "--schedule", "1f1b"),
    }
    spread, bound = 0.0, []
    for a, b in zip(reference, perturbed):
        spread = max(spread, abs(a - b))
        bound.append(2 * spread + 1e-6 * abs(a))
    report = {"reference first/last": (reference[0], reference[-1]),
              "float32 spread at 100/200/300": [max(abs(a - b) for a, b in
                                                    zip(reference[:k], perturbed[:k]))
                                                for k in (100, 200, 300)]}
    for label, curve in curves.items():
        diffs = [abs(c - r) for c, r in zip(curve, reference)]
        worst = max(range(STEPS), key=lambda k: diffs[k] / bound[k])
        report[label] = {"max |diff|": max(diffs), "last": curve[-1],
                         "worst step": worst, "diff/bound there": diffs[worst] / bound[worst]}
    return reference, bound, curves, report


class ConvergenceParity(unittest.TestCase):
    def check(self, name, make):
        reference, bound, curves, report = compare(name, make)
        print(f"\n{name}: {json.dumps(report, indent=1)}", file=sys.stderr)
        # Means of ten steps: one step's loss is one batch's (the tokenizer's vocabulary,
        # trained by the library, also differs between runs: it breaks ties at random).
        first, last = sum(reference[:10]) / 10, sum(reference[-10:]) / 10
        print(f"{name}: reference loss {first:.4f} over the first ten steps, {last:.4f} over "
              "the last ten", file=sys.stderr)
        self.assertLess(last, first * 0.8, "the reference did not learn")
        for label in ("one worker", "2 stages, 1f1b-flush"):
            for k, (c, r, b) in enumerate(zip(curves[label], reference, bound)):
                self.assertLessEqual(abs(c - r), b, f"{name}, {label}, step {k}: pipetrain {c}, "
                                     f"PyTorch {r}, bound {b}")

    def test_gpt2_shaped_causal_lm(self):
        self.check("gpt2", gpt2_case)

    def test_bert_shaped_classifier_from_csv(self):
        self.check("bert", bert_case)


if __name__ == "__main__":
    PIPETRAIN = sys.argv.pop(1)
    torch.set_num_threads(2)
    unittest.main()
