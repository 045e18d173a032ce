"""Structured output end to end: `response_format` (json_object, json_schema), the `regex` and
`grammar` extensions, through the official client against a real server on the tiny random
model. Sampling is at temperature 1, so the mask, not the model, makes outputs valid; every output
that ends by the grammar (finish_reason "stop") is checked by a reference we did not write
(`jsonschema`, `json`, Python's `re`). Outputs cut by max_tokens ("length") are prefixes and are
only counted; floors on the stopped share keep the checks from passing vacuously."""
import concurrent.futures
import json
import pathlib
import re
import threading
import time

import jsonschema
import openai
import pytest

from server import ROOT, Server, make_model

CORPUS = ROOT / "tests" / "grammar" / "corpus"
MESSAGES = [{"role": "user", "content": "Answer in the requested format."}]
# After the field it concerns, an error names what it rejects (as tests/grammar/test_schema_corpus.py
# expects): a quoted keyword/format/construct, or one of these problems.
NAMED_PROBLEM = re.compile(r"'[^']+'|not valid JSON|admits no value|matches no text|nested too deeply"
                           r"|points to nothing|only local references|only one of|not an object")


def load(name, count=None):
    with open(CORPUS / name, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    return records[:count] if count else records


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}


def validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_json_schema_outputs_validate(client):
    records = load("tool_schemas.jsonl")[:30] + load("jsonschemabench_sample.jsonl", 12) + load("json_schema_test_suite.jsonl", 24)

    def run(i_record):
        i, record = i_record
        try:
            out = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=80, temperature=1,
                                                 seed=i, response_format=schema_format(record["schema"]))
        except openai.BadRequestError as e:
            return record, e.body, None
        return record, None, out

    n_supported = n_stop = n_length = 0
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for record, error, out in pool.map(run, enumerate(records)):
            if error is not None:
                field, _, problem = error["message"].partition(": ")
                assert error["param"] == "response_format" and field == "'response_format.json_schema.schema'", error
                assert NAMED_PROBLEM.search(problem), error
                continue
            n_supported += 1
            check = validator(record["schema"])
            for choice in out.choices:
                if choice.finish_reason == "length":
                    n_length += 1
                    continue
                assert choice.finish_reason == "stop", choice
                check.validate(json.loads(choice.message.content))
                n_stop += 1
    assert n_supported >= 0.6 * len(records)
    assert n_stop >= 20 and n_stop >= 0.4 * (n_stop + n_length), (n_stop, n_length)


def test_json_object_outputs_parse(client):
    out = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=120, temperature=1, seed=3, n=6,
                                         response_format={"type": "json_object"})
    stopped = [c for c in out.choices if c.finish_reason == "stop"]
    assert stopped
    for c in stopped:
        assert isinstance(json.loads(c.message.content), dict)
    for c in out.choices:
        assert c.message.content.startswith("{")


PATTERNS = [r"[a-z]{3,8}-[0-9]{2,4}", r"(yes|no|maybe)", r"\d{4}-\d{2}-\d{2}", r"[A-Z][a-z]{1,10}( [A-Z][a-z]{1,10}){0,2}",
            r"0x[0-9a-f]{1,8}", r"(\+|-)?[1-9][0-9]{0,5}(\.[0-9]{1,3})?", r"\w{1,6}@\w{1,6}\.(com|org)"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_regex_outputs_fullmatch(client, pattern):
    out = client.completions.create(model="tiny", prompt="Output:", max_tokens=40, temperature=1, seed=11, n=3,
                                    extra_body={"regex": pattern})
    for c in out.choices:
        assert c.finish_reason == "stop", c  # bounded patterns end by the grammar
        assert re.fullmatch(pattern, c.text), (pattern, c.text)


GRAMMAR = r"""
root ::= "(" term (ws op ws term){0,3} ")"
term ::= [0-9]{1,3} | "x" | "y"
op   ::= "+" | "*" | "-"
ws   ::= " "?
"""
GRAMMAR_RE = r"\((?:[0-9]{1,3}|x|y)(?: ?[+*-] ?(?:[0-9]{1,3}|x|y)){0,3}\)"
# Recursive: nested lists of digits, checked by parsing.
NESTED = r"""
root ::= list
list ::= "[" (item ("," item){0,2})? "]"
item ::= [0-9] | list
"""


def nested_ok(text):
    def parse(i, depth):
        if i >= len(text) or text[i] != "[":
            return None
        i += 1
        first = True
        while i < len(text) and text[i] != "]":
            if not first:
                if text[i] != ",":
                    return None
                i += 1
            first = False
            if i < len(text) and text[i].isdigit():
                i += 1
            else:
                i = parse(i, depth + 1)
                if i is None:
                    return None
        return i + 1 if i < len(text) else None

    return parse(0, 0) == len(text)


def test_grammar_outputs(client):
    out = client.completions.create(model="tiny", prompt="Expression:", max_tokens=40, temperature=1, seed=5, n=4,
                                    extra_body={"grammar": GRAMMAR})
    for c in out.choices:
        assert c.finish_reason == "stop" and re.fullmatch(GRAMMAR_RE, c.text), c.text
    out = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=60, temperature=1, seed=2, n=6,
                                         extra_body={"grammar": NESTED})
    stopped = [c for c in out.choices if c.finish_reason == "stop"]
    assert stopped
    for c in stopped:
        assert nested_ok(c.message.content), c.message.content


