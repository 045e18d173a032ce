"""Writes the reference renderings that tests/chat compares the C++ chat template engine with.

The reference is Hugging Face transformers itself: `render_jinja_template`, the function that
`tokenizer.apply_chat_template` renders with (sandboxed Jinja2, trim_blocks, lstrip_blocks,
its own tojson, raise_exception and strftime_now), given each template in
tests/data/chat/templates/ and the special tokens of its checkpoint (listed below). For
DeepSeek-V3 it also runs the full `apply_chat_template(..., tokenize=True)` on the real tokenizer
files, to record the token ids the `chat-template` CLI must print.

Run it once when templates or cases change, and commit what it writes:
    .venv/bin/pip install transformers==4.57.1
    .venv/bin/python tests/chat/make_reference.py
It writes tests/data/chat/reference/cases.json (the conversations), <template>.jsonl (one row per
case and add_generation_prompt value: either "rendered" or, where transformers raises, "error"),
tests/data/chat/reference/deepseek-v3-tokenized.jsonl, and renders of single Jinja features with
the same environment into tests/data/chat/reference/jinja_snippets.jsonl.
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
TEMPLATES = ROOT / "tests" / "data" / "chat" / "templates"
OUT = ROOT / "tests" / "data" / "chat" / "reference"
# The real DeepSeek-V3 tokenizer: the project's copy, else the shared fixture it was copied from.
DEEPSEEK_TOKENIZERS = [ROOT / "tests" / "data" / "tokenizers" / "deepseek-v3",
                       ROOT.parent / "shared" / "fixtures" / "tokenizers" / "deepseek-v3"]

DEEPSEEK = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>",
            "pad_token": "<｜end▁of▁sentence｜>"}
LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
QWEN = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
MISTRAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
GEMMA = {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"}
# templates/llama.cpp/: the other checkpoints' templates, rendered with these placeholder tokens.
GENERIC = {"bos_token": "<s>", "eos_token": "</s>"}

# Template file -> special tokens of its checkpoint (from that checkpoint's tokenizer_config.json).
# Llama 3.2 and Mistral Small 3.2 print today's date (strftime_now): the date is pinned below.
SPECIAL_TOKENS = {
    "deepseek-v3.jinja": DEEPSEEK,
    "deepseek-v3.1.jinja": DEEPSEEK,
    "deepseek-r1.jinja": DEEPSEEK,
    "deepseek-r1-distill-llama-8b.jinja": DEEPSEEK,
    "llama-3.1-8b-instruct.jinja": LLAMA3,
    "llama-3.2-3b-instruct.jinja": LLAMA3,
    "qwen2.5-7b-instruct.jinja": QWEN,
    "qwq-32b.jinja": QWEN,
    "qwen3-0.6b.jinja": QWEN,
    "mistral-nemo-instruct-2407.jinja": MISTRAL,
    "mistral-small-3.2-24b-instruct-2506.jinja": MISTRAL,
    "gemma-2-2b-it.jinja": GEMMA,
    "gemma-4-31b-it.jinja": GEMMA,
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. Returns \"temp_c\" & conditions <b>now</b>.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris or 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 1e1, "description": "Forecast days"},
                "threshold": {"type": "number", "default": 0.5},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                        "tags": {"type": "array", "items": {"type": "string"}}},
                       "required": ["query"]},
    },
}


def call(i, name, args, as_text):
    # Nine alphanumeric characters: the only ids Mistral's templates accept.
    return {"id": f"call0000{i}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_text else args}}


def tool_cases(as_text):
    """Tool-calling conversations; arguments as JSON text (DeepSeek's templates concatenate them)
    with null content, or as objects (what most other templates expect) with empty content."""
    suffix = "_text_args" if as_text else "_object_args"
    empty = None if as_text else ""
    one_call = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": empty, "tool_calls": [call(0, "get_weather", {"city": "Paris"}, as_text)]},
        {"role": "tool", "tool_call_id": "call00000", "name": "get_weather", "content": "{\"temp_c\": 18}"},
        {"role": "assistant", "content": "It is 18°C in Paris."},
        {"role": "user", "content": "And in Tokyo and Lima?"},
    ]
    two_calls = [
        {"role": "user", "content": "Weather in Tokyo and Lima?"},
        {"role": "assistant", "content": empty, "tool_calls": [
            call(1, "get_weather", {"city": "東京", "unit": "celsius"}, as_text),
            call(2, "get_weather", {"city": "Lima", "days": 2}, as_text)]},
        {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "{\"temp_c\": 21}"},
        {"role": "tool", "tool_call_id": "call00002", "name": "get_weather", "content": "{\"temp_c\": 16}"},
    ]
    with_content = [
        {"role": "user", "content": "Search for cats."},
        {"role": "assistant", "content": "Let me search.",
         "tool_calls": [call(3, "search", {"query": "cats", "tags": ["pets"]}, as_text)]},
        {"role": "tool", "tool_call_id": "call00003", "name": "search", "content": "Cats are mammals."},
        {"role": "assistant", "content": "Cats are mammals."},
    ]
    return [
        ("tool_call_and_result" + suffix, one_call, [WEATHER_TOOL, SEARCH_TOOL], {}),
        ("parallel_tool_calls" + suffix, two_calls, [WEATHER_TOOL], {}),
        ("tool_call_with_content" + suffix, with_content, [SEARCH_TOOL], {}),
    ]


CASES = [
    ("single_user", [{"role": "user", "content": "Hello!"}], None, {}),
    ("system_and_user", [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "What is 2+2?"}], None, {}),
    ("multi_turn", [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello! How can I help?"},
                    {"role": "user", "content": "Tell me a joke."},
                    {"role": "assistant", "content": "Why did the chicken cross the road?"},
                    {"role": "user", "content": "Why?"}], None, {}),
    ("two_system_prompts", [{"role": "system", "content": "Be brief."},
                            {"role": "system", "content": "Answer in English."},
                            {"role": "user", "content": "你好"}], None, {}),
    ("unicode_and_escapes", [{"role": "user", "content": "  Ünïcödé 🚀 עברית \"quotes\" 'single' back\\slash\n\ttab  "},
                             {"role": "assistant", "content": "Ça va? 😀\r\nline2"},
                             {"role": "user", "content": "{{ not a template }} {% raw %} <think>x</think>"}],
     None, {}),
    ("empty_content", [{"role": "system", "content": ""}, {"role": "user", "content": ""}], None, {}),
    ("assistant_with_reasoning", [{"role": "user", "content": "What is 1+1?"},
                                  {"role": "assistant", "content": "<think>\nSimple sum.\n</think>\n\n2"},
                                  {"role": "user", "content": "And 2+2?"}], None, {}),
    ("content_parts", [{"role": "user", "content": [{"type": "text", "text": "Describe"},
                                                    {"type": "text", "text": " this."}]}], None, {}),
    ("tools_only", [{"role": "user", "content": "What's the weather in Paris?"}], [WEATHER_TOOL, SEARCH_TOOL], {}),
    ("thinking_on", [{"role": "user", "content": "Think about 3*7."}], None, {"thinking": True, "enable_thinking": True}),
    ("thinking_off", [{"role": "user", "content": "Quick: 3*7?"}], None, {"thinking": False, "enable_thinking": False}),
    ("date_string", [{"role": "system", "content": "Today is special."}, {"role": "user", "content": "Date?"}], None,
     {"date_string": "02 Jan 2025"}),
    ("assistant_last", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}], None, {}),
] + tool_cases(True) + tool_cases(False)


def render_all():
    """One jsonl per template (same relative path under reference/), the cases in cases.json."""
    import datetime

    from transformers.utils import chat_template_utils

    class FixedClock(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(1999, 12, 31, 23, 59, 58)

    # strftime_now() renders this date; the C++ test swaps in today's (see chat_template_test.cpp).
    chat_template_utils.datetime = FixedClock
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / "cases.json").open("w", encoding="utf-8") as f:
        json.dump({name: {"messages": m, "tools": t, "kwargs": k} for name, m, t, k in CASES}, f,
                  ensure_ascii=False, indent=1)
    for path in sorted(TEMPLATES.rglob("*.jinja")):
        rel = path.relative_to(TEMPLATES).as_posix()
        source = path.read_text(encoding="utf-8")
        special = SPECIAL_TOKENS.get(rel, GENERIC)
        rows = []
        for name, messages, tools, kwargs in CASES:
            for agp in (False, True):
                row = {"template": rel, "case": name, "add_generation_prompt": agp, "special_tokens": special}
                try:
                    rendered, _ = chat_template_utils.render_jinja_template(
                        conversations=[json.loads(json.dumps(messages))], tools=tools, chat_template=source,
                        add_generation_prompt=agp, **{**special, **kwargs})
                    row["rendered"] = rendered[0]
                except Exception as e:  # noqa: BLE001 - any failure is the expected outcome
                    row["error"] = f"{type(e).__name__}: {e}"
                rows.append(row)
        out = OUT / (rel[: -len(".jinja")] + ".jsonl")
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        errors = sum("error" in r for r in rows)
        print(f"{out.relative_to(ROOT)}: {len(rows)} rows, {errors} raise")


def tokenize_deepseek(tokenizer_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    rows = []
    for name, messages, tools, kwargs in CASES:
        if "object_args" in name or name == "content_parts":
            continue  # the DeepSeek-V3 template cannot render these (see deepseek-v3.jsonl)
        for agp in (False, True):
            text = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp, tokenize=False, **kwargs)
            ids = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp, tokenize=True, **kwargs)
            request = {"messages": messages, "add_generation_prompt": agp}
            if tools is not None:
                request["tools"] = tools
            if kwargs:
                request["chat_template_kwargs"] = kwargs
            rows.append({"case": name, "request": request, "rendered": text, "ids": list(ids)})
    out = OUT / "deepseek-v3-tokenized.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{out.relative_to(ROOT)}: {len(rows)} rows")


# Jinja features one at a time: (template, variables). Rendered with the environment transformers
# compiles chat templates in, into reference/jinja_snippets.jsonl.
MSGS = [{"role": "system", "content": "Sys"}, {"role": "user", "content": " Hi there "},
        {"role": "assistant", "content": "Hello", "tool_calls": None}]
SNIPPETS = [
    # whitespace control, trim_blocks, lstrip_blocks, comments, raw, trailing newline
    ("{% if true %}\n  x\n{% endif %}\n", {}),
    ("  {%- if true -%}  a  {%- endif -%}  b", {}),
    ("    {%+ if true %}x{% endif %}", {}),
    ("a\n  {# comment #}\nb\n  {#- c -#}  \n d", {}),
    ("{% for i in [1, 2] %}\n    {{ i }}\n{% endfor %}", {}),
    ("x {%- raw -%} {{ y }} {% if %} {%- endraw %} z", {}),
    ("{{- ' a ' -}}  \n  {{ 'b' }}  ", {}),
    ("line\n{% if true +%}\nkeep\n{% endif %}", {}),
    ("a\n\n", {}),
    ("a\r\nb{% if true %}\r\nc{% endif %}\rd", {}),
    ("  {{ 'v' }}\n  {% set x = 1 %}\n{{ x }}", {}),
    ("{% if true %}  {% endif %}\n  \t{% if true %}t{% endif %}", {}),
    # loops
    ("{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/"
     "{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem is defined }}/{{ loop.nextitem is defined }};"
     "{% endfor %}", {"messages": MSGS}),
    ("{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("{% for x in [] %}no{% else %}empty{% endfor %}{% for x in missing %}{% else %}undef{% endfor %}", {}),
    ("{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}{{ loop.length }}{% endfor %}",
     {"messages": MSGS}),
    ("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}"
     "{{ x }}{% endfor %}", {}),
    ("{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }}|"
     "{% endfor %}", {}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
     {"d": {"b": 1, "a": [1, 2], "c": None}}),
    ("{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}{% for c in 'héllo' %}[{{ c }}]{% endfor %}", {}),
    ("{% set x = 0 %}{% for i in [1, 2, 3] %}{{ x }}{% set x = i %}{{ x }}|{% endfor %}{{ x }}", {}),
    # set, namespace, with
    ("{% set ns = namespace(a=1, b='x') %}{% for i in [1, 2] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}"
     "{{ ns.b }}{{ ns.c is defined }}", {}),
    ("{% set a, b = 1, 'two' %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}", {}),
    ("{% set block %}  Block {{ 1 + 1 }}  {% endset %}[{{ block }}]{% set up | upper | trim %} x {% endset %}"
     "[{{ up }}]", {}),
    ("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a is defined }}", {}),
    ("{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    # macros, call blocks, filter blocks
    ("{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{{ varargs }}{{ kwargs }}{% endmacro %}"
     "{{ m(1) }}|{{ m(1, 2, 3, 4) }}|{{ m(1, c=3, z=9) }}|{{ m() }}", {}),
    ("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
     "{% call wrap('b') %}inner {{ 1 }}{% endcall %}", {}),
    ("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
     "{% call(item) each([1, 2]) %}<{{ item }}>{% endcall %}", {}),
    ("{% filter upper %}hello {{ 'world' }}{% endfilter %}{% filter trim | title %}  a b  {% endfilter %}", {}),
    ("{% macro z() %}{{ zz }}{% endmacro %}{% set zz = 3 %}{{ z() }}", {}),
    # expressions
    ("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }}"
     " {{ 7 / 2 }} {{ 6 / 3 }} {{ 2.5 * 2 }} {{ 1 - 0.1 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }}", {}),
    ("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 'x' not in ['x'] }} {{ 'k' in {'k': 1} }}"
     " {{ 1 == 1.0 }} {{ true == 1 }} {{ none == none }} {{ [1, 2] == [1, 2] }} {{ 'a' < 'b' }}", {}),
    ("{{ a and b }}|{{ a or b }}|{{ c or 'dflt' }}|{{ not a }}|{{ 'x' if a else 'y' }}|{{ 'x' if c }}|",
     {"a": "A", "b": 0, "c": ""}),
    ("{{ 'a' ~ 1 ~ none ~ true ~ missing ~ [1] }}", {}),
    ("{{ [1, 'two', none, true, 1.5, {'k': 'v'}] }} {{ {'a': {'b': []}} }} {{ (1,) }} {{ () }}"
     " {{ 'it\\'s' }} {{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n', 'é😀'] }}", {}),
    ("{{ 'a\\tb\\nc\\\\d\\u00e9\\x41\\'\"' }}{{ \"dq\\\"\" }}{{ 'adj' 'acent' }}", {}),
    ("{{ 1e3 }} {{ 1_000 }} {{ 0x1F }} {{ 0.000001 }} {{ 123456789012345678 }} {{ 1.5e300 * 1e10 }}", {}),
    ("{{ messages[0]['role'] }}{{ messages[-1].content }}{{ messages[1:] | length }}{{ messages[::2] | length }}"
     "{{ messages[5] is defined }}{{ messages.0.role }}", {"messages": MSGS}),
    ("{{ 'hello'[1:3] }}{{ 'hello'[::-1] }}{{ 'héllo'[1] }}{{ [1, 2, 3, 4][-3:-1] }}{{ 'abc'[5:] }}", {}),
    ("{{ d.items is defined }}|{{ d['items'] }}|{{ d.get('x', 'no') }}|{{ d.get('items') }}|{{ d.missing is defined }}",
     {"d": {"items": 1}}),
    ("{{ x }}|{{ x is defined }}|{{ x | length }}|{{ x == none }}|{{ x ~ 's' }}|{{ x | default('d') }}"
     "|{{ none | default('n') }}|{{ '' | default('e', true) }}", {}),
    ("{{ none.attr is defined }}{{ n.attr }}", {"n": None}),
    # tests
    ("{{ x is string }}{{ x is mapping }}{{ x is iterable }}{{ x is sequence }}{{ x is number }}{{ x is none }}"
     "{{ x is defined }}{{ x is undefined }}{{ x is boolean }}{{ x is integer }}{{ x is float }}{{ x is true }}"
     "{{ x is false }}{{ x is callable }}{{ x is lower }}{{ x is upper }}|", {"x": "abc"}),
    ("{% for v in [1, 2.5, true, none, 'S', [1], {'a': 1}] %}{{ v is number }}{{ v is integer }}{{ v is mapping }}"
     "{{ v is iterable }}{{ v is boolean }};{% endfor %}", {}),
    ("{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}"
     "{{ 1 is lt 2 }}{{ 2 is ge 3 }}{{ 'a' is in 'abc' }}{{ 2 is in [1, 2] }}{{ none is sameas none }}"
     "{{ x is not none }}{{ not x is none }}", {"x": 1}),
    # filters
    ("{{ '  pad  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}"
     "|{{ 'Up' | upper }}{{ 'Lo' | lower }}|{{ 'a-b c(d' | title }}", {}),
    ("{{ [3, 1, 2] | sort }}{{ ['b', 'A', 'c'] | sort }}{{ ['b', 'A', 'c'] | sort(case_sensitive=true) }}"
     "{{ [3, 1, 2] | sort(reverse=true) }}{{ xs | sort(attribute='n') | map(attribute='n') | list }}",
     {"xs": [{"n": 2}, {"n": 1}]}),
    ("{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ 'abc' | first }}{{ [1, 2] | length }}{{ 'héllo' | count }}"
     "{{ {'a': 1} | length }}{{ [] | first is defined }}", {}),
    ("{{ ['a', 'b'] | join }}|{{ ['a', 'b'] | join(', ') }}|{{ xs | join('-', attribute='n') }}|{{ [1, none] | join }}",
     {"xs": [{"n": 2}, {"n": 1}]}),
    ("{{ xs | map(attribute='n') | list }}{{ ['a', 'B'] | map('upper') | list }}{{ xs | map(attribute='z', "
     "default=0) | list }}{{ [1.5, 2] | map('int') | list }}", {"xs": [{"n": 2}, {"n": 1}]}),
    ("{{ [0, 1, '', 'a', none] | select | list }}{{ [1, 2, 3, 4] | select('odd') | list }}"
     "{{ [1, 2, 3, 4] | reject('even') | list }}{{ [1, 5, 10] | select('gt', 4) | list }}", {}),
    ("{{ msgs | selectattr('role', 'equalto', 'user') | list | length }}{{ msgs | rejectattr('role', 'eq', 'user')"
     " | map(attribute='role') | join(',') }}{{ msgs | selectattr('tool_calls') | list }}"
     "{{ msgs | selectattr('tool_calls', 'none') | map(attribute='role') | list }}", {"msgs": MSGS}),
    ("{{ d | items | list }}{{ d | dictsort }}{{ d | dictsort(reverse=true) }}{{ d.keys() | list }}"
     "{{ d.values() | list }}{{ d | list }}", {"d": {"b": 2, "a": 1}}),
    ("{{ ['a', 'A', 'b', 'a'] | unique | list }}{{ ['a', 'A'] | unique(case_sensitive=true) | list }}"
     "{{ [3, 1, 2] | max }}{{ [3, 1, 2] | min }}{{ [1, 2.5] | sum }}{{ xs | sum(attribute='n') }}",
     {"xs": [{"n": 2}, {"n": 1}]}),
    ("{{ 'x' | string }}{{ 1 | string }}{{ [1] | string }}{{ '42' | int }}{{ 'x' | int }}{{ '3.7' | int }}"
     "{{ 3.7 | int }}{{ 'ff' | int(base=16) }}{{ '1.5' | float }}{{ 'x' | float(1.0) }}{{ true | int }}", {}),
    ("{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}"
     "|{{ 'a\\nb' | indent('> ') }}", {}),
    ("{{ 'a.b.c' | replace('.', '/') }}{{ 'aaa' | replace('a', 'b', 2) }}{{ [1, 2] | reverse | list }}"
     "{{ 'abc' | reverse }}{{ -3 | abs }}{{ 2.567 | round(2) }}{{ 2.5 | round }}{{ 2.1 | round(0, 'ceil') }}"
     "{{ '<a & b>' | e }}{{ '<x>' | safe }}{{ 'one two  three' | wordcount }}", {}),
    ("{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(ensure_ascii=true) }}"
     "|{{ d | tojson(separators=(',', ':')) }}|{{ [] | tojson(indent=4) }}|{{ 'é\"<>&\\'\\n' | tojson }}",
     {"d": {"z": [1, 2.5, None, True, {"q": "é😀\u0001"}], "a": {}, "n": -0.0, "big": 1e100, "s": "</script>"}}),
    ("{{ tools | tojson(indent=4) }}", {"tools": [WEATHER_TOOL]}),
    ("{{ d | attr('items') is defined }}{{ d | attr('k') is defined }}", {"d": {"k": 1}}),
    # methods
    ("{{ ' a b '.strip() }}|{{ 'xxa'.lstrip('x') }}|{{ 'ayy'.rstrip('y') }}|{{ 'a,b,,c'.split(',') }}"
     "|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'l1\\nl2\\r\\nl3'.splitlines() }}",
     {}),
    ("{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}{{ 'a-b'.replace('-', '+') }}"
     "{{ 'Hello World'.upper() }}{{ 'Hello'.lower() }}{{ 'hello wORLD'.title() }}{{ 'hELLO'.capitalize() }}"
     "{{ 'banana'.find('an') }}{{ 'banana'.rfind('an') }}{{ 'banana'.count('a') }}{{ '-'.join(['a', 'b']) }}"
     "{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ '  '.isspace() }}{{ 'prefix_x'.removeprefix('prefix_') }}", {}),
    ("{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.split('</think>', 1)[0].rstrip('\\n').split('<think>')[-1] }}",
     {"c": "<think>\nreason\n</think>\n\nanswer"}),
    ("{{ [1, 2, 1].count(1) }}{{ [1, 2].index(2) }}{{ d.get('a') }}{{ d.get('zz') }}{{ d.items() | list }}",
     {"d": {"a": 1}}),
    # generators (map, select, items ...) and markup (safe, escape)
    ("{{ none | selectattr('a') | list }}{{ [] | map('upper') | list }}{% for x in [3, 1] | map('string') %}{{ x }}"
     "{% endfor %}{{ [1, 2] | select | first }}{{ 2 in [1, 2] | select }}{{ ([1] | select) is iterable }}", {}),
    ("{{ [1, 2] | map('string') | length }}", {}),
    ("{{ [1] | select | tojson }}", {}),
    ("{{ [1] | select | last }}", {}),
    ("{{ ('<' | safe) + '<' }}|{{ '<' + ('&' | safe) }}|{{ ('<b>' | safe).replace('b', '<') }}|{{ '<x>' | e | upper }}"
     "|{{ ('a' | safe) ~ '<' }}|{{ '-' | safe }}{{ ('<' | e).join(['&', '>']) }}|{{ ('{}' | safe).format('<') }}", {}),
    ("{{ '{} and {}'.format(1, 'two') }}|{{ '{1}{0}{{x}}'.format('a', 'b') }}|{{ '{n}!r={n!r}'.format(n='q') }}", {}),
    # transformers' {% generation %} tag (AssistantTracker): renders its body
    ("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}"
     "{% else %}[{{ m.content }}]{% endif %}{% endfor %}", {"messages": MSGS}),
    # globals
    ("{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ range(5, 0, -2) | list }}{{ dict(a=1, b='x') }}"
     "{{ namespace(a=1).a }}", {}),
    # errors that transformers raises too
    ("{{ raise_exception('bad conversation') }}", {}),
    ("{{ x.y.z }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ [1].append(2) }}", {}),
    ("{{ 1 / 0 }}", {}),
    ("{% set x = 1 %}{% set x.a = 2 %}", {}),
    ("{{ none | length }}", {}),
    ("{% for x in 5 %}{% endfor %}", {}),
    ("{{ {'a': x} | tojson }}", {}),
]


def render_snippets():
    from transformers.utils.chat_template_utils import _compile_jinja_template

    rows = []
    for source, variables in SNIPPETS:
        row = {"template": source, "vars": variables}
        try:
            row["rendered"] = _compile_jinja_template(source).render(**json.loads(json.dumps(variables)))
        except Exception as e:  # noqa: BLE001 - any failure is the expected outcome
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
    out = OUT / "jinja_snippets.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{out.relative_to(ROOT)}: {len(rows)} rows, {sum('error' in r for r in rows)} raise")


if __name__ == "__main__":
    render_all()
    render_snippets()
    found = [d for d in DEEPSEEK_TOKENIZERS if (d / "tokenizer.json").exists()]
    if found:
        tokenize_deepseek(found[0])
    else:
        print("no DeepSeek-V3 tokenizer.json found: token ids not written", file=sys.stderr)
