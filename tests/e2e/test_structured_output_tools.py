"""Strict tool arguments end to end: tools with `"strict": true` through the official client
against a real server on the tiny random DeepSeek-V3 model (its chat template's V3 tool-call
format; a second server with DeepSeek-V3.1's template checks that format), also together with
response_format (the text then validates against its schema). Sampling is at temperature 1, so the grammar, not the model, makes calls valid: the
parsed `tool_calls` name declared tools and their `arguments` validate against the tool's
`parameters` with `jsonschema`, streamed and not, with n > 1. The tools are the function-calling
schemas of JSONSchemaBench's Glaiveai2K collection in tests/grammar/corpus (real tool definitions),
named by their file (several share a function name). A logit bias toward the tokens that close
strings, objects and arrays (which the mask allows only where the grammar does) keeps a random
model from writing strings past max_tokens; choices cut by max_tokens ("length") are only
counted, and floors on the finished share keep the checks from passing vacuously."""
import json
import re

import jsonschema
import openai
import pytest

from server import ROOT

CORPUS = ROOT / "tests" / "grammar" / "corpus"
MESSAGES = [{"role": "user", "content": "Call a tool."}]
# DeepSeek-V3 token ids of '"', '",', '"}', '"]', '}', ']' and <｜tool▁calls▁end｜>.
CLOSING_BIAS = {"4": 10, "1760": 10, "62773": 10, "13747": 10, "95": 6, "63": 6, "128807": 10}


def glaive_tools():
    tools = []
    with open(CORPUS / "jsonschemabench_sample.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            m = re.search(r"Glaiveai2K/([a-z_]+_[0-9a-f]+)\.json", record["origin"])
            if m:
                tools.append({"type": "function", "function": {"name": m.group(1), "strict": True,
                                                               "parameters": record["schema"]}})
    return tools


TOOLS = glaive_tools()


def validators(tools):
    out = {}
    for t in tools:
        schema = t["function"].get("parameters", {"type": "object", "properties": {}, "additionalProperties": False})
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        out[t["function"]["name"]] = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return out


def supported_tools(client):
    """The Glaive tools whose schemas compile; the others must be refused naming their field."""
    ok = []
    for tool in TOOLS:
        try:
            client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=1, tools=[tool])
            ok.append(tool)
        except openai.BadRequestError as e:
            assert e.body["param"] == "tools", e.body
            assert e.body["message"].startswith("'tools[0].function.parameters': "), e.body
    assert len(TOOLS) == 40 and len(ok) >= 30, len(ok)
    return ok


@pytest.fixture(scope="module")
def tools(client):
    return supported_tools(client)


def check_calls(calls, checks, only=None):
    assert calls
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert call.function.name in checks and (only is None or call.function.name == only), call
        checks[call.function.name].validate(json.loads(call.function.arguments))


def test_required_and_named_calls_validate(client, tools):
    n_done = n_length = 0
    for i in range(3):
        offered = tools[3 * i:3 * i + 3]
        checks = validators(offered)
        named = offered[1]["function"]["name"]
        for choice_arg, only in (("required", None), ({"type": "function", "function": {"name": named}}, named)):
            out = client.chat.completions.create(model="tiny", messages=MESSAGES, tools=offered, tool_choice=choice_arg,
                                                 temperature=1, seed=i, n=2, max_tokens=160, logit_bias=CLOSING_BIAS)
            for c in out.choices:
                if c.finish_reason == "length":
                    n_length += 1
                    continue
                assert c.finish_reason == "tool_calls", c
                assert not c.message.content
                check_calls(c.message.tool_calls, checks, only)
                n_done += 1
    assert n_done >= 6 and n_done >= 0.5 * (n_done + n_length), (n_done, n_length)


