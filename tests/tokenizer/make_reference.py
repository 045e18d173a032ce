"""Writes the expected values of the tokenizer tests from the Hugging Face `tokenizers` library
(the version pinned in requirements.txt). Run once after changing the corpus or the tokenizers;
the outputs are committed and the tests compare against them:

  tests/data/tokenizers/<name>/encode_reference.jsonl
      {"text", "ids" (add_special_tokens=False), "ids_with_special", "decoded" (decode of ids,
      skip_special_tokens=False), "decoded_skip" (skip_special_tokens=True)}
  tests/data/tokenizers/<name>/decode_reference.jsonl
      {"ids" (random ids: byte tokens, special tokens, anything), "decoded", "decoded_skip"}
  A decoded value is null where the library panics instead of decoding.
  tests/data/tokenizers/variants/<name>/tokenizer.json
      small BPE tokenizers trained here with the library, each built from components that the
      real checkpoints above do not use (Lowercase, NFKC, NFD, NFKD, Strip, Punctuation, Digits,
      WhitespaceSplit, Whitespace, Split behaviors and invert, Metaspace "always" with split,
      ByteLevel add_prefix_space, ignore_merges, continuing_subword_prefix, end_of_word_suffix,
      unk/fuse_unk, "a b" merges, lstrip/rstrip/single_word/normalized added tokens, the decoders
      BPEDecoder, Strip, Replace, Metaspace, and none).

The library's BPE trainer is not deterministic for the lowercase-nfkc-punctuation-digits variant
(ties between merges), so a new run may rewrite that folder; any run gives valid references.

"ids_with_special" is the library's encode(add_special_tokens=True), except for tokenizers whose
tokenizer_config.json sets add_bos_token/add_eos_token: there it is transformers' rule for those
flags (BOS + ids + EOS as the flags say), which the engine follows.

Usage: .venv/bin/python tests/tokenizer/make_reference.py
"""
import json
import pathlib
import random

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, trainers

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "tokenizers"
REAL = ["deepseek-v3", "gpt-neox-olmo", "dolma2", "mistral-v1-legacy", "mistral-v1-metaspace",
        "tortoise"]

SCRIPTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein. Straße, Maß, ẞ.",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "Γαζέες καὶ μυρτιὲς δὲν θὰ βρῶ πιὰ στὸ χρυσαφὶ ξέφωτο.",
    "我能吞下玻璃而不伤身体。你好，世界！",
    "私はガラスを食べられます。それは私を傷つけません。カタカナ、ひらがな。",
    "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요.",
    "أنا قادر على أكل الزجاج و هذا لا يؤلمني.",
    "אני יכול לאכול זכוכית וזה לא מזיק לי.",
    "मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती.",
    "ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ",
    "მინას ვჭამ და არა მტკივა.",
    "ብርጭቆ መብላት እችላለሁ፣ አይጎዳኝም።",
    "Tôi có thể ăn thủy tinh mà không hại gì.",
    "Mogę jeść szkło i mi nie szkodzi. Zażółć gęślą jaźń.",
    "Ég get etið gler án þess að meiða mig.",
    "İstanbul'da ıslak ılık bir gün; ΣΊΣΥΦΟΣ ὅς.",
]
CODE = [
    "def f(x):\n    return x ** 2  # square\n\n\nprint(f(12))\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    '{"key": [1, 2.5, -3e10, null, true], "nested": {"a": "b\\u00e9"}}',
    "<html><body class=\"x\">&amp; &lt;tag&gt; <br/></body></html>",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "https://example.com/path?query=a%20b&x=1#frag mail: someone@example.org",
    "    indented\n\t\ttabs\r\n\r\nwindows\rmac",
]
EDGES = [
    "", " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", " \t \n ", "\u00a0", "\u3000", "\u0085",
    "\u2028", "\u200b", "\ufeff", "a", "A", "I'm", "they'll've", "DON'T", "'s", " 's", "''",
    "Hello world", "Hello  world", " Hello", "Hello ", "  leading and trailing  ",
    "12345678901234567890", "3.14159", "1,000,000", "٣٤٥", "２０２４年", "Ⅻ ⅻ", "x²+y³", "½ ¼",
    "👍", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇯🇵", "e\u0301", "\u00e9", "A\u030a", "\u212b", "ﬁﬂ", "ｈｅｌｌｏ",
    "㌀", "Ǆǅǆ", "ﷺ", "\ufffd", "\ufffd\ufffd", "\x00", "\x01\x02\x1f\x7f", "\ue000\U000f0000",
    "\U0001d400\U0001d7ce", "\U00010348", "!!!???...", "---===___", "@#$%^&*()", "\\\\n",
    "a" * 1000, " " * 300, "\n" * 100, "ab" * 300, "中" * 300, "🙂" * 100, "1" * 200,
    "A.B.C.D", "snake_case_name", "CamelCaseName", "kebab-case-name", "x=y+z", "i++", "a\tb\nc",
]


