"""The whole schema corpus (tests/grammar/corpus: 788 schemas with their origins, from the
JSON-Schema-Test-Suite, JSONSchemaBench and OpenAI-style tool definitions) through the official
client against a real server on the tiny random model, sampled at temperature 1, so that the mask,
not the model, makes outputs valid. Every schema is either served or refused with a 400 whose
`param` is response_format and whose message names the keyword or problem; every output that
ends by the grammar (finish_reason "stop") parses and validates with `jsonschema` (format checks
on); the supported share per corpus file is printed (pytest -s). A logit bias toward the tokens
that close strings (which the mask allows only where the grammar does) keeps a random model from
writing strings past max_tokens; outputs cut by max_tokens are prefixes and are only counted."""
import concurrent.futures
import json

import jsonschema
import openai

from server import ROOT
from test_structured_output import NAMED_PROBLEM, schema_format, validator

CORPUS = ROOT / "tests" / "grammar" / "corpus"
FILES = ["json_schema_test_suite.jsonl", "jsonschemabench_sample.jsonl", "tool_schemas.jsonl"]
MESSAGES = [{"role": "user", "content": "Answer in the requested format."}]
# DeepSeek-V3 token ids of '"', '",', '"}', '"]', '}' and ']'.
CLOSING_BIAS = {"4": 8, "1760": 8, "62773": 8, "13747": 8, "95": 4, "63": 4}


def test_every_corpus_schema_is_served_validly_or_refused_by_name(client):
    records = []
    for name in FILES:
        with open(CORPUS / name, encoding="utf-8") as f:
            records += [(name, json.loads(line)) for line in f]
    assert len(records) >= 780

    def run(i_record):
        i, (name, record) = i_record
        try:
            out = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=48, temperature=1, seed=i,
                                                 response_format=schema_format(record["schema"]),
                                                 logit_bias=CLOSING_BIAS)
        except openai.BadRequestError as e:
            return name, record, e.body, None
        return name, record, None, out

    per_file = {name: [0, 0] for name in FILES}  # supported, total
    n_stop = n_length = 0
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for name, record, error, out in pool.map(run, enumerate(records)):
            per_file[name][1] += 1
            if error is not None:
                field, _, problem = error["message"].partition(": ")
                assert error["param"] == "response_format" and field == "'response_format.json_schema.schema'", error
                assert NAMED_PROBLEM.search(problem), (record["origin"], error)
                continue
            per_file[name][0] += 1
            choice = out.choices[0]
            if choice.finish_reason == "length":
                n_length += 1
                continue
            assert choice.finish_reason == "stop", choice
            try:
                validator(record["schema"]).validate(json.loads(choice.message.content))
            except (json.JSONDecodeError, jsonschema.ValidationError) as e:
                raise AssertionError((record["origin"], choice.message.content, str(e)[:300]))
            n_stop += 1
    supported = sum(s for s, _ in per_file.values())
    print(f"\n{len(records)} schemas, {supported} served ({100.0 * supported / len(records):.1f} %): " +
          ", ".join(f"{name} {s}/{n}" for name, (s, n) in per_file.items()) +
          f"; {n_stop} outputs ended by the grammar and valid, {n_length} cut by max_tokens")
    assert per_file["tool_schemas.jsonl"][0] == per_file["tool_schemas.jsonl"][1]
    assert supported >= 0.55 * len(records)  # a floor against regressions; the share is printed
    assert n_stop >= 0.5 * supported, (n_stop, n_length)