def test_streamed_calls_validate_and_match_non_streamed(client, tools):
    offered = tools[:4]
    checks = validators(offered)
    kwargs = dict(model="tiny", messages=MESSAGES, tools=offered, tool_choice="required", temperature=1, seed=11, n=2,
                  max_tokens=160, logit_bias=CLOSING_BIAS)
    whole = client.chat.completions.create(**kwargs)
    calls = {}  # (choice, call index) -> [name, arguments, id]
    finish = {}
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            for d in c.delta.tool_calls or []:
                entry = calls.setdefault((c.index, d.index), ["", "", None])
                entry[0] += d.function.name or ""
                entry[1] += d.function.arguments or ""
                entry[2] = entry[2] or d.id
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    n_done = 0
    for c in whole.choices:
        assert finish[c.index] == c.finish_reason
        if c.finish_reason == "length":
            continue
        n_done += 1
        check_calls(c.message.tool_calls, checks)
        streamed = [calls[(c.index, k)] for k in range(len(c.message.tool_calls))]
        assert [(s[0], s[1]) for s in streamed] == [(t.function.name, t.function.arguments) for t in c.message.tool_calls]
    assert n_done >= 1


def test_auto_gives_text_or_valid_calls(client, tools):
    offered = tools[:3]
    checks = validators(offered)
    # Also toward the end of text (EOS, id 1) and the opening of calls (<｜tool▁calls▁begin｜>).
    bias = {**CLOSING_BIAS, "1": 10, "128806": 11}
    n_done = n_calls = 0
    for seed in range(3):
        out = client.chat.completions.create(model="tiny", messages=MESSAGES, tools=offered, temperature=1, seed=seed,
                                             n=4, max_tokens=100, logit_bias=bias)
        for c in out.choices:
            if c.message.tool_calls:  # calls complete before a cut are valid too
                check_calls(c.message.tool_calls, checks)
                n_calls += 1
            if c.finish_reason == "length":
                continue
            n_done += 1
            assert "<｜tool▁calls▁begin｜>" not in (c.message.content or "")
            assert c.finish_reason == ("tool_calls" if c.message.tool_calls else "stop"), c
    assert n_done >= 4 and n_calls >= 1, (n_done, n_calls)


ANSWER = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 12}, "score": {"type": "integer"}},
          "required": ["answer", "score"], "additionalProperties": False}


def test_response_format_with_strict_tools_gives_valid_json_or_valid_calls(client, tools):
    """The text follows response_format's schema, the calls their tools' schemas: either one."""
    offered = tools[:3]
    checks = validators(offered)
    answer = jsonschema.Draft202012Validator(ANSWER)
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER, "strict": True}}
    n_json = n_calls = 0
    # Away from the calls marker (<｜tool▁calls▁begin｜>) and toward it, streamed.
    for seed, bias, stream in ((0, {**CLOSING_BIAS, "128806": -100}, False), (1, {**CLOSING_BIAS, "128806": 14}, True)):
        kwargs = dict(model="tiny", messages=MESSAGES, tools=offered, response_format=rf, temperature=1, seed=seed,
                      n=3, max_tokens=160, logit_bias=bias)
        if stream:
            content, calls, finish = {}, {}, {}
            for chunk in client.chat.completions.create(stream=True, **kwargs):
                for c in chunk.choices:
                    content[c.index] = content.get(c.index, "") + (c.delta.content or "")
                    for d in c.delta.tool_calls or []:
                        calls.setdefault(c.index, []).append(d)
                    if c.finish_reason:
                        finish[c.index] = c.finish_reason
            choices = [(finish[i], content.get(i, ""), calls.get(i)) for i in finish]
        else:
            out = client.chat.completions.create(**kwargs)
            choices = [(c.finish_reason, c.message.content or "", c.message.tool_calls) for c in out.choices]
        for finish_reason, text, tool_calls in choices:
            if finish_reason == "length":
                continue
            if tool_calls:
                assert finish_reason == "tool_calls" and not text
                check_calls(tool_calls, checks)
                n_calls += 1
            else:
                assert finish_reason == "stop"
                answer.validate(json.loads(text))
                n_json += 1
    assert n_json >= 2 and n_calls >= 2, (n_json, n_calls)
    # With a call forced there is no text to constrain: the calls still follow their schemas.
    out = client.chat.completions.create(model="tiny", messages=MESSAGES, tools=offered, response_format=rf,
                                         tool_choice="required", temperature=1, seed=7, n=2, max_tokens=160,
                                         logit_bias=CLOSING_BIAS)
    for c in out.choices:
        if c.finish_reason != "length":
            check_calls(c.message.tool_calls, checks)


