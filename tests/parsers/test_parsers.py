"""Parsers: plain, XML, think-block, and the answer extractors."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessage

from vfgym.inference.server import ModelServer
from vfgym.parsers import (
    MaybeThinkParser,
    Parser,
    ThinkParser,
    XMLParser,
    extract_boxed_answer,
    extract_hash_answer,
)


def chat(*turns: tuple[str, str | None]) -> list[dict]:
    return [{"role": role, "content": content} for role, content in turns]


def tool_turn() -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


def test_parser_returns_text_and_applies_extract_fn() -> None:
    assert Parser().parse("  hi ") == "  hi "
    assert Parser(extract_fn=str.upper).parse("hi") == "HI"


def test_parser_rejects_a_non_callable_extract_fn() -> None:
    with pytest.raises(TypeError, match="extract_fn must be a callable"):
        Parser(extract_fn="strip")  # type: ignore[arg-type]


def test_parse_answer_reads_the_last_assistant_turn() -> None:
    completion = chat(("assistant", "first"), ("user", "more"), ("assistant", "second"))
    completion.append({"role": "tool", "content": "result", "tool_call_id": "c1"})
    assert Parser().parse_answer(completion) == "second"
    assert Parser().parse_answer("plain text") == "plain text"
    assert Parser().parse_answer(chat(("user", "q"))) is None


def test_parse_answer_of_a_tool_call_only_turn_is_empty_not_none_text() -> None:
    completion = [*chat(("assistant", "x")), {"role": "assistant", "content": None}]
    assert Parser().parse_answer(completion) == ""


def test_parse_answer_accepts_openai_message_objects_and_content_parts() -> None:
    message = ChatCompletionMessage(role="assistant", content="from object")
    assert Parser().parse_answer([message]) == "from object"  # type: ignore[list-item]
    parts = {
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    assert Parser().parse_answer([parts]) == "ab"  # type: ignore[list-item]


def test_role_helpers_pick_messages_in_order() -> None:
    convo = chat(
        ("system", "s"), ("user", "u1"), ("assistant", "a1"), ("tool", "t"), ("user", "u2")
    )
    parser = Parser()
    assert [m["content"] for m in parser.get_system_messages(convo)] == ["s"]
    assert [m["content"] for m in parser.get_user_messages(convo)] == ["u1", "u2"]
    assert [m["content"] for m in parser.get_assistant_messages(convo)] == ["a1"]
    assert [m["content"] for m in parser.get_tool_messages(convo)] == ["t"]


def test_base_format_reward_is_one_and_named() -> None:
    func = Parser().get_format_reward_func()
    assert func.__name__ == "format_reward_func"
    assert func(completion=chat(("assistant", "anything"))) == 1.0


def test_parsers_pickle_with_their_format_reward() -> None:
    parser = XMLParser(["think", ("code", "python")], answer_field="code")
    clone = pickle.loads(pickle.dumps(parser))
    assert clone.parse_answer("<python>x</python>") == "x"
    func = pickle.loads(pickle.dumps(parser.get_format_reward_func()))
    assert func("<think>t</think><code>c</code>") == 1.0


def test_xml_parse_reads_fields_and_alternatives_under_the_canonical_name() -> None:
    parser = XMLParser(["think", ("code", "python"), "answer"])
    parsed = parser.parse("<think>\nplan\n</think>\n<python>print(1)</python>")
    assert vars(parsed) == {"think": "plan", "code": "print(1)", "answer": None}
    assert parsed.python == "print(1)"  # the alternative name reads the same field
    assert not hasattr(parsed, "nonsense")


def test_xml_parse_keeps_angle_brackets_and_lines_in_content() -> None:
    parser = XMLParser(["think", "answer"])
    text = "<think>if a < b and c > d:\n    v = vector<int>()\n</think><answer>x<y</answer>"
    parsed = parser.parse(text)
    assert parsed.think == "if a < b and c > d:\n    v = vector<int>()"
    assert parsed.answer == "x<y"


def test_xml_parse_accepts_an_unclosed_final_tag() -> None:
    parser = XMLParser(["think", "answer"])
    assert parser.parse("<think>t</think>\n<answer>42\n").answer == "42"


def test_xml_parse_unclosed_tag_stops_at_the_next_field() -> None:
    parser = XMLParser(["think", "answer"])
    parsed = parser.parse("<think>never closed <answer>7</answer>")
    assert parsed.think == "never closed"
    assert parsed.answer == "7"


def test_xml_parse_ignores_a_field_tag_mentioned_inside_another_field() -> None:
    parser = XMLParser(["think", "answer"])
    parsed = parser.parse("<think>I will write <answer>x</answer> later</think><answer>5</answer>")
    assert parsed.think == "I will write <answer>x</answer> later"
    assert parsed.answer == "5"


def test_xml_parse_first_or_last_occurrence_and_strip() -> None:
    parser = XMLParser(["answer"])
    text = "<answer> 1 </answer> then <answer> 2 </answer>"
    assert parser.parse(text).answer == "1"
    assert parser.parse(text, last=True).answer == "2"
    assert parser.parse(text, strip=False).answer == " 1 "


def test_xml_parse_answer_searches_back_for_a_turn_with_an_answer() -> None:
    parser = XMLParser(["think", "answer"], extract_fn=str.upper)
    completion = [
        *chat(("assistant", "<think>a</think><answer>early</answer>")),
        tool_turn(),
        *chat(("tool", "r"), ("assistant", "<answer>one</answer><answer>final</answer>")),
        *chat(("user", "ok"), ("assistant", "<think>no answer here</think>")),
    ]
    assert parser.parse_answer(completion) == "FINAL"
    assert parser.parse_answer("<answer>s</answer>") == "S"
    assert parser.parse_answer(chat(("assistant", "nothing tagged"))) is None


def test_xml_parse_answer_with_an_alternative_answer_field() -> None:
    parser = XMLParser([("code", "python")], answer_field="python")
    assert parser.parse_answer("<code>c</code>") == "c"


def test_xml_format_uses_canonical_tags_and_any_alternative_key() -> None:
    parser = XMLParser(["think", ("code", "python")])
    assert parser.format(think="t", python="p") == "<think>\nt\n</think>\n<code>\np\n</code>"
    assert parser.get_fields() == ["think", "code"]


def test_xml_format_reports_missing_unknown_and_doubled_fields() -> None:
    parser = XMLParser(["think", ("code", "python")])
    with pytest.raises(ValueError, match="missing field 'code'"):
        parser.format(think="t")
    with pytest.raises(ValueError, match="unknown field"):
        parser.format(think="t", code="c", extra="e")
    with pytest.raises(ValueError, match="more than once"):
        parser.format(think="t", code="c", python="p")


def test_xml_format_str_names_every_tag() -> None:
    text = XMLParser(["think", ("code", "python")]).get_format_str()
    for tag in ("<think>", "</think>", "<code>", "</code>", "<python>"):
        assert tag in text


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ("answer", TypeError, "must be a list"),
        ([], ValueError, "at least one field"),
        (["a", "a"], ValueError, "appears twice"),
        (["a", ("b", "a")], ValueError, "appears twice"),
        ([()], TypeError, "non-empty tuple"),
        ([3], TypeError, "tag name"),
        (["has space"], ValueError, "not a usable tag name"),
    ],
)
def test_xml_parser_rejects_bad_fields(fields: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        XMLParser(fields)  # type: ignore[arg-type]


def test_xml_format_reward_scores_each_criterion() -> None:
    # verifiers 0.1.x's formula (tests/compat/test_verifiers_behaviour.py has more)
    parser = XMLParser(["think", "answer"])
    score = parser.score_format
    assert score("<think>t</think>\n<answer>a</answer>") == 1.0
    assert score("no tags at all") == pytest.approx(0.2)
    # only half the fields: 0.2 presence + 0.2 always + ends with the last field
    assert score("<answer>a</answer>") == pytest.approx(0.6)
    # wrong order: neither starts with the first field nor ends with the last
    assert score("<answer>a</answer><think>t</think>") == pytest.approx(0.6)
    # text before the fields loses the start point
    assert score("Sure! <think>t</think><answer>a</answer>") == pytest.approx(0.8)
    # an unclosed tag still counts its field as present, but loses the end point
    assert score("<think>t</think><answer>a") == pytest.approx(0.8)
    # a stray closing tag costs nothing
    assert score("<think>t</think></think><answer>a</answer>") == pytest.approx(1.0)


def test_xml_format_reward_skips_tool_call_only_turns() -> None:
    parser = XMLParser(["think", "answer"])
    reward = parser.get_format_reward_func()
    good = "<think>t</think><answer>a</answer>"
    completion = [tool_turn(), *chat(("tool", "r"), ("assistant", good))]
    assert reward(completion=completion) == 1.0
    assert reward(completion=[tool_turn()]) == 0.0
    two_turns = chat(("assistant", good), ("assistant", "plain"))
    assert reward(completion=two_turns) == pytest.approx(0.6)
    assert reward(completion=good) == 1.0


TAGS = ("think", "code", "python", "answer")


FORBIDDEN = tuple(t for tag in TAGS for t in (f"<{tag}>", f"</{tag}>"))


contents = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from("<>/ \n"),
    max_size=60,
).filter(lambda s: not any(tag in s for tag in FORBIDDEN))


@settings(max_examples=150, deadline=None)
@given(think=contents, code=contents, answer=contents)
def test_xml_format_then_parse_round_trips(think: str, code: str, answer: str) -> None:
    parser = XMLParser(["think", ("code", "python"), "answer"])
    text = parser.format(think=think, code=code, answer=answer)
    raw = parser.parse(text, strip=False)
    assert vars(raw) == {"think": f"\n{think}\n", "code": f"\n{code}\n", "answer": f"\n{answer}\n"}
    stripped = parser.parse(text)
    assert vars(stripped) == {
        "think": think.strip(),
        "code": code.strip(),
        "answer": answer.strip(),
    }
    assert parser.parse_answer(text) == answer.strip()
    assert parser.score_format(text) == 1.0


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "a", "<", ">", "\n"])
    )
)
def test_xml_parse_and_score_never_fail_on_arbitrary_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    parser = XMLParser(["think", "answer"])
    parsed = parser.parse(text)
    assert set(vars(parsed)) == {"think", "answer"}
    assert 0.0 <= parser.score_format(text) <= 1.0


def test_think_parser_answers_only_after_a_closed_think_block() -> None:
    parser = ThinkParser()
    assert parser.parse("<think>work</think>\n 42 ") == "42"
    assert parser.parse("no thinking, just 42") == ""
    assert ThinkParser(extract_fn=extract_boxed_answer).parse("<think>t</think> \\boxed{7}") == "7"


def test_think_format_reward() -> None:
    reward = ThinkParser().get_format_reward_func()
    assert reward(completion=chat(("assistant", "<think>t</think> answer"))) == 1.0
    assert reward(completion=chat(("assistant", "answer <think>t</think> x"))) == 0.0
    assert reward(completion=chat(("assistant", "<think>t</think>   "))) == 0.0
    assert reward(completion=chat(("assistant", "<think>a</think><think>b</think> x"))) == 0.0
    mixed = [tool_turn(), *chat(("assistant", "<think>t</think>a"), ("assistant", "bare"))]
    assert reward(completion=mixed) == 0.5
    assert reward(completion=[tool_turn()]) == 0.0


def test_maybe_think_parser_strips_a_think_block_if_present() -> None:
    parser = MaybeThinkParser()
    assert parser.parse("<think>t</think> 5 ") == "5"
    assert parser.parse(" 5 ") == "5"
    assert parser.parse_answer(chat(("assistant", "<think>x</think>y"))) == "y"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so \\boxed{42}.", "42"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{1} then \\boxed{{a}{b}}", "{a}{b}"),
        ("\\boxed{3} and an unfinished \\boxed{4", "3"),
        ("\\boxed{\\}} rest", "\\}"),
        ("\\boxed{a b}", "a b"),
        ("no box here", "no box here"),
        ("", ""),
    ],
)
def test_extract_boxed_answer(text: str, expected: str) -> None:
    assert extract_boxed_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Natalia sold 48 clips.\n#### 72", "72"),
        ("#### 1,000 ", "1,000"),
        ("no hashes", "no hashes"),
    ],
)
def test_extract_hash_answer(text: str, expected: str) -> None:
    assert extract_hash_answer(text) == expected


def test_xml_parse_a_field_opened_again_before_it_closed_is_two_values() -> None:
    parser = XMLParser(["think", "answer"])
    text = "<answer>\nThe answer is <answer>42</answer>"
    assert parser.parse(text).answer == "The answer is"
    assert parser.parse_answer(text) == "42"
    # one of the two fields, ending with it (verifiers 0.1.x's formula)
    assert parser.score_format("<answer>1<answer>2</answer>") == pytest.approx(0.6)


def test_xml_parse_an_unclosed_field_stops_at_a_closing_tag_of_another() -> None:
    parser = XMLParser(["think", "answer"])
    assert parser.parse_answer("<answer>42</think>") == "42"
    assert parser.parse("<think>plan</answer> <answer>7</answer>").think == "plan"
    # both fields' tags appear; the text does not end with </answer>
    assert parser.score_format("<think>t</think><answer>42</think>") == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the answer is \\fbox{7}", "7"),
        ("\\boxed{1} but finally \\fbox{\\frac{2}{3}}", "\\frac{2}{3}"),
        ("\\fbox{8} and at last \\boxed{9}", "9"),
    ],
)
def test_fbox_is_read_like_boxed(text: str, expected: str) -> None:
    assert extract_boxed_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a piecewise answer: the escaped \{ opens no group, so the box closes at the last }
        ("so f = \\boxed{\\left\\{ x \\right.} done", "\\left\\{ x \\right."),
        ("\\boxed{\\}} rest", "\\}"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
    ],
)
def test_escaped_braces_do_not_count_as_grouping(text: str, expected: str) -> None:
    assert extract_boxed_answer(text) == expected


def test_hash_answer_is_the_line_after_the_marker() -> None:
    assert extract_hash_answer("40 + 2 = 42\n#### 42\nSo the answer is 42.") == "42"
    assert extract_hash_answer("####\n  17  \nthat's it") == "17"


def test_parser_with_boxed_extract_reads_the_last_assistant_fbox() -> None:
    parser = Parser(extract_fn=extract_boxed_answer)
    completion = [
        {"role": "assistant", "content": [{"type": "text", "text": "I get \\fbox{12}"}]},
        {"role": "user", "content": "\\boxed{0}"},
    ]
    assert parser.parse_answer(completion) == "12"


PARTS = [
    {"type": "text", "text": "<think>hm</think>"},
    {"type": "text", "text": "<answer>7</answer>"},
]


def tool_call_only(messages: list[dict[str, object]]) -> dict[str, object]:
    """A model turn that only calls a tool: its `content` arrives as None."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


