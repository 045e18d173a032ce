"""`deepinfer tokenize` / `detokenize`: the JSON-lines contract, on the committed goldens.

Expected values: tests/data/tokenizers/deepseek-v3/golden.jsonl (the team fixture, produced by the
`tokenizers` library) and each folder's encode_reference.jsonl (tests/tokenizer/make_reference.py).
"""
import json
import subprocess

import pytest

DATA = "tests/data/tokenizers"


def run(deepinfer_bin, root, args, lines):
    proc = subprocess.run([deepinfer_bin, *args], input="".join(l + "\n" for l in lines),
                          capture_output=True, text=True, cwd=root, timeout=120)
    return proc.returncode, [json.loads(l) for l in proc.stdout.split("\n") if l], proc.stderr


def golden(root):
    with open(root / DATA / "deepseek-v3" / "golden.jsonl", encoding="utf-8") as f:
        return [json.loads(l) for l in f]


def test_tokenize_matches_golden(deepinfer_bin, root):
    rows = golden(root)
    code, out, _ = run(deepinfer_bin, root, ["tokenize", "--model", f"{DATA}/deepseek-v3"],
                       [json.dumps({"text": r["text"]}) for r in rows])
    assert code == 0
    assert [o["ids"] for o in out] == [r["ids"] for r in rows]


def test_detokenize_matches_golden(deepinfer_bin, root):
    rows = golden(root)
    code, out, _ = run(deepinfer_bin, root, ["detokenize", "--model", f"{DATA}/deepseek-v3"],
                       [json.dumps({"ids": r["ids"]}) for r in rows])
    assert code == 0
    assert [o["text"] for o in out] == [r["decoded"] for r in rows]


@pytest.mark.parametrize("name", ["mistral-v1-legacy", "gpt-neox-olmo"])
def test_special_token_flags_match_reference(deepinfer_bin, root, name):
    with open(root / DATA / name / "encode_reference.jsonl", encoding="utf-8") as f:
        rows = [json.loads(l) for l in f][:100]
    code, out, _ = run(deepinfer_bin, root, ["tokenize", "--model", f"{DATA}/{name}", "--add-special-tokens"],
                       [json.dumps({"text": r["text"]}) for r in rows])
    assert code == 0
    assert [o["ids"] for o in out] == [r["ids_with_special"] for r in rows]
    code, out, _ = run(deepinfer_bin, root, ["detokenize", "--model", f"{DATA}/{name}", "--skip-special-tokens"],
                       [json.dumps({"ids": r["ids_with_special"]}) for r in rows])
    assert code == 0
    assert [o["text"] for o in out] == [r["decoded_skip"] for r in rows]


def test_deepseek_adds_bos_as_its_config_says(deepinfer_bin, root):
    # tokenizer_config.json: add_bos_token true, add_eos_token false; "Hello world" is [19923, 2058].
    code, out, _ = run(deepinfer_bin, root, ["tokenize", "--model", f"{DATA}/deepseek-v3", "--add-special-tokens"],
                       [json.dumps({"text": "Hello world"})])
    assert (code, out) == (0, [{"ids": [0, 19923, 2058]}])


def test_bad_lines_get_error_lines_and_the_rest_continue(deepinfer_bin, root):
    lines = ['{"text": "Hello world"}', "not json", '{"txt": "x"}', '{"text": 3}', "",
             '{"text": "\\ud800"}', '{"text": "a"}']
    code, out, _ = run(deepinfer_bin, root, ["tokenize", "--model", f"{DATA}/deepseek-v3"], lines)
    assert code == 1
    assert out[0] == {"ids": [19923, 2058]}
    assert all(set(o) == {"error"} and o["error"] for o in out[1:5])
    assert out[5] == {"ids": [67]}
    assert len(out) == 6  # the blank line gets no output


def test_detokenize_rejects_unknown_ids(deepinfer_bin, root):
    lines = ['{"ids": [19923, 999999]}', '{"ids": [-1]}', '{"ids": "x"}', '{"ids": [1.5]}', '{"ids": [19923]}']
    code, out, _ = run(deepinfer_bin, root, ["detokenize", "--model", f"{DATA}/deepseek-v3"], lines)
    assert code == 1
    assert "999999" in out[0]["error"] and "vocabulary" in out[0]["error"]
    assert all("error" in o for o in out[1:4])
    assert out[4] == {"text": "Hello"}


def test_missing_model_is_a_clear_failure(deepinfer_bin, root):
    code, out, err = run(deepinfer_bin, root, ["tokenize", "--model", f"{DATA}/missing"], ['{"text": "a"}'])
    assert code == 2 and out == []
    assert "tokenizer.json" in err


def test_empty_and_large_texts(deepinfer_bin, root):
    big = "word " * 200_000 + "中文" * 50_000
    code, out, _ = run(deepinfer_bin, root, ["tokenize", "--model", f"{DATA}/deepseek-v3"],
                       [json.dumps({"text": ""}), json.dumps({"text": big}, ensure_ascii=False)])
    assert code == 0 and out[0] == {"ids": []} and len(out[1]["ids"]) > 100_000
    code, back, _ = run(deepinfer_bin, root, ["detokenize", "--model", f"{DATA}/deepseek-v3"],
                        [json.dumps({"ids": out[1]["ids"]})])
    assert code == 0 and back[0]["text"] == big


def test_report_timing_counts_the_encoded_texts(deepinfer_bin, root):
    # The benchmark (bench/tokenizer/bench_encode.py) reads this line.
    code, out, err = run(deepinfer_bin, root, ["tokenize", "--model", f"{DATA}/deepseek-v3", "--report-timing"],
                         [json.dumps({"text": "Hello world"}), json.dumps({"text": "你好"})])
    timing = json.loads(err.strip().splitlines()[-1])
    assert code == 0 and len(out) == 2
    assert timing["texts"] == 2 and timing["bytes"] == 11 + 6
    assert timing["tokens"] == sum(len(o["ids"]) for o in out)
    assert timing["encode_seconds"] >= 0 and timing["encode_cpu_seconds"] >= 0