def test_streaming_equals_non_streaming_under_a_seed(client):
    schema = load("tool_schemas.jsonl")[5]["schema"]
    kwargs = dict(model="tiny", messages=MESSAGES, max_tokens=100, temperature=1, seed=21, n=2,
                  response_format=schema_format(schema))
    whole = client.chat.completions.create(**kwargs)
    texts, reasons = ["", ""], [None, None]
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            texts[c.index] += c.delta.content or ""
            reasons[c.index] = c.finish_reason or reasons[c.index]
    assert texts == [c.message.content for c in whole.choices]
    assert reasons == [c.finish_reason for c in whole.choices] == ["stop", "stop"]
    for t in texts:
        validator(schema).validate(json.loads(t))


def test_n_samples_each_valid_and_distinct(client):
    schema = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
                                                "tag": {"enum": ["red", "green", "blue"]},
                                                "ok": {"type": "boolean"}},
              "required": ["id", "tag", "ok"], "additionalProperties": False}
    out = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=60, temperature=1, seed=8, n=5,
                                         response_format=schema_format(schema))
    assert len(out.choices) == 5
    for c in out.choices:
        assert c.finish_reason == "stop"
        jsonschema.validate(json.loads(c.message.content), schema)
    assert len({c.message.content for c in out.choices}) > 1


def test_logprobs_and_stop_strings_under_a_constraint(client):
    out = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=40, temperature=1, seed=4,
                                         logprobs=True, top_logprobs=2, extra_body={"regex": r"[a-z]{2,6}-[0-9]{3}"})
    c = out.choices[0]
    assert c.finish_reason == "stop" and re.fullmatch(r"[a-z]{2,6}-[0-9]{3}", c.message.content)
    entries = c.logprobs.content
    assert entries and "".join(e.token for e in entries) == c.message.content
    assert all(e.logprob <= 0 and len(e.top_logprobs) == 2 for e in entries)
    out = client.completions.create(model="tiny", prompt="x", max_tokens=40, temperature=1, seed=4, stop=["-"],
                                    extra_body={"regex": r"[a-z]{2,6}-[0-9]{3}"})
    assert out.choices[0].finish_reason == "stop" and re.fullmatch(r"[a-z]{2,6}", out.choices[0].text)


def test_max_tokens_cuts_with_length(client):
    out = client.completions.create(model="tiny", prompt="x", max_tokens=4, temperature=1, seed=1,
                                    extra_body={"regex": r"[a-z]{200}"})
    c = out.choices[0]
    assert c.finish_reason == "length" and out.usage.completion_tokens == 4 and re.fullmatch(r"[a-z]+", c.text)


def bad_request(client, **kwargs):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=8, **kwargs)
    return e.value.body


def test_bad_constraints_are_400s_naming_the_problem(client):
    body = bad_request(client, response_format=schema_format({"type": "object", "if": {"required": ["a"]}}))
    assert body["param"] == "response_format" and "'if'" in body["message"]
    body = bad_request(client, response_format=schema_format({"type": "string", "pattern": "(a"}))
    assert body["param"] == "response_format" and "pattern" in body["message"]
    body = bad_request(client, response_format=schema_format({"$ref": "#/$defs/missing"}))
    assert body["param"] == "response_format"
    body = bad_request(client, extra_body={"regex": r"(a)\1"})
    assert body["param"] == "regex" and "backreference" in body["message"]
    body = bad_request(client, extra_body={"regex": r"(?=a)b"})
    assert body["param"] == "regex" and "lookaround" in body["message"]
    body = bad_request(client, extra_body={"grammar": 'root ::= item\nitem ::= "a" missing'})
    assert body["param"] == "grammar" and "missing" in body["message"]
    body = bad_request(client, extra_body={"grammar": 'root ::= root "a"'})
    assert body["param"] == "grammar"
    body = bad_request(client, response_format={"type": "xml"})
    assert body["param"] == "response_format" and "xml" in body["message"]
    body = bad_request(client, response_format={"type": "json_schema", "json_schema": {"name": "x"}})
    assert body["param"] == "response_format" and "schema" in body["message"]
    body = bad_request(client, response_format={"type": "json_object"}, extra_body={"regex": "a"})
    assert "at most one" in body["message"]
    tool = {"type": "function", "function": {"name": "f", "strict": True,
                                              "parameters": {"type": "object", "properties": {}}}}
    body = bad_request(client, tools=[tool], extra_body={"regex": "a"})
    assert body["param"] == "tools" and "strict" in body["message"]
    body = bad_request(client, tools=[{**tool, "function": {**tool["function"], "strict": False}}],
                       tool_choice="required", response_format={"type": "json_object"})
    assert body["param"] == "tool_choice"
    # The same bad schema again is answered from the cache, identically.
    again = bad_request(client, response_format=schema_format({"type": "object", "if": {"required": ["a"]}}))
    assert again["message"] == bad_request(client, response_format=schema_format(
        {"type": "object", "if": {"required": ["a"]}}))["message"]