# Characters of recent Unicode versions (15.0-16.0: emoji, CJK extensions H and I, new scripts and
# letters), which older Unicode tables classify differently.
RECENT = [
    "I love 🩷🩷 and 🫨!", "🫎🪿🪼🫛 new emoji", "🫩🫆🪾 (16.0)", "\U00031350\U00032037 ext H",
    "\U0002EBF0\U0002EC00 ext I", "x\U0001CCE7y\U0001FBF8", "\u32FF \u1C89\u1C8A \uA7CB\uA7CC",
    "\U00011F04\U00011F41 \U0001E4D0\U0001E4EC \U000105C0", "Z\u0301\u0327\u0345\u0334",
]


def random_unicode(rng, n):
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x23FF),
              (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF),
              (0x1F300, 0x1F6FF), (0x1D400, 0x1D7FF), (0x9, 0xD)]
    chars = []
    for _ in range(n):
        lo, hi = rng.choice(blocks)
        chars.append(chr(rng.randint(lo, hi)))
    return "".join(chars)


def corpus(specials):
    rng = random.Random(20240603)
    texts = list(EDGES) + SCRIPTS + CODE + RECENT
    fragments = SCRIPTS + CODE + EDGES[:60]
    for special in specials[:12]:
        texts += [special, f"a{special}b", f" {special} ", f"text {special}\n{special}{special}",
                  f"{special.lower()}{special.upper()}", special[:-1]]
    for _ in range(150):
        pieces = rng.sample(fragments, rng.randint(2, 4))
        if specials and rng.random() < 0.3:
            pieces.insert(rng.randint(0, len(pieces)), rng.choice(specials))
        texts.append(rng.choice(["", " ", "\n", "  "]).join(pieces))
    for _ in range(120):
        texts.append(random_unicode(rng, rng.randint(1, 60)))
    for _ in range(30):
        texts.append("".join(rng.choice([" ", "  ", "\t", "\n", "\r\n", "a", "1", ".", "é", "中"])
                             for _ in range(rng.randint(1, 40))))
    return texts


def training_text():
    return SCRIPTS * 4 + CODE * 4 + EDGES + [random_unicode(random.Random(7), 200)]


def special_contents(tokenizer):
    return [t.content for _, t in sorted(tokenizer.get_added_tokens_decoder().items())]


def with_special_rule(directory):
    config = directory / "tokenizer_config.json"
    if not config.exists():
        return None
    c = json.loads(config.read_text(encoding="utf-8"))
    if "add_bos_token" not in c and "add_eos_token" not in c:
        return None
    content = lambda v: v["content"] if isinstance(v, dict) else v
    return (content(c.get("bos_token")) if c.get("add_bos_token") else None,
            content(c.get("eos_token")) if c.get("add_eos_token") else None)


def write_references(directory):
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    rule = with_special_rule(directory)
    specials = special_contents(tokenizer)
    rows = []
    for text in corpus(specials):
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if rule is None:
            with_special = tokenizer.encode(text, add_special_tokens=True).ids
        else:
            bos, eos = rule
            with_special = ([tokenizer.token_to_id(bos)] if bos else []) + ids + (
                [tokenizer.token_to_id(eos)] if eos else [])
        rows.append({"text": text, "ids": ids, "ids_with_special": with_special,
                     "decoded": decode(tokenizer, ids, False),
                     "decoded_skip": decode(tokenizer, ids, True)})
    write_jsonl(directory / "encode_reference.jsonl", rows)

    rng = random.Random(99)
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    byte_ids = sorted(i for t, i in vocab.items() if len(t) == 6 and t.startswith("<0x"))
    special_ids = [tokenizer.token_to_id(s) for s in specials]
    rows = []
    for _ in range(200):
        ids = []
        for _ in range(rng.randint(1, 30)):
            pool = rng.choice([range(size), byte_ids or range(size), special_ids or range(size),
                               range(min(size, 300))])
            ids.append(rng.choice(list(pool)))
        rows.append({"ids": ids, "decoded": decode(tokenizer, ids, False),
                     "decoded_skip": decode(tokenizer, ids, True)})
    write_jsonl(directory / "decode_reference.jsonl", rows)


def decode(tokenizer, ids, skip):
    """The library's decode, or None where it panics (its Strip decoder on an empty text)."""
    try:
        return tokenizer.decode(ids, skip_special_tokens=skip)
    except BaseException:  # pyo3's PanicException derives from BaseException
        return None


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def add_byte_fallback_tokens(config):
    vocab = config["model"]["vocab"]
    next_id = max(vocab.values()) + 1
    for b in range(256):
        name = f"<0x{b:02X}>"
        if name not in vocab:
            vocab[name] = next_id
            next_id += 1


