"""The engine's tokenizer against the Hugging Face `tokenizers` library run live (pinned in
requirements.txt), on random texts generated here with a fixed seed; the committed references
(make_reference.py) remain the main proof, this adds texts they do not contain."""
import json
import random
import subprocess
import zlib

import pytest

tokenizers = pytest.importorskip("tokenizers")

DATA = "tests/data/tokenizers"
NAMES = ["deepseek-v3", "gpt-neox-olmo", "dolma2", "mistral-v1-legacy", "mistral-v1-metaspace",
         "variants/lowercase-nfkc-punctuation-digits", "variants/metaspace-always-split"]
ALPHABET = (list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,;:!?'\"()[]{}<>/\\-_=+*&^%$#@~`|")
            + [" ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u3000", "\u0085"]
            + list("éüßçñøåæœ") + list("你好世界中文日本語カタカナ한국어") + list("привет мир")
            + ["😀", "👍🏽", "🇫🇷", "\u200d", "e\u0301", "ﬁ", "²", "٣", "Ⅻ", "\ufffd"]
            + ["<s>", "</s>", "<|endoftext|>", "<｜User｜>", "<｜end▁of▁sentence｜>", "[MASK]", "<pad>"])


def random_texts(seed, n):
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 80))) for _ in range(n)]


@pytest.mark.parametrize("name", NAMES)
def test_random_texts_match_library(deepinfer_bin, root, name):
    library = tokenizers.Tokenizer.from_file(str(root / DATA / name / "tokenizer.json"))
    texts = random_texts(zlib.crc32(name.encode()), 300)
    proc = subprocess.run([deepinfer_bin, "tokenize", "--model", f"{DATA}/{name}"],
                          input="".join(json.dumps({"text": t}) + "\n" for t in texts),
                          capture_output=True, text=True, cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ours = [json.loads(l)["ids"] for l in proc.stdout.split("\n") if l]
    for text, ids in zip(texts, ours):
        assert ids == library.encode(text, add_special_tokens=False).ids, repr(text)
    proc = subprocess.run([deepinfer_bin, "detokenize", "--model", f"{DATA}/{name}"],
                          input="".join(json.dumps({"ids": i}) + "\n" for i in ours),
                          capture_output=True, text=True, cwd=root, timeout=120)
    decoded = [json.loads(l)["text"] for l in proc.stdout.split("\n") if l]
    for ids, text in zip(ours, decoded):
        assert text == library.decode(ids, skip_special_tokens=False), ids