# Patterns and grammars built to be costly: a blow-up of repetitions, heavy ambiguity, a long
# unambiguous chain, deep nesting, and a grammar of 20,000 rules.
PATHOLOGICAL = [
    {"regex": "((a{0,100}){0,100}){0,100}"},
    {"regex": "(a?){3000}a{3000}"},
    {"regex": "(.*a){40}"},
    {"regex": "(a|b)*a(a|b){18}"},
    {"regex": "(" * 120 + "a" + ")" * 120},
    {"grammar": "root ::= r0\n" + "".join(f'r{i} ::= "a" r{i + 1} | "b" r{i + 1}\n' for i in range(20000))
                + 'r20000 ::= "z"\n'},
    {"response_format": schema_format({"type": "array", "items": {"type": "string", "pattern": "(x+x+)+y"},
                                       "minItems": 5000})},
]


def test_pathological_constraints_do_not_stall_the_server(server, client):
    results, done = [], threading.Event()

    def hostile():
        try:
            for extra in PATHOLOGICAL:
                t0 = time.time()
                status, body = server.post("/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 30,
                                                               "temperature": 1, **extra})
                results.append((status, time.time() - t0, body))
        finally:
            done.set()

    threads = [threading.Thread(target=hostile) for _ in range(2)]
    for t in threads:
        t.start()
    latencies = []
    while not done.is_set():
        t0 = time.time()
        out = client.completions.create(model="tiny", prompt="Hello", max_tokens=4, temperature=0)
        latencies.append(time.time() - t0)
        assert out.choices[0].finish_reason == "length"
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 2 * len(PATHOLOGICAL)
    for status, seconds, body in results:
        assert status in (200, 400), body
        if status == 400:
            assert body["error"]["param"] in ("regex", "grammar", "response_format") and body["error"]["message"]
        assert seconds < 60
    assert latencies and max(latencies) < 30, latencies


@pytest.fixture(scope="module")
def spec_server(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--speculative", "ngram", "--num-speculative-tokens", "3")
    yield s
    assert s.stop() == 0


def test_speculative_decoding_gives_the_same_constrained_outputs(client, spec_server):
    spec = openai.OpenAI(base_url=spec_server.base + "/v1", api_key="x", max_retries=0, timeout=120)
    for i, record in enumerate(load("tool_schemas.jsonl")[10:14]):
        kwargs = dict(model="tiny", messages=MESSAGES, max_tokens=40, temperature=1, seed=i, n=2,
                      response_format=schema_format(record["schema"]))
        plain, drafted = client.chat.completions.create(**kwargs), spec.chat.completions.create(**kwargs)
        assert [c.message.content for c in plain.choices] == [c.message.content for c in drafted.choices]
    # A pattern the model's own repetition fits, greedy: drafts get accepted under the mask.
    kwargs = dict(model="tiny", prompt="ab ab ab ab ab ab", max_tokens=40, temperature=0, extra_body={"regex": "( ?ab){1,30}"})
    assert spec.completions.create(**kwargs).choices[0].text == client.completions.create(**kwargs).choices[0].text


@pytest.fixture(scope="module")
def r1_server(deepinfer_bin, tmp_path_factory):
    """DeepSeek-R1's template (opens <think> in the prompt) and <think>/</think> tokens."""
    base = tmp_path_factory.mktemp("r1-structured")
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


def test_constraint_starts_after_the_reasoning(r1_server):
    client = openai.OpenAI(base_url=r1_server.base + "/v1", api_key="x", max_retries=0, timeout=120)
    pattern = r"[a-z]{3,6}-[0-9]{2}"
    # </think> (id 128816) is made the likeliest token everywhere: the model closes its reasoning at
    # once, then the mask (which never allows </think>) takes over.
    kwargs = dict(model="tiny", messages=MESSAGES, max_tokens=40, temperature=1, seed=6,
                  logit_bias={"128816": 100}, extra_body={"regex": pattern})
    whole = client.chat.completions.create(**kwargs)
    message = whole.choices[0].message
    assert whole.choices[0].finish_reason == "stop"
    assert re.fullmatch(pattern, message.content), message.content
    assert not (message.model_extra or {}).get("reasoning_content")
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == message.content
    # Without </think> the whole answer is reasoning and unconstrained: text outside the pattern.
    free = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=12, temperature=1, seed=6,
                                          extra_body={"regex": pattern})
    assert free.choices[0].finish_reason == "length"
    assert not re.fullmatch(pattern, free.choices[0].message.model_extra["reasoning_content"])