def variant(name, model, normalizer, pre_tokenizer, decoder, trainer, added=(), special=(),
            edit=None):
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    if decoder is not None:
        tokenizer.decoder = decoder
    tokenizer.train_from_iterator(training_text(), trainer)
    tokenizer.add_tokens(list(added))
    tokenizer.add_special_tokens(list(special))
    config = json.loads(tokenizer.to_str())
    if edit:
        edit(config)
    directory = DATA / "variants" / name
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(config, ensure_ascii=False)
    Tokenizer.from_str(text)  # the library must accept the edited file
    (directory / "tokenizer.json").write_text(text + "\n", encoding="utf-8")
    return directory


def legacy_merges(config):
    config["model"]["merges"] = [" ".join(pair) for pair in config["model"]["merges"]]


def variants():
    yield variant(
        "lowercase-nfkc-punctuation-digits",
        models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"),
        normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip()]),
        pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                 pre_tokenizers.Punctuation("isolated"),
                                 pre_tokenizers.Digits(individual_digits=True)]),
        decoders.BPEDecoder(suffix="</w>"),
        trainers.BpeTrainer(vocab_size=700, special_tokens=["[UNK]"], continuing_subword_prefix="##",
                            end_of_word_suffix="</w>"),
        added=[AddedToken("hello", single_word=True, normalized=True),
               AddedToken("WORLD", normalized=True)],
        special=[AddedToken("[MASK]", lstrip=True, special=True),
                 AddedToken("[SEP]", rstrip=True, special=True)])
    yield variant(
        "split-behaviors-nfd-byte-fallback",
        models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True),
        normalizers.NFD(),
        pre_tokenizers.Sequence([
            pre_tokenizers.Split(" ", "merged_with_previous"),
            pre_tokenizers.Split(Regex(r"\d+"), "merged_with_next"),
            pre_tokenizers.Split(Regex(r"[aeiou]"), "contiguous"),
            pre_tokenizers.Split(Regex(r"[,;]"), "removed"),
            pre_tokenizers.Split(Regex(r"[\p{L}\p{M}]+"), "removed", invert=True),
            pre_tokenizers.Split(Regex(r"x"), "merged_with_previous", invert=True)]),
        decoders.Sequence([decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 0, 1)]),
        trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>"]),
        special=[AddedToken("<|sep|>", special=True, single_word=True)],
        edit=add_byte_fallback_tokens)
    yield variant(
        "metaspace-always-split",
        models.BPE(byte_fallback=True),
        normalizers.Sequence([normalizers.Replace(Regex(r"\s+"), " "), normalizers.NFC()]),
        pre_tokenizers.Sequence([pre_tokenizers.Metaspace("▁", prepend_scheme="always", split=True),
                                 pre_tokenizers.Digits(individual_digits=False)]),
        decoders.Sequence([decoders.Metaspace("▁", prepend_scheme="always"),
                           decoders.ByteFallback(), decoders.Fuse()]),
        trainers.BpeTrainer(vocab_size=600),
        added=[AddedToken("<|tool|>", normalized=False, lstrip=True, rstrip=True)],
        special=[AddedToken("<pad>", special=True)],
        edit=add_byte_fallback_tokens)
    yield variant(
        "bytelevel-prefix-ignore-merges",
        models.BPE(ignore_merges=True),
        normalizers.Lowercase(),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
        decoders.ByteLevel(),
        trainers.BpeTrainer(vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
        added=[AddedToken(" spaced ", normalized=True), AddedToken("<tag>", normalized=False,
                                                                   single_word=True)],
        special=[AddedToken("<|end|>", special=True, lstrip=True, rstrip=True)],
        edit=legacy_merges)
    yield variant(
        "whitespace-nfkd-no-decoder",
        models.BPE(unk_token="?"),
        normalizers.NFKD(),
        pre_tokenizers.Whitespace(),
        None,
        trainers.BpeTrainer(vocab_size=400, special_tokens=["?"]),
        added=[AddedToken("ﬁx", normalized=True)],
        edit=legacy_merges)
    yield variant(
        "replace-decoder-char-delimiter",
        models.BPE(unk_token="<unk>"),
        normalizers.Prepend("_"),
        pre_tokenizers.Sequence([pre_tokenizers.CharDelimiterSplit("_"),
                                 pre_tokenizers.Split(Regex(r"^\s+|\s+$"), "isolated")]),
        decoders.Sequence([decoders.Replace(Regex(r"[aeiou]{2}"), "~"), decoders.Strip("x", 1, 1)]),
        trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>"]))


def main():
    for name in REAL:
        write_references(DATA / name)
    for directory in variants():
        write_references(directory)


if __name__ == "__main__":
    main()