@pytest.fixture(scope="module")
def none_content() -> object:
    """`choices[0].message.content` as the real openai client returns it for a tool call."""
    with ModelServer(tool_call_only).running() as server:
        response = server.sync_client().chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
        )
    content = response.choices[0].message.content
    assert content is None
    return content


@pytest.mark.parametrize(
    "parser",
    [ThinkParser(), MaybeThinkParser(), XMLParser(["think", "answer"])],
    ids=["think", "maybe-think", "xml"],
)
def test_parse_of_none_content_reads_as_no_text(parser: Parser, none_content: object) -> None:
    """`parser.parse(message.content)` raised TypeError/AttributeError ("argument of type
    'NoneType' is not iterable") on a tool-call turn instead of finding no answer."""
    parsed = parser.parse(none_content)  # type: ignore[arg-type]
    if isinstance(parser, XMLParser):
        assert parsed.answer is None and parsed.think is None
        assert parser.score_format(none_content) == pytest.approx(0.2)  # type: ignore[arg-type]
    else:
        assert parsed == ""


def test_parse_of_content_parts_reads_their_text() -> None:
    """Content given as parts was scanned as a list: XMLParser raised TypeError and the
    think parsers never found the closing tag, although parse_answer reads parts."""
    xml = XMLParser(["think", "answer"])
    assert xml.parse(PARTS).answer == "7"  # type: ignore[arg-type]
    assert xml.score_format(PARTS) == pytest.approx(1.0)  # type: ignore[arg-type]
    assert ThinkParser().parse(PARTS) == "<answer>7</answer>"  # type: ignore[arg-type]
    assert MaybeThinkParser().parse(PARTS) == "<answer>7</answer>"  # type: ignore[arg-type]
    boxed = ThinkParser(extract_fn=extract_boxed_answer)
    assert boxed.parse([{"type": "text", "text": "<think>x</think>\\boxed{3}"}]) == "3"  # type: ignore[arg-type]


