"""Encode throughput of DeepInfer's tokenizer against the Hugging Face `tokenizers` library, side
by side in one run, single thread, on the same texts.

The corpus (default 12 MB) is generated here from a fixed seed: prose assembled from the
tokenizer's own word tokens (English-like, Cyrillic, CJK, accented Latin), Python and C code,
numbers and dates, JSON, emoji, runs of whitespace, and text containing special-token strings,
cut into documents of 1-8 KB. Each side encodes every document once, one call per document
(no batch encode), add_special_tokens off; the ids of both sides must be identical. The timing
counts only the encode calls: the library's `Tokenizer.encode` from Python, and
`deepinfer tokenize --report-timing` (time inside Tokenizer::encode, without JSON I/O). Both wall
and CPU time are reported; the ratio uses CPU time, which other load on a shared machine
disturbs least (the wall-clock ratio is printed too).

Usage: .venv/bin/python bench/tokenizer/bench_encode.py [--model DIR] [--megabytes N]
           [--deepinfer build/deepinfer]
"""
import argparse
import hashlib
import json
import os
import pathlib
import platform
import random
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def word_pools(vocab):
    """Words of the vocabulary by script, from tokens that are whole words after a space."""
    pools = {"latin": [], "accented": [], "cyrillic": [], "cjk": [], "greek": []}
    for token in vocab:
        if token.startswith("Ġ"):
            token = token[1:]
        try:
            word = bytes(BYTE_DECODER[c] for c in token).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            continue
        if not word.isalpha() or len(word) < 2:
            continue
        if word.isascii():
            pools["latin"].append(word)
        elif all("\u0400" <= c <= "\u04ff" for c in word):
            pools["cyrillic"].append(word)
        elif all("\u4e00" <= c <= "\u9fff" or "\u3040" <= c <= "\u30ff" for c in word):
            pools["cjk"].append(word)
        elif all("\u0370" <= c <= "\u03ff" for c in word):
            pools["greek"].append(word)
        elif all(c < "\u0250" for c in word):
            pools["accented"].append(word)
    for words in pools.values():
        words.sort()
    return pools


def byte_decoder():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return chars


BYTE_DECODER = byte_decoder()

CODE = [
    "def {name}(items, limit={n}):\n    result = []\n    for i, item in enumerate(items):\n"
    "        if item is None or i >= limit:\n            continue\n        result.append(item * {n})\n"
    "    return result\n\n",
    "static int {name}(const char *buf, size_t len) {{\n\tint total = 0;\n\tfor (size_t i = 0; i < len; ++i)"
    " {{\n\t\ttotal += buf[i] ^ 0x{n:x};\n\t}}\n\treturn total;\n}}\n\n",
    '{{"id": {n}, "name": "{name}", "tags": ["a", "b"], "score": {n}.5, "ok": true}}\n',
    "<div class=\"{name}\"><a href=\"https://example.com/{name}?id={n}\">{name}</a></div>\n",
]
EMOJI = ["🙂", "🚀", "👍🏽", "🇫🇷", "❤️", "🎉", "👨‍👩‍👧", "✅"]
SPECIALS = ["<｜User｜>", "<｜Assistant｜>", "<|endoftext|>", "</s>", "<s>"]


def sentence(rng, words, n):
    return " ".join(rng.choice(words) for _ in range(n))


