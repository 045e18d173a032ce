"""`deepinfer chat-template` on DeepSeek-V4 checkpoints, against DeepSeek's own encoder.

Expected values: tests/data/chat/deepseek-v4/golden.jsonl (the team fixture: encoding_dsv4.py's
encode_messages renderings, with the ids of the real V4 tokenizer in
tests/data/tokenizers/deepseek-v4). The checkpoint folders are that tokenizer with a config.json
naming the V4 or V4.1 architecture, which is what selects the encoder.
"""
import json
import shutil
import subprocess

import pytest

GOLDEN = "tests/data/chat/deepseek-v4/golden.jsonl"
TOKENIZER = "tests/data/tokenizers/deepseek-v4"


@pytest.fixture(params=["DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM"])
def v4_model(request, root, tmp_path):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(root / TOKENIZER / name, tmp_path / name)
    (tmp_path / "config.json").write_text(json.dumps({"architectures": [request.param]}))
    return tmp_path


def run_cli(deepinfer_bin, model, lines):
    proc = subprocess.run([deepinfer_bin, "chat-template", "--model", str(model)],
                          input="".join(line + "\n" for line in lines), capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def encode_rows(root):
    with open(root / GOLDEN, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["kind"] == "encode"]


def test_every_golden_conversation(deepinfer_bin, root, v4_model):
    rows = encode_rows(root)
    assert len(rows) == 29
    lines = [json.dumps({"messages": r["messages"], "thinking_mode": r["thinking_mode"], "options": r["options"]},
                        ensure_ascii=False) for r in rows]
    rc, out, err = run_cli(deepinfer_bin, v4_model, lines)
    assert rc == 0, err
    assert len(out) == len(rows)
    for row, got in zip(rows, out):
        assert got == {"rendered": row["rendered"], "ids": row["ids"]}, row["name"]


def test_request_tools_and_default_mode(deepinfer_bin, root, v4_model):
    # Top-level tools go on the system message; no thinking_mode means chat mode.
    row = next(r for r in encode_rows(root) if r["name"] == "parallel_tool_calls_results_reordered_chat")
    messages = row["messages"][1:]
    tools = row["messages"][0]["tools"]
    rc, out, err = run_cli(deepinfer_bin, v4_model, [json.dumps({"messages": messages, "tools": tools})])
    assert rc == 0, err
    assert out == [{"rendered": row["rendered"], "ids": row["ids"]}]


def test_bad_lines_name_the_problem(deepinfer_bin, v4_model):
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}
    lines = [
        json.dumps({"messages": [{"role": "user", "content": "x"}, call]}),
        json.dumps({"messages": [{"role": "wizard", "content": "x"}]}),
        json.dumps({"messages": [{"role": "user", "content": "x"}], "options": {"think_harder": True}}),
        json.dumps({"messages": [{"role": "user", "content": "x"}], "thinking_mode": "deep"}),
        json.dumps({"messages": [{"role": "user", "content": "Hello!"}]}),
    ]
    rc, out, _ = run_cli(deepinfer_bin, v4_model, lines)
    assert rc == 1
    assert out[0] == {"error": "messages[1]: tool_calls[0].function.arguments is not valid JSON"}
    assert out[1] == {"error": "messages[0]: unknown role 'wizard'"}
    assert out[2] == {"error": "unknown option 'think_harder'"}
    assert "thinking_mode" in out[3]["error"]
    assert out[4]["rendered"] == "<｜begin▁of▁sentence｜><｜User｜>Hello!<｜Assistant｜></think>"
