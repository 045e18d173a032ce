"""Reasoning end to end: a checkpoint with DeepSeek-R1's chat template (tests/data/chat/templates,
as published with R1) and <think>/</think> tokens, whose template opens <think> at the start of
the answer. Per R1's format everything up to </think> is reasoning; this random model never
writes </think>, so its whole answer must arrive as reasoning_content, streamed and not."""
import json

import openai
import pytest

from server import ROOT, Server, make_model


@pytest.fixture(scope="module")
def r1_server(deepinfer_bin, tmp_path_factory):
    base = tmp_path_factory.mktemp("r1")
    tok_dir = base / "tokenizer"
    tok_dir.mkdir()
    src = ROOT / "tests" / "data" / "tokenizers" / "deepseek-v3"
    tokenizer = json.loads((src / "tokenizer.json").read_text())
    for i, content in enumerate(["<think>", "</think>"]):
        tokenizer["added_tokens"].append({"id": 128815 + i, "content": content, "single_word": False, "lstrip": False,
                                          "rstrip": False, "normalized": True, "special": False})
    (tok_dir / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False))
    config = json.loads((src / "tokenizer_config.json").read_text())
    config["chat_template"] = (ROOT / "tests" / "data" / "chat" / "templates" / "deepseek-r1.jinja").read_text()
    (tok_dir / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False))
    s = Server(deepinfer_bin, make_model(base / "model", tokenizer_dir=tok_dir))
    yield s
    assert s.stop() == 0


def test_reasoning_content_until_think_closes(r1_server):
    client = openai.OpenAI(base_url=r1_server.base + "/v1", api_key="x", max_retries=0)
    kwargs = dict(model="tiny", messages=[{"role": "user", "content": "Why is the sky blue?"}], max_tokens=8,
                  temperature=0, extra_body={"ignore_eos": True})
    whole = client.chat.completions.create(**kwargs)
    message = whole.choices[0].message
    reasoning = message.model_extra["reasoning_content"]
    assert reasoning and not message.content
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    streamed = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices)
    assert streamed == reasoning
    assert all(not c.choices[0].delta.content for c in chunks if c.choices)
