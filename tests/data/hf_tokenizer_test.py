#!/usr/bin/python3
"""Hugging Face tokenizer.json files read by pipetrain give the ids of the
`tokenizers` library itself (0.13.3, the one transformers 4.30 installs), on
every line of Debian's fortunes and on lines made to reach the Unicode corners
(accents, CJK, emoji, fullwidth forms, odd whitespace, special tokens inline).

Tokenizers are trained here with the library, one per family transformers
saves: GPT-2's byte-level BPE, RoBERTa's (the same with <s> ... </s> and an
lstrip <mask>), BERT's WordPiece (uncased and cased), a SentencePiece-style
Unigram, T5's (a SentencePiece model converted by transformers, with its
Precompiled normalization map), Llama's BPE with byte fallback, and a WordLevel
with the remaining normalizers and pre-tokenizers. For each, `pipetrain tokenize --encode` must
equal `Tokenizer.encode` on every line, and `--decode` must equal
`Tokenizer.decode`; byte-level BPE must also give the text back exactly.
A malformed or unsupported tokenizer.json exits 2 naming the part, writing
nothing.

Usage: hf_tokenizer_test.py PATH/TO/pipetrain   (PIPETRAIN_PYDEPS: where
scripts/install_transformers.sh put tokenizers; default /opt/pipetrain/pydeps)
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.environ.get("PIPETRAIN_PYDEPS", "/opt/pipetrain/pydeps"))
try:
    import tokenizers
    from tokenizers import (Tokenizer, decoders, models, normalizers, pre_tokenizers,
                            processors, trainers)
except ImportError:  # pragma: no cover - reported as a skip by ctest
    print("tokenizers is not installed (scripts/install_transformers.sh)")
    sys.exit(77)

PIPETRAIN = None
FORTUNES = "/usr/share/games/fortunes"

# Lines that reach what the fortunes do not: accents and their decompositions,
# Greek final sigma, Turkish dotted I, CJK (BERT pads it), emoji (4-byte UTF-8),
# fullwidth and ligature forms (NFKC), zero-width and odd whitespace (Nmt, \s),
# control characters (BERT drops them), special tokens inside text, digits.
EXTRA = [
    "Café crème brûlée, naïve résumé — déjà vu.",
    "Cafe\u0301 composed by hand; Ångström; ÆØÅ æøå",
    "ΣΊΣΥΦΟΣ ὈΔΥΣΣΕΎΣ σοφός",
    "İstanbul ışık İI ıi",
    "北京欢迎你，東京もよろしく。한국어 텍스트",
    "emoji 😀🎉👩‍💻 and flags 🇫🇷🇯🇵",
    "ＦＵＬＬＷＩＤＴＨ １２３ ﬁﬂ ㎏ ① ½",
    "zero\u200bwidth\ufeffjoin\u200dno\u00a0break\u2028line\u2029para\u0085nel\x0bvt",
    "tabs\tand  two   spaces    four",
    "control\x01\x02chars\x7f\u009fhere\ufffd",
    "[CLS] inline [SEP] and [MASK] tokens <s> and </s> <mask>  spaced <|endoftext|>x",
    "numbers 3.14159 1,000,000 2024-12-07 ٣٤٥ ໓",
    "   leading and trailing spaces   ",
    "don't won't I'm you're they've it's y'all",
    "",
    "a",
    "\u2581metaspace\u2581char and ▁▁ doubled",
]


def run(*args, timeout=300):
    return subprocess.run([PIPETRAIN, *map(str, args)], capture_output=True, timeout=timeout)


def corpus_lines():
    lines = []
    for path in sorted(glob.glob(os.path.join(FORTUNES, "*.u8"))):
        with open(path, encoding="utf-8") as f:
            lines += f.read().split("\n")
    return [l for l in lines if l != "%"] + EXTRA


def trained_tokenizers(lines):
    """name -> Tokenizer, each trained on the fortunes."""
    out = {}
    special = ["<|endoftext|>"]

    def gpt2():
        t = Tokenizer(models.BPE())
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.decoder = decoders.ByteLevel()
        t.post_processor = processors.ByteLevel(trim_offsets=True)
        t.train_from_iterator(lines, trainers.BpeTrainer(
            vocab_size=3000, special_tokens=special, show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        return t
    out["gpt2-bpe"] = gpt2()

    def roberta():
        t = Tokenizer(models.BPE())
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        t.decoder = decoders.ByteLevel()
        t.train_from_iterator(lines, trainers.BpeTrainer(
            vocab_size=2000, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
            show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        t.add_special_tokens([tokenizers.AddedToken("<mask>", lstrip=True)])
        t.post_processor = processors.RobertaProcessing(("</s>", t.token_to_id("</s>")),
                                                        ("<s>", t.token_to_id("<s>")))
        return t
    out["roberta-bpe"] = roberta()

    def bert(lowercase):
        t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        t.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
        t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        t.decoder = decoders.WordPiece()
        t.train_from_iterator(lines, trainers.WordPieceTrainer(
            vocab_size=2500, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
            show_progress=False))
        t.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", t.token_to_id("[CLS]")), ("[SEP]", t.token_to_id("[SEP]"))])
        return t
    out["bert-wordpiece-uncased"] = bert(True)
    out["bert-wordpiece-cased"] = bert(False)

    def unigram():
        t = Tokenizer(models.Unigram())
        t.normalizer = normalizers.Sequence([
            normalizers.Nmt(), normalizers.NFKC(),
            normalizers.Replace(tokenizers.Regex(" {2,}"), " ")])
        t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", add_prefix_space=True)
        t.decoder = decoders.Metaspace(replacement="\u2581", add_prefix_space=True)
        t.train_from_iterator(lines, trainers.UnigramTrainer(
            vocab_size=2000, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
            show_progress=False))
        t.post_processor = processors.TemplateProcessing(
            single="$A </s>", special_tokens=[("</s>", t.token_to_id("</s>"))])
        return t
    out["t5-unigram"] = unigram()

    def llama():
        # Llama's layout: no pre-tokenizer, spaces made "▁" by the normalizer, a
        # BPE that falls back to <0xXX> byte tokens for characters it lacks.
        t = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
        t.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                             normalizers.Replace(" ", "\u2581")])
        t.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                       decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        byte_tokens = ["<0x%02X>" % b for b in range(256)]
        t.train_from_iterator(lines, trainers.BpeTrainer(
            vocab_size=2500, special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens,
            limit_alphabet=80, show_progress=False))
        t.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", t.token_to_id("<s>"))])
        # Llama's byte tokens are vocabulary, not added tokens: drop them from
        # added_tokens so that only the model's byte fallback produces them.
        j = json.loads(t.to_str())
        j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] not in byte_tokens]
        return Tokenizer.from_str(json.dumps(j))
    out["llama-bpe-bytefallback"] = llama()

    def wordlevel():
        t = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                             normalizers.Lowercase(), normalizers.Strip()])
        t.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation("contiguous"),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.Split("-", "merged_with_next"), pre_tokenizers.CharDelimiterSplit("_")])
        t.train_from_iterator(lines, trainers.WordLevelTrainer(
            vocab_size=5000, special_tokens=["[UNK]"], show_progress=False))
        return t
    out["wordlevel-misc"] = wordlevel()

    def t5():
        # T5's layout: a SentencePiece Unigram converted by transformers (its Precompiled
        # normalization map, Metaspace), "$A </s>", sentinel tokens. The SentencePiece model
        # comes from `pipetrain tokenize`.
        from transformers.convert_slow_tokenizer import SpmConverter
        with tempfile.TemporaryDirectory() as d:
            corpus = os.path.join(d, "corpus.txt")
            with open(corpus, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
            model = corpus[:-4] + ".model"
            r = run("tokenize", corpus, "--vocab", 1000, "-o", model)
            if r.returncode != 0:  # built without SentencePiece: the test says so and skips
                return r.stderr.decode()

            class Slow:  # what SpmConverter reads of a slow tokenizer
                vocab_file = model
            t = SpmConverter(Slow()).converted()
        t.post_processor = processors.TemplateProcessing(
            single="$A </s>", special_tokens=[("</s>", t.token_to_id("</s>"))])
        t.add_special_tokens([f"<extra_id_{i}>" for i in range(3)])
        return t
    out["t5-precompiled-unigram"] = t5()

    def whitespace_bpe():
        t = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##",
                                 end_of_word_suffix="</w>"))
        t.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Lowercase()])
        t.pre_tokenizer = pre_tokenizers.Whitespace()
        t.decoder = decoders.BPEDecoder(suffix="</w>")
        t.train_from_iterator(lines, trainers.BpeTrainer(
            vocab_size=2000, special_tokens=["[UNK]"], continuing_subword_prefix="##",
            end_of_word_suffix="</w>", show_progress=False, limit_alphabet=100))
        return t
    out["whitespace-bpe-suffix"] = whitespace_bpe()
    return out


class HfTokenizerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.lines = corpus_lines()
        cls.corpus = os.path.join(cls.dir, "corpus.txt")
        with open(cls.corpus, "w", encoding="utf-8") as f:
            f.write("\n".join(cls.lines) + "\n")
        # Trained on every sixth line (quicker), checked on every line.
        cls.tokenizers = trained_tokenizers(cls.lines[: -len(EXTRA)][::6])

    def check_family(self, name):
        tok = self.tokenizers[name]
        path = os.path.join(self.dir, name + ".json")
        tok.save(path)
        ids_path = os.path.join(self.dir, name + ".npy")
        r = run("tokenize", "--tokenizer", path, "--encode", self.corpus, "-o", ids_path)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        got = np.load(ids_path)
        expected = [e.ids for e in tok.encode_batch(self.lines)]
        self.assertEqual(got.shape, (len(self.lines), max(map(len, expected))))
        for i, (line, want) in enumerate(zip(self.lines, expected)):
            row = got[i][got[i] != -1].tolist()
            self.assertEqual(row, want, f"{name}, line {i} {line!r}: pipetrain {row}, "
                             f"tokenizers {want} ({tok.encode(line).tokens})")
        # Decoding: the library's text for every row, and for byte-level BPE the line itself.
        r = run("tokenize", "--tokenizer", path, "--decode", ids_path)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        decoded = r.stdout.decode("utf-8").split("\n")[:-1]
        want_text = tok.decode_batch(expected)
        self.assertEqual(len(decoded), len(self.lines))
        for i, (got_text, want) in enumerate(zip(decoded, want_text)):
            self.assertEqual(got_text, want, f"{name}, decoding line {i} {self.lines[i]!r}")
            if name == "gpt2-bpe" and "<|endoftext|>" not in self.lines[i]:
                self.assertEqual(got_text, self.lines[i])  # special tokens are not decoded
        return got

    def test_gpt2_byte_level_bpe(self):
        self.check_family("gpt2-bpe")

    def test_roberta_byte_level_bpe(self):
        self.check_family("roberta-bpe")

    def test_bert_wordpiece(self):
        self.check_family("bert-wordpiece-uncased")
        self.check_family("bert-wordpiece-cased")

    def test_unigram(self):
        self.check_family("t5-unigram")

    def test_t5_precompiled_unigram(self):
        if isinstance(self.tokenizers["t5-precompiled-unigram"], str):
            self.skipTest("no SentencePiece model: " + self.tokenizers["t5-precompiled-unigram"])
        self.check_family("t5-precompiled-unigram")

    def test_llama_bpe_with_byte_fallback(self):
        ids = self.check_family("llama-bpe-bytefallback")
        # The Unicode lines reach the fallback: byte tokens appear in the ids.
        byte_ids = {self.tokenizers["llama-bpe-bytefallback"].token_to_id("<0x%02X>" % b)
                    for b in range(256)}
        self.assertTrue(byte_ids & set(ids.flatten().tolist()))

    def test_wordlevel_and_other_pre_tokenizers(self):
        self.check_family("wordlevel-misc")

    def test_whitespace_bpe_with_prefix_and_suffix(self):
        self.check_family("whitespace-bpe-suffix")

    def test_sentence_pairs_frame_as_the_library_does(self):
        # encode(a, b): BERT's template ([CLS] a [SEP] b [SEP], b's part type 1), RoBERTa's
        # <s> a </s></s> b </s> (type 0), BertProcessing, templates without a pair ($A $B),
        # ByteLevel and no post-processor (a then b): ids and token types of 2,000 pairs.
        first, second = self.lines[0:4000:2] + EXTRA, self.lines[1:4001:2] + EXTRA[::-1]
        a_path, b_path = os.path.join(self.dir, "a.txt"), os.path.join(self.dir, "b.txt")
        for path, lines in ((a_path, first), (b_path, second)):
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        bert = self.tokenizers["bert-wordpiece-uncased"]
        bert_processing = Tokenizer.from_str(bert.to_str())
        bert_processing.post_processor = processors.BertProcessing(
            ("[SEP]", bert.token_to_id("[SEP]")), ("[CLS]", bert.token_to_id("[CLS]")))
        cases = {name: self.tokenizers[name] for name in (
            "bert-wordpiece-uncased", "roberta-bpe", "gpt2-bpe", "t5-unigram",
            "llama-bpe-bytefallback", "wordlevel-misc")}
        cases["bert-processing"] = bert_processing
        for name, tok in cases.items():
            with self.subTest(name):
                path = os.path.join(self.dir, name + "-pair.json")
                tok.save(path)
                ids_path, types_path = path[:-5] + ".npy", path[:-5] + "-types.npy"
                r = run("tokenize", "--tokenizer", path, "--encode", a_path, "--pair", b_path,
                        "-o", ids_path, "--type-ids", types_path)
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                ids, types = np.load(ids_path), np.load(types_path)
                want = tok.encode_batch(list(zip(first, second)))
                self.assertEqual(ids.shape[0], len(want))
                for i, e in enumerate(want):
                    row = ids[i][ids[i] != -1].tolist()
                    row_types = types[i][: len(row)].tolist()
                    self.assertEqual((row, row_types), (e.ids, e.type_ids),
                                     f"{name}, pair {i}: {first[i]!r} / {second[i]!r}")
        # Files of other lengths pair nothing: exit 2 naming both, nothing written.
        short = os.path.join(self.dir, "short.txt")
        with open(short, "w", encoding="utf-8") as f:
            f.write("one line\n")
        out = os.path.join(self.dir, "never.npy")
        r = run("tokenize", "--tokenizer", os.path.join(self.dir, "gpt2-bpe-pair.json"),
                "--encode", a_path, "--pair", short, "-o", out)
        self.assertEqual(r.returncode, 2, r.stderr.decode())
        self.assertIn("short.txt 1", r.stderr.decode())
        self.assertFalse(os.path.exists(out))

    def test_a_gpt_trains_and_generates_with_a_tokenizer_json(self):
        tok = os.path.join(self.dir, "lm.json")
        self.tokenizers["gpt2-bpe"].save(tok)
        gpt = os.path.join(self.dir, "gpt.onnx")
        r = run("zoo", "export", "gpt2", "--width-divisor", 16, "--layers", 2, "--vocab", 3000,
                "--seq-len", 16, "-o", gpt)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        trained = os.path.join(self.dir, "gpt-trained.onnx")
        r = run("train", gpt, "--data", "text:" + os.path.join(FORTUNES, "computers"),
                "--tokenizer", tok, "--loss", "cross-entropy", "--batch", 8, "--stages", 2,
                "--max-samples", 200, "--quiet", "--run-dir", os.path.join(self.dir, "run"),
                "-o", trained)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertRegex(r.stdout.decode(), r"perplexity [0-9.]+ \(unigram [0-9.]+\)")
        g = run("generate", trained, "--tokenizer", tok, "--prompt", "The computer", "--tokens",
                12, "--top-k", 4, "--seed", 3)
        self.assertEqual(g.returncode, 0, g.stderr.decode())
        self.assertTrue(g.stdout.decode().startswith("The computer"), g.stdout)
        self.assertGreater(len(g.stdout.decode().strip()), len("The computer"))

    def test_bad_tokenizer_files_exit_2_naming_the_part_and_write_nothing(self):
        good = json.loads(self.tokenizers["t5-unigram"].to_str())

        def variant(change):
            j = json.loads(json.dumps(good))
            change(j)
            return json.dumps(j)
        cases = {
            "truncated": ('{"model": ', "not a valid tokenizer.json"),
            "not a tokenizer": ('{"version": "1.0"}', 'no "model"'),
            "byte-level normalizer": (variant(lambda j: j.__setitem__(
                "normalizer", {"type": "ByteLevel"})), "unsupported normalizer 'ByteLevel'"),
            "charsmap": (variant(lambda j: j.__setitem__(
                "normalizer", {"type": "Precompiled", "precompiled_charsmap": "QAAAAA=="})),
                "Precompiled: precompiled_charsmap's trie"),
            "scripts": (variant(lambda j: j.__setitem__("pre_tokenizer", {"type": "UnicodeScripts"})),
                        "unsupported pre_tokenizer 'UnicodeScripts'"),
            "ctc": (variant(lambda j: j.__setitem__("decoder", {"type": "CTC"})),
                    "unsupported decoder 'CTC'"),
            "model": (variant(lambda j: j["model"].__setitem__("type", "Sentencepiece")),
                      "unsupported model 'Sentencepiece'"),
            "vocab entry": (variant(lambda j: j["model"]["vocab"].__setitem__(3, ["x"])),
                            "Unigram vocab entry 3 is not [piece, score]"),
            "regex": (variant(lambda j: j.__setitem__("pre_tokenizer", {
                "type": "Split", "pattern": {"Regex": "(["}, "behavior": "Isolated",
                "invert": False})), "regular expression '(['"),
            "behavior": (variant(lambda j: j.__setitem__("pre_tokenizer", {
                "type": "Split", "pattern": {"String": "-"}, "behavior": "Sideways",
                "invert": False})), "unsupported split behavior 'Sideways'"),
        }
        gpt2 = json.loads(self.tokenizers["gpt2-bpe"].to_str())
        gpt2["model"]["merges"][5] = "a b c"
        cases["merge"] = (json.dumps(gpt2), "BPE merge 5 'a b c' is not two tokens")
        gpt2["model"]["merges"][5] = "zzzq zzzr"
        cases["merge token"] = (json.dumps(gpt2), "BPE merge 5 ('zzzq zzzr'): the token 'zzzq' is not")
        for name, (text, message) in cases.items():
            path = os.path.join(self.dir, "bad.json")
            with open(path, "w") as f:
                f.write(text)
            out = os.path.join(self.dir, "bad_ids.npy")
            r = run("tokenize", "--tokenizer", path, "--encode", self.corpus, "-o", out)
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 2, f"{name}: {err}")
            self.assertIn(message, err, name)
            self.assertIn(path, err, name)
            self.assertEqual(len(err.strip().splitlines()), 1, f"{name}: {err}")
            self.assertFalse(os.path.exists(out), name)

    def test_bad_command_lines_exit_2(self):
        tok = os.path.join(self.dir, "cmdline.json")
        self.tokenizers["gpt2-bpe"].save(tok)
        ids = os.path.join(self.dir, "cmdline.npy")
        np.save(ids, np.array([[1, 2, 3], [4, -1, -1]], dtype=np.int64))
        too_big = os.path.join(self.dir, "too_big.npy")
        np.save(too_big, np.array([[1, 99999]], dtype=np.int64))
        floats = os.path.join(self.dir, "floats.npy")
        np.save(floats, np.zeros((2, 2), dtype=np.float32))
        for args, message in [
            (["--tokenizer", tok], "give one of PATH"),
            (["--tokenizer", tok, "--encode", self.corpus], "-o ids.npy is required"),
            (["--encode", self.corpus, "-o", ids], "--tokenizer"),
            (["--tokenizer", tok, "--decode", too_big], "outside the vocabulary [0, 3000)"),
            (["--tokenizer", tok, "--decode", floats], "integer array"),
            (["--tokenizer", tok, "--decode", self.corpus], "not a .npy"),
            (["--tokenizer", os.path.join(self.dir, "none.json"), "--decode", ids], "cannot open"),
        ]:
            r = run("tokenize", *args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr.decode()}")
            self.assertIn(message, r.stderr.decode(), args)
        # A good decode of the same file, padding skipped.
        r = run("tokenize", "--tokenizer", tok, "--decode", ids)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        want = [self.tokenizers["gpt2-bpe"].decode([1, 2, 3]), self.tokenizers["gpt2-bpe"].decode([4])]
        self.assertEqual(r.stdout.decode().split("\n")[:-1], want)


if __name__ == "__main__":
    PIPETRAIN = sys.argv.pop(1)
    unittest.main()