def document(rng, pools, size):
    parts = []
    length = 0
    while length < size:
        kind = rng.random()
        if kind < 0.45:
            s = sentence(rng, pools["latin"], rng.randint(5, 25)).capitalize() + rng.choice([". ", ", ", "! ", "? ", ".\n\n"])
        elif kind < 0.55:
            s = sentence(rng, pools["accented"] or pools["latin"], rng.randint(4, 15)) + ". "
        elif kind < 0.62:
            s = sentence(rng, pools["cyrillic"] or pools["latin"], rng.randint(4, 15)) + ". "
        elif kind < 0.70:
            s = "".join(rng.choice(pools["cjk"] or pools["latin"]) for _ in range(rng.randint(5, 30))) + "。"
        elif kind < 0.72:
            s = sentence(rng, pools["greek"] or pools["latin"], rng.randint(3, 10)) + ". "
        elif kind < 0.84:
            s = rng.choice(CODE).format(name=rng.choice(pools["latin"]), n=rng.randint(0, 100000))
        elif kind < 0.90:
            s = f"{rng.randint(1, 31)}/{rng.randint(1, 12)}/{rng.randint(1900, 2100)} {rng.random() * 1e6:.3f} " \
                f"{rng.randint(0, 10**12):,} "
        elif kind < 0.94:
            s = " ".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 5))) + " "
        elif kind < 0.97:
            s = rng.choice([" " * rng.randint(2, 40), "\t" * rng.randint(1, 6), "\n" * rng.randint(2, 5),
                            " \n \t\r\n"])
        else:
            s = f" {rng.choice(SPECIALS)} "
        parts.append(s)
        length += len(s.encode("utf-8"))
    return "".join(parts)


def make_corpus(vocab, megabytes, seed=12345):
    rng = random.Random(seed)
    pools = word_pools(vocab)
    texts, total = [], 0
    while total < megabytes * 1_000_000:
        text = document(rng, pools, rng.randint(1000, 8000))
        texts.append(text)
        total += len(text.encode("utf-8"))
    return texts, total


def ids_digest(all_ids):
    h = hashlib.sha256()
    for ids in all_ids:
        h.update(json.dumps(ids).encode())
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(ROOT / "tests/data/tokenizers/deepseek-v3"))
    parser.add_argument("--megabytes", type=float, default=12)
    parser.add_argument("--deepinfer", default=str(ROOT / "build" / "deepinfer"))
    args = parser.parse_args()

    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["RAYON_NUM_THREADS"] = "1"
    from tokenizers import Tokenizer

    library = Tokenizer.from_file(str(pathlib.Path(args.model) / "tokenizer.json"))
    texts, total_bytes = make_corpus(library.get_vocab(), args.megabytes)

    start, cpu_start = time.perf_counter(), time.process_time()
    library_ids = [library.encode(t, add_special_tokens=False).ids for t in texts]
    library_seconds = time.perf_counter() - start
    library_cpu_seconds = time.process_time() - cpu_start

    with tempfile.TemporaryDirectory() as tmp:
        corpus = pathlib.Path(tmp) / "corpus.jsonl"
        with open(corpus, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        with open(corpus, "rb") as stdin:
            run = subprocess.run([args.deepinfer, "tokenize", "--model", args.model, "--report-timing"],
                                 stdin=stdin, capture_output=True, check=True)
    ours_ids = [json.loads(line)["ids"] for line in run.stdout.splitlines()]
    timing = json.loads(run.stderr.decode().strip().splitlines()[-1])
    ours_seconds = timing["encode_seconds"]
    ours_cpu_seconds = timing["encode_cpu_seconds"]

    identical = ids_digest(ours_ids) == ids_digest(library_ids)
    cpu = next((line.split(":", 1)[1].strip() for line in
                subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if line.startswith("Model name")), platform.processor())
    mb = total_bytes / 1e6
    result = {
        "model": pathlib.Path(args.model).name,
        "corpus_mb": round(mb, 2),
        "documents": len(texts),
        "tokens": sum(len(i) for i in library_ids),
        "tokenizers_version": __import__("tokenizers").__version__,
        "library_mb_per_cpu_s": round(mb / library_cpu_seconds, 2),
        "deepinfer_mb_per_cpu_s": round(mb / ours_cpu_seconds, 2),
        "ratio_cpu": round(library_cpu_seconds / ours_cpu_seconds, 2),
        "library_mb_per_wall_s": round(mb / library_seconds, 2),
        "deepinfer_mb_per_wall_s": round(mb / ours_seconds, 2),
        "ratio_wall": round(library_seconds / ours_seconds, 2),
        "ids_identical": identical,
        "cpu": cpu,
        "cores": os.cpu_count(),
    }
    print(json.dumps(result, ensure_ascii=False, indent=2))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
