"""Strict tools in DeepSeek-V4's DSML format end to end: `deepinfer serve` on a small random
DeepSeek-V4 checkpoint (tools/make_v4_checkpoint.py, the real V4 tokenizer) and the official
`openai` client. Sampling is at temperature 1, so the grammar, not the model, makes the calls
valid: the parsed `tool_calls` name declared tools and their `arguments` validate against the
tool's `parameters` with `jsonschema`, streamed and not, with n > 1, in chat and thinking mode;
with response_format too, the text then validating against its schema.
The tools are the function-calling schemas of JSONSchemaBench's Glaiveai2K collection
(tests/grammar/corpus), those DSML can list parameter by parameter (the others are refused naming
their field). A logit bias toward the tokens that close strings and DSML parameters keeps a random
model from writing values past max_tokens; choices cut by max_tokens ("length") are only counted,
and floors on the finished share keep the checks from passing vacuously."""
import json
import shutil
import subprocess
import sys

import jsonschema
import openai
import pytest

from server import ROOT, Server
from test_structured_output_tools import glaive_tools, validators

MESSAGES = [{"role": "user", "content": "Call a tool."}]
# DeepSeek-V4 token ids of '"', '",', '"}', '"]', '}', ']', '</' and ｜DSML｜ (a raw string value
# ends at "</｜DSML｜parameter>"; ｜DSML｜ is allowed only where a tag may stand).
CLOSING_BIAS = {"4": 10, "1760": 10, "62773": 10, "13747": 10, "95": 6, "63": 6, "1718": 11, "128825": 30}


@pytest.fixture(scope="module")
def v4_client(deepinfer_bin, tmp_path_factory):
    model = tmp_path_factory.mktemp("v4-tools") / "tiny-v4"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_v4_checkpoint.py"), str(model), "--layers", "2",
                    "--set", "vocab_size=129280"], check=True, capture_output=True, timeout=300)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ROOT / "tests" / "data" / "tokenizers" / "deepseek-v4" / name, model / name)
    s = Server(deepinfer_bin, model)
    yield openai.OpenAI(base_url=s.base + "/v1", api_key="unused", max_retries=0, timeout=300)
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="module")
def tools(v4_client):
    ok = []
    all_tools = glaive_tools()
    for tool in all_tools:
        try:
            v4_client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=1, tools=[tool])
            ok.append(tool)
        except openai.BadRequestError as e:
            assert e.body["param"] == "tools", e.body
            assert e.body["message"].startswith("'tools[0].function.parameters': "), e.body
    assert len(all_tools) == 40 and len(ok) >= 25, len(ok)
    return ok


def check_calls(calls, checks, only=None):
    assert calls
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert call.function.name in checks and (only is None or call.function.name == only), call
        checks[call.function.name].validate(json.loads(call.function.arguments))


def streamed_calls(v4_client, **kwargs):
    """Per choice: its calls [(name, arguments)] and finish reason, from the stream."""
    calls, finish = {}, {}
    for chunk in v4_client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            for d in c.delta.tool_calls or []:
                entry = calls.setdefault((c.index, d.index), ["", ""])
                entry[0] += d.function.name or ""
                entry[1] += d.function.arguments or ""
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    return {i: ([tuple(v) for (j, _), v in sorted(calls.items()) if j == i], reason) for i, reason in finish.items()}


def test_required_and_named_calls_validate_streamed_and_not(v4_client, tools):
    n_done = n_length = n_raw = 0
    offered = tools[:4]
    checks = validators(offered)
    named = offered[1]["function"]["name"]
    # Chat mode with "required", thinking mode (whose forced opening closes the reasoning) with a name.
    for choice_arg, only, thinking in (("required", None, False),
                                       ({"type": "function", "function": {"name": named}}, named, True)):
        kwargs = dict(model="tiny", messages=MESSAGES, tools=offered, tool_choice=choice_arg, temperature=1, seed=3,
                      n=2, max_tokens=200, logit_bias=CLOSING_BIAS,
                      extra_body={"chat_template_kwargs": {"thinking": thinking}})
        whole = v4_client.chat.completions.create(**kwargs)
        streamed = streamed_calls(v4_client, **kwargs) if thinking else None  # streamed once (time)
        for c in whole.choices:
            assert streamed is None or streamed[c.index][1] == c.finish_reason
            if c.finish_reason == "length":
                n_length += 1
                continue
            assert c.finish_reason == "tool_calls", c
            assert not c.message.content and not (c.message.model_extra or {}).get("reasoning_content")
            check_calls(c.message.tool_calls, checks, only)
            assert streamed is None or streamed[c.index][0] == [(t.function.name, t.function.arguments)
                                                                for t in c.message.tool_calls]
            n_raw += any(isinstance(v, str) for t in c.message.tool_calls
                         for v in json.loads(t.function.arguments).values())
            n_done += 1
    assert n_done >= 2 and n_done >= 0.5 * (n_done + n_length), (n_done, n_length)
    assert n_raw >= 1, n_raw