def test_parse_of_something_that_is_not_text_says_what_to_give() -> None:
    """A whole message (a dict) passed where its text belongs is named, with the fix."""
    with pytest.raises(TypeError, match="parse_answer"):
        XMLParser(["answer"]).parse({"role": "assistant", "content": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message's text"):
        ThinkParser().parse(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "format_score"),
    [("<answer >4</answer>", 0.4), ("<answer>4</answer >", 0.2), ("<answer>\n4\n</answer\n>", 0.2)],
)
def test_xml_tags_may_have_whitespace_before_the_closing_bracket(
    text: str, format_score: float
) -> None:
    parser = XMLParser(["think", "answer"])
    assert parser.parse(text).answer == "4"
    assert parser.parse_answer([{"role": "assistant", "content": text}]) == "4"
    # the format reward is verifiers 0.1.x's, which reads only the exact tags
    assert parser.score_format(text) == pytest.approx(format_score)


def test_an_answer_field_that_is_not_a_field_is_refused_when_the_parser_is_made() -> None:
    with pytest.raises(ValueError, match=r"answer_field 'final'.*fields"):
        XMLParser(["think", "answer"], answer_field="final")


def test_parse_answer_without_an_answer_field_says_so_instead_of_always_none() -> None:
    parser = XMLParser(["think", "code"])
    assert parser.parse("<code>x</code>").code == "x"  # everything else still works
    with pytest.raises(ValueError, match="answer_field="):
        parser.parse_answer("<code>x</code>")
