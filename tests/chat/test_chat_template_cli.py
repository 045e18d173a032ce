"""`deepinfer chat-template` against Hugging Face transformers.

Expected values:
- tests/data/chat/deepseek_v3_chat_golden.jsonl: the shared fixture chat_golden.jsonl
  (transformers' renderings and token ids with the real DeepSeek-V3 tokenizer).
- tests/data/chat/reference/deepseek-v3-tokenized.jsonl: apply_chat_template(tokenize=False and
  tokenize=True) with transformers 4.57.1 on the same tokenizer, written by make_reference.py.
"""
import json
import subprocess

import pytest

MODEL = "tests/data/tokenizers/deepseek-v3"


def run_cli(deepinfer_bin, root, lines, model=MODEL):
    proc = subprocess.run([deepinfer_bin, "chat-template", "--model", str(root / model)],
                          input="".join(line + "\n" for line in lines), capture_output=True, text=True,
                          timeout=60)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_shared_golden_renders_and_ids(deepinfer_bin, root):
    rows = read_jsonl(root / "tests/data/chat/deepseek_v3_chat_golden.jsonl")
    requests = [json.dumps({"messages": r["messages"], "add_generation_prompt": r["add_generation_prompt"]},
                           ensure_ascii=False) for r in rows]
    rc, out, err = run_cli(deepinfer_bin, root, requests)
    assert rc == 0, err
    assert len(out) == len(rows)
    for row, got in zip(rows, out):
        assert got == {"rendered": row["rendered"], "ids": row["ids"]}


def test_transformers_reference_with_tools_and_kwargs(deepinfer_bin, root):
    rows = read_jsonl(root / "tests/data/chat/reference/deepseek-v3-tokenized.jsonl")
    assert any("tools" in r["request"] for r in rows)
    rc, out, err = run_cli(deepinfer_bin, root, [json.dumps(r["request"], ensure_ascii=False) for r in rows])
    assert rc == 0, err
    for row, got in zip(rows, out):
        assert got == {"rendered": row["rendered"], "ids": row["ids"]}, row["case"]


def test_bad_lines_get_errors_and_the_rest_continue(deepinfer_bin, root):
    good = json.dumps({"messages": [{"role": "user", "content": "Hello!"}], "add_generation_prompt": True})
    lines = [
        "not json",
        json.dumps({"add_generation_prompt": True}),
        # The DeepSeek-V3 template adds content to a str: a list of parts raises, as in transformers.
        json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}),
        json.dumps({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": "yes"}),
        json.dumps({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}}),
        good,
    ]
    rc, out, _ = run_cli(deepinfer_bin, root, lines)
    assert rc == 1
    assert len(out) == len(lines)
    for got in out[:-1]:
        assert set(got) == {"error"} and got["error"]
    assert "can only concatenate str" in out[2]["error"]
    assert out[-1] == {"rendered": "<｜begin▁of▁sentence｜><｜User｜>Hello!<｜Assistant｜>",
                       "ids": [0, 128803, 19923, 3, 128804]}


@pytest.mark.parametrize("model", ["tests/data/chat/templates", "tests/data/does-not-exist"])
def test_unloadable_model_exits_2(deepinfer_bin, root, model):
    rc, out, err = run_cli(deepinfer_bin, root, [], model=model)
    assert rc == 2
    assert out == []
    assert "error" in err