def test_auto_gives_text_or_valid_calls(v4_client, tools):
    offered = tools[:3]
    checks = validators(offered)
    # Toward the end of text (EOS, id 1), then toward the opening of the calls block ("\n\n", "<").
    biases = ({**CLOSING_BIAS, "1": 12, "271": 12, "30": 12}, {**CLOSING_BIAS, "1": 6, "271": 16, "30": 18})
    n_done = n_calls = 0
    for seed, bias in enumerate(biases):
        out = v4_client.chat.completions.create(model="tiny", messages=MESSAGES, tools=offered, temperature=1,
                                                seed=seed, n=4, max_tokens=160, logit_bias=bias)
        for c in out.choices:
            if c.message.tool_calls:  # calls complete before a cut are valid too
                check_calls(c.message.tool_calls, checks)
                n_calls += 1
            if c.finish_reason == "length":  # a block cut off is content, as DeepSeek's parser reads it
                continue
            n_done += 1
            assert "｜" not in (c.message.content or "") and "think>" not in (c.message.content or "")
            assert c.finish_reason == ("tool_calls" if c.message.tool_calls else "stop"), c
    assert n_done >= 4 and n_calls >= 1, (n_done, n_calls)


ANSWER = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 12}, "score": {"type": "integer"}},
          "required": ["answer", "score"], "additionalProperties": False}


def test_response_format_with_strict_tools_gives_valid_json_or_valid_calls(v4_client, tools):
    """The text follows response_format's schema, the calls their tools' schemas: either one."""
    offered = tools[:3]
    checks = validators(offered)
    answer = jsonschema.Draft202012Validator(ANSWER)
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER, "strict": True}}
    n_json = n_calls = 0
    # Away from the calls block ("\n\n", "\n"; toward "{") and toward it, streamed.
    for seed, bias, stream in ((0, {**CLOSING_BIAS, "271": -100, "201": -100, "93": 10}, False),
                               (1, {**CLOSING_BIAS, "271": 16, "30": 12}, True)):
        kwargs = dict(model="tiny", messages=MESSAGES, tools=offered, response_format=rf, temperature=1, seed=seed,
                      n=3, max_tokens=160, logit_bias=bias)
        if stream:
            content, calls, finish = {}, {}, {}
            for chunk in v4_client.chat.completions.create(stream=True, **kwargs):
                for c in chunk.choices:
                    content[c.index] = content.get(c.index, "") + (c.delta.content or "")
                    for d in c.delta.tool_calls or []:
                        calls.setdefault(c.index, []).append(d)
                    if c.finish_reason:
                        finish[c.index] = c.finish_reason
            choices = [(finish[i], content.get(i, ""), calls.get(i)) for i in finish]
        else:
            out = v4_client.chat.completions.create(**kwargs)
            choices = [(c.finish_reason, c.message.content or "", c.message.tool_calls) for c in out.choices]
        for finish_reason, text, tool_calls in choices:
            if tool_calls:  # calls complete before a cut are valid too
                check_calls(tool_calls, checks)
                n_calls += 1
            if finish_reason == "length":
                continue
            if tool_calls:
                assert finish_reason == "tool_calls" and not text
            else:
                assert finish_reason == "stop"
                answer.validate(json.loads(text))
                n_json += 1
    assert n_json >= 2 and n_calls >= 1, (n_json, n_calls)


def test_strict_tool_errors_name_the_field(v4_client):
    def bad(tools):
        with pytest.raises(openai.BadRequestError) as e:
            v4_client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=4, tools=tools)
        assert e.value.body["param"] == "tools", e.value.body
        return e.value.body["message"]

    assert "'tools[0].function.name'" in bad([{"type": "function", "function": {"name": "a\"b", "strict": True}}])
    assert "'tools[0].function.parameters': 'additionalProperties'" in bad(
        [{"type": "function", "function": {"name": "f", "strict": True, "parameters": {"type": "object"}}}])
    assert "'not'" in bad([{"type": "function", "function": {"name": "f", "strict": True,
                                                              "parameters": {"type": "object", "not": {}}}}])
