"""DeepSeek-V4 chat end to end: `deepinfer serve` on a small random DeepSeek-V4 checkpoint
(tools/make_v4_checkpoint.py, vocabulary 129,280) with the real V4 tokenizer
(tests/data/tokenizers/deepseek-v4), and the official `openai` client.

Expected values: the prompts DeepSeek's own encoder wrote for the goldens that an OpenAI request
can express (tests/data/chat/deepseek-v4/golden.jsonl, ids by the real V4 tokenizer), which the
server must produce token for token (through /tokenize and in usage.prompt_tokens); the request
mapping's rules from the V4 chat issue (chat mode unless reasoning_effort or
chat_template_kwargs thinking asks; thinking false forces chat mode); and, for answers, the same
request without streaming. A random model never closes </think>, so in thinking mode its whole
answer is reasoning_content."""
import json
import shutil
import subprocess
import sys

import openai
import pytest

from server import ROOT, Server

GOLDEN = ROOT / "tests" / "data" / "chat" / "deepseek-v4" / "golden.jsonl"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.",
                                           "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                                                          "required": ["location"]}}}]


@pytest.fixture(scope="module")
def v4_server(deepinfer_bin, tmp_path_factory):
    model = tmp_path_factory.mktemp("v4") / "tiny-v4"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_v4_checkpoint.py"), str(model), "--layers", "2",
                    "--set", "vocab_size=129280"], check=True, capture_output=True, timeout=300)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ROOT / "tests" / "data" / "tokenizers" / "deepseek-v4" / name, model / name)
    s = Server(deepinfer_bin, model)
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="module")
def v4_client(v4_server):
    return openai.OpenAI(base_url=v4_server.base + "/v1", api_key="unused", max_retries=0, timeout=120)


def golden_ids(name):
    rows = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]
    return next(r["ids"] for r in rows if r["name"] == name)


# <｜begin▁of▁sentence｜><｜User｜>Hello!<｜Assistant｜></think>: the golden single_user_chat
N_HELLO_CHAT = len(golden_ids("single_user_chat"))


def golden_requests():
    """Golden conversations as OpenAI requests: roles the API has, options it can say."""
    rows = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]
    out = []
    for row in rows:
        if row["kind"] != "encode" or set(row["options"]) - {"drop_thinking", "reasoning_effort"}:
            continue
        messages = row["messages"]
        if any(m["role"] not in ("system", "user", "assistant", "tool") or set(m) & {"task", "wo_eos", "mask"}
               or not isinstance(m.get("content", ""), (str, type(None))) for m in messages):
            continue
        body = {"messages": messages, "chat_template_kwargs": {}}
        if messages[0]["role"] == "system" and "tools" in messages[0]:  # tools as OpenAI requests carry them
            system = {k: v for k, v in messages[0].items() if k != "tools"}
            body["tools"] = messages[0]["tools"]
            body["messages"] = messages[1:] if system["content"] == "" else [system] + messages[1:]
        body["chat_template_kwargs"]["thinking"] = row["thinking_mode"] == "thinking"
        if "drop_thinking" in row["options"]:
            body["chat_template_kwargs"]["drop_thinking"] = row["options"]["drop_thinking"]
        if "reasoning_effort" in row["options"]:
            body["reasoning_effort"] = row["options"]["reasoning_effort"]
        out.append((row["name"], body, row["ids"]))
    return out


def test_prompts_are_deepseeks_token_for_token(v4_server):
    cases = golden_requests()
    assert len(cases) >= 12
    for name, body, ids in cases:
        status, reply = v4_server.post("/tokenize", body)
        assert status == 200, (name, reply)
        assert reply["tokens"] == ids, name


def test_chat_mode_by_default(v4_client):
    r = v4_client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hello!"}], max_tokens=6,
                                          temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.prompt_tokens == N_HELLO_CHAT
    assert not (r.choices[0].message.model_extra or {}).get("reasoning_content")
    assert r.choices[0].finish_reason == "length"


@pytest.mark.parametrize("how", [{"reasoning_effort": "high"}, {"chat_template_kwargs": {"thinking": True}}])
def test_thinking_gives_reasoning_content_streamed_and_not(v4_client, how):
    kwargs = dict(model="tiny", messages=[{"role": "user", "content": "Why is the sky blue?"}], max_tokens=8,
                  temperature=0, extra_body={"ignore_eos": True, **how})
    whole = v4_client.chat.completions.create(**kwargs)
    reasoning = whole.choices[0].message.model_extra["reasoning_content"]
    assert reasoning and not whole.choices[0].message.content
    chunks = list(v4_client.chat.completions.create(stream=True, **kwargs))
    streamed = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices)
    assert streamed == reasoning


def test_thinking_false_forces_chat_mode(v4_server):
    body = {"messages": [{"role": "user", "content": "Hello!"}], "reasoning_effort": "max",
            "chat_template_kwargs": {"thinking": False}}
    status, reply = v4_server.post("/tokenize", body)
    assert status == 200 and reply["tokens"] == golden_ids("single_user_chat")  # the chat-mode prompt


def test_multi_turn_with_tool_results(v4_client):
    messages = [
        {"role": "user", "content": "Compare Paris and Tokyo."},
        {"role": "assistant", "content": "Let me check both.", "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}},
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"}}]},
        {"role": "tool", "content": "22", "tool_call_id": "call_1"},
        {"role": "tool", "content": "18", "tool_call_id": "call_0"},
    ]
    kwargs = dict(model="tiny", messages=messages, tools=TOOLS, max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    whole = v4_client.chat.completions.create(**kwargs)
    assert whole.choices[0].finish_reason == "length"
    chunks = list(v4_client.chat.completions.create(stream=True, **kwargs))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (whole.choices[0].message.content or "")


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_tool_choice_starts_a_dsml_call(v4_client, v4_server, tool_choice):
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    r = v4_client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, tool_choice=tool_choice,
                                          max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    status, reply = v4_server.post("/tokenize", {"messages": messages, "tools": TOOLS})
    assert status == 200
    n_plain = reply["count"]
    # The forced DSML opening (\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=" and, named, the name)
    # is part of the prompt; a random model does not finish the call, so nothing is emitted half.
    assert r.usage.prompt_tokens > n_plain
    assert not r.choices[0].message.tool_calls


def test_tool_choice_none_leaves_tools_out(v4_client, v4_server):
    messages = [{"role": "user", "content": "Hello!"}]
    r = v4_client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, tool_choice="none", max_tokens=2,
                                          temperature=0)
    assert r.usage.prompt_tokens == N_HELLO_CHAT


def test_completion_prompts_get_no_bos(v4_client):
    r = v4_client.completions.create(model="tiny", prompt="Hello world", max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens == 2  # [19923, 2058]: add_bos_token is false in V4's tokenizer_config.json


@pytest.mark.parametrize("messages, words", [
    ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": "{oops"}}]}],
     "not valid JSON"),
    ([{"role": "user", "content": "x"}, {"role": "tool", "content": "42", "tool_call_id": "c9"}], "no tool call"),
    ([{"role": "wizard", "content": "x"}], "role"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}], "part"),
])
def test_bad_input_is_a_400_naming_the_problem(v4_client, messages, words):
    with pytest.raises(openai.BadRequestError) as e:
        v4_client.chat.completions.create(model="tiny", messages=messages, max_tokens=2)
    assert words in str(e.value)