def test_strict_tool_errors_name_the_field(client):
    def bad(**kwargs):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=4, **kwargs)
        return e.value.body

    tool = {"type": "function", "function": {"name": "f", "strict": True, "parameters": {"type": "array"}}}
    body = bad(tools=[tool])
    assert body["param"] == "tools" and body["message"].startswith("'tools[0].function.parameters': must describe"), body
    body = bad(tools=[{"type": "function", "function": {"name": "f", "strict": True,
                                                          "parameters": {"type": "object", "not": {}}}}])
    assert body["param"] == "tools" and "'not'" in body["message"], body
    body = bad(tools=[{"type": "function", "function": {"name": "two words", "strict": True}}])
    assert body["param"] == "tools" and "tools[0].function.name" in body["message"], body
    body = bad(tools=[{"type": "function", "function": {"name": "f", "strict": True}}] * 2)
    assert body["param"] == "tools" and "'tools[1].function.name': 'f' names two tools" in body["message"], body
    body = bad(tools=[{"type": "function", "function": {"name": "f", "strict": "yes"}}])
    assert body["param"] == "tools" and "strict" in body["message"], body
    body = bad(tools=[{"type": "function", "function": {"name": "f", "strict": True}}],
               response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {}}}})
    assert body["param"] == "response_format" and "'not'" in body["message"], body
    body = bad(tools=[{"type": "function", "function": {"name": "f", "strict": True}}], extra_body={"regex": "a"})
    assert body["param"] == "tools" and "(response_format can)" in body["message"], body


@pytest.fixture(scope="module")
def v31_client(deepinfer_bin, tmp_path_factory):
    """A server on the tiny model with DeepSeek-V3.1's chat template (its tool-call format has no
    "function" header and no ```json fence), from tests/data/chat/templates."""
    import shutil

    from server import Server, make_model

    tok = tmp_path_factory.mktemp("v31-tokenizer")
    for f in (ROOT / "tests" / "data" / "tokenizers" / "deepseek-v3").iterdir():
        shutil.copy(f, tok / f.name)
    config = json.loads((tok / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = (ROOT / "tests" / "data" / "chat" / "templates" / "deepseek-v3.1.jinja").read_text(
        encoding="utf-8")
    (tok / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    s = Server(deepinfer_bin, make_model(tmp_path_factory.mktemp("e2e-v31") / "tiny-v31", tokenizer_dir=tok))
    yield openai.OpenAI(base_url=s.base + "/v1", api_key="unused", max_retries=0, timeout=300)
    assert s.stop() == 0, "".join(s.log)


def test_v31_format_calls_validate(v31_client, tools):
    offered = tools[:3]
    checks = validators(offered)
    n_done = 0
    for choice_arg, only in (("required", None),
                             ({"type": "function", "function": {"name": offered[2]["function"]["name"]}},
                              offered[2]["function"]["name"])):
        for stream in (False, True):
            kwargs = dict(model="tiny", messages=MESSAGES, tools=offered, tool_choice=choice_arg, temperature=1, seed=5,
                          n=2, max_tokens=160, logit_bias=CLOSING_BIAS)
            if not stream:
                out = v31_client.chat.completions.create(**kwargs)
                for c in out.choices:
                    if c.finish_reason != "length":
                        assert c.finish_reason == "tool_calls", c
                        check_calls(c.message.tool_calls, checks, only)
                        n_done += 1
                continue
            calls, finish = {}, {}
            for chunk in v31_client.chat.completions.create(stream=True, **kwargs):
                for c in chunk.choices:
                    for d in c.delta.tool_calls or []:
                        entry = calls.setdefault((c.index, d.index), ["", ""])
                        entry[0] += d.function.name or ""
                        entry[1] += d.function.arguments or ""
                    if c.finish_reason:
                        finish[c.index] = c.finish_reason
            for index, reason in finish.items():
                if reason == "length":
                    continue
                assert reason == "tool_calls"
                mine = [v for (i, _), v in sorted(calls.items()) if i == index]
                assert mine
                for name, arguments in mine:
                    assert name in checks and (only is None or name == only)
                    checks[name].validate(json.loads(arguments))
                n_done += 1
    assert n_done >= 4, n_done
