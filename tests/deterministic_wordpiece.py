"""A WordPiece tokenizer whose vocabulary is the same on every run, for tests whose
figures (accuracies, loss curves) depend on it. The `tokenizers` library's
WordPieceTrainer breaks ties between equally frequent words in a random order (Rust's
hash maps): four trainings on the fortunes gave four vocabularies, and a test's
accuracy moved with them. Here the vocabulary is the special tokens, every character
alone and as a continuation ("##c"), then the most frequent words, ties by spelling.
"""
from collections import Counter


def wordpiece_tokenizer(texts, vocab_size, specials):
    """BERT's uncased normalizer and pre-tokenizer over a deterministic vocabulary."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    counts = Counter(w for t in texts
                     for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(t)))
    chars = sorted({c for w in counts for c in w})
    vocab = list(specials) + chars + ["##" + c for c in chars]
    seen = set(vocab)
    for word, _ in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0])):
        if len(vocab) >= vocab_size:
            break
        if word not in seen:
            vocab.append(word)
            seen.add(word)
    t = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    t.normalizer = normalizer
    t.pre_tokenizer = pre
    t.decoder = decoders.WordPiece()
    return t
