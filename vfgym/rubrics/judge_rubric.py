"""JudgeRubric: an LLM grades the answer, for tasks no string comparison can check.

The judge is any OpenAI-compatible chat endpoint. Reward functions ask for an
argument named `judge` and await `judge(prompt, completion, answer, state)`,
which returns the judge's text (a reply in content parts is its text parts
joined); what counts as a pass is theirs to decide. A reply with no text (none
at all, or not text) is an error, never an empty verdict read as a "no".
Answers are cached per rollout in `state["judge_response"]`, so several reward
functions (or several rubrics) share one verdict without asking twice. A verdict
belongs to one question put to one judge, so the cache is keyed by both:

    state["judge_response"] = {judge_key: {filled_judge_prompt: reply_text}}

`judge_key` is `JudgeRubric.judge_key()`: a JSON object, as a string, of what
decides the answer besides the prompt, namely the judge model, the client's base
URL and the sampling arguments sent with the request, e.g.
`{"model": "gpt-4.1-nano", "base_url": "https://api.openai.com/v1/",
"sampling_args": {"temperature": 0.0}}`. Two judges that differ in any of these are
each asked. The API key and headers are left out, so that no credential is written
to results.jsonl; clients that differ only there count as one judge. The whole
structure is plain JSON, so a State read back from results.jsonl still answers
from its cache.

Asks about one rollout in flight at the same time that are identical (same judge
key, same filled prompt) share one request, whichever rubric they come from: several
rubrics judging one rollout get one verdict, as they would from the cache. Other
rollouts ask for themselves, even with the same answer, so that a sampling judge
(temperature above 0) gives each rollout its own sample.
"""

from __future__ import annotations

import asyncio
import json
import string
from typing import Any

from vfgym.engine._async import call_offloaded
from vfgym.parsers._chat import message_field, message_role, message_text
from vfgym.parsers.parser import Parser
from vfgym.rubrics.rubric import Rubric
from vfgym.types import Messages, State

DEFAULT_JUDGE_PROMPT = """You are grading an answer against the reference answer.

Question:
```
{question}
```

Reference answer:
```
{answer}
```

Answer to grade:
```
{response}
```

Does the answer to grade agree with the reference answer? Reply with "yes" or "no" only."""

JUDGE_PROMPT_FIELDS = frozenset({"question", "answer", "response"})

#: Fields always filled with text: a format spec on them must format a string.
_TEXT_FIELDS = frozenset({"question", "response"})

#: Request arguments the rubric sets itself, with what to do instead of setting them.
_REQUEST_OWN = {
    "model": "name the judge model with judge_model=...",
    "messages": "the judge is sent judge_prompt, filled in; change it with judge_prompt=...",
    "stream": "the judge's reply is read whole; leave stream out",
}


def _check_template(template: str) -> None:
    """Refuse a judge prompt that could not be filled for every rollout.

    Checked once here rather than failing as a reward error at every rollout: an
    unknown placeholder, conversion or a format spec that cannot format text, and a
    replacement field inside a format spec (the model's own text would become a
    format spec).
    """
    if not isinstance(template, str):
        raise TypeError(f"judge_prompt must be a string, got {type(template).__name__}")
    try:
        fields = [
            (f, spec, conv)
            for _, f, spec, conv in string.Formatter().parse(template)
            if f is not None  # literal text after the last field
        ]
    except ValueError as exc:
        raise ValueError(
            f"judge_prompt is not a valid format string ({exc}); write literal braces as {{{{ }}}}"
        ) from exc
    unknown = {name for name, _, _ in fields} - JUDGE_PROMPT_FIELDS
    if unknown:
        raise ValueError(
            f"judge_prompt uses unknown placeholder(s) {sorted(unknown)}; it may use "
            f"{sorted(JUDGE_PROMPT_FIELDS)}, and literal braces must be doubled"
        )
    for name, spec, conversion in fields:
        _check_field(name, spec or "", conversion)


def _check_field(name: str, spec: str, conversion: str | None) -> None:
    shown = (
        "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
    )
    if conversion not in (None, "s", "r", "a"):
        raise ValueError(
            f"judge_prompt field {shown} has an unknown conversion !{conversion}; use !s, !r, "
            "!a or none"
        )
    if "{" in spec or "}" in spec:
        raise ValueError(
            f"judge_prompt field {shown} has a field inside its format spec, which would be "
            "filled with the rollout's text; write literal braces as {{ }}"
        )
    if spec and (conversion is not None or name in _TEXT_FIELDS):
        try:
            format("", spec)
        except ValueError as exc:
            raise ValueError(
                f"judge_prompt field {shown} cannot format the text it is filled with ({exc}); "
                "use a string format spec, or none"
            ) from exc


def _check_sampling_args(args: dict[str, Any]) -> None:
    """Refuse arguments the judge request sets itself: passed on, each would fail every
    judge call with an error that blames the server."""
    for key, advice in _REQUEST_OWN.items():
        if key in args and (key != "stream" or args[key]):
            raise ValueError(f"judge_sampling_args may not set {key!r}: {advice}")


def _content_text(content: Any) -> str | None:
    """The text of a reply's content: a string, or the text parts of a list of parts
    joined; "" for none at all; None for content that is not text (a number, an
    object, only image parts), which no reward function can read as a verdict."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        return None
    texts = [
        str(message_field(part, "text") or "")
        for part in content
        if message_field(part, "type") == "text"
    ]
    return "".join(texts) if texts or not content else None


def _reply_text(model: str, response: Any) -> str:
    """The judge's reply text out of a chat completion; RuntimeError, saying what was
    wrong, for anything without a text verdict."""
    choices = getattr(response, "choices", None)
    if not choices:
        error = getattr(response, "error", None)
        detail = f": {message_field(error, 'message') or error}" if error else ""
        raise RuntimeError(
            f"judge model {model!r} returned no choices{detail}. Check the judge server and "
            "the model name; the judge must answer with a chat completion"
        )
    message = getattr(choices[0], "message", None)
    if message is None:
        raise RuntimeError(
            f"judge model {model!r} returned a choice with no message. Check that the judge "
            "server speaks the chat-completions protocol"
        )
    content = getattr(message, "content", None)
    text = _content_text(content)
    if text is None:
        raise RuntimeError(
            f"judge model {model!r} replied with content that is not text "
            f"({type(content).__name__}: {str(content)[:80]}); use a judge model that "
            "answers in text"
        )
    if not text.strip():
        # No verdict at all (a length cut-off, a refusal, a tool call): reward
        # functions would read it as "no" and give a made-up 0.
        refusal = getattr(message, "refusal", None)
        reason = (
            f"refused: {refusal}"
            if refusal
            else f"finish_reason {getattr(choices[0], 'finish_reason', None)!r}"
        )
        raise RuntimeError(
            f"judge model {model!r} gave an empty reply ({reason}); raise max_tokens in "
            "judge_sampling_args or check the judge prompt"
        )
    return text


def question_of(prompt: Messages) -> str:
    """The question a rollout answered: the last user message (or the prompt string)."""
    if isinstance(prompt, str):
        return prompt
    users = [m for m in prompt if message_role(m) == "user"]
    if users:
        return message_text(users[-1])
    return message_text(prompt[-1]) if prompt else ""


class JudgeRubric(Rubric):
    """A rubric whose reward functions can consult an LLM judge."""

    def __init__(
        self,
        parser: Parser | None = None,
        parallelize_scoring: bool = False,
        judge_client: Any | None = None,
        judge_model: str = "gpt-4.1-nano",
        judge_sampling_args: dict[str, Any] | None = None,
        judge_prompt: str = DEFAULT_JUDGE_PROMPT,
        **kwargs: Any,
    ) -> None:
        super().__init__(parser=parser, parallelize_scoring=parallelize_scoring, **kwargs)
        self._judge_client = judge_client
        self.judge_model = judge_model
        self.judge_prompt = judge_prompt  # (checked, and offered to reward functions)
        self.judge_sampling_args = dict(judge_sampling_args or {})
        _check_sampling_args(self.judge_sampling_args)
        self.class_objects.update(
            judge=self.judge,
            judge_model=self.judge_model,
            judge_sampling_args=self.judge_sampling_args,
        )
        if judge_client is not None:
            self.class_objects["judge_client"] = judge_client

    @property
    def judge_prompt(self) -> str:
        """The judge prompt template; one set later is checked as the constructor's is."""
        return self._judge_prompt

    @judge_prompt.setter
    def judge_prompt(self, template: str) -> None:
        _check_template(template)
        self._judge_prompt = template
        class_objects = getattr(self, "class_objects", None)  # (None before Rubric's init)
        if class_objects is not None:
            class_objects["judge_prompt"] = template

    @property
    def judge_client(self) -> Any:
        """The judge's client; an `AsyncOpenAI()` from the environment, made on first use."""
        if self._judge_client is None:
            from openai import AsyncOpenAI, OpenAIError

            try:
                self._judge_client = AsyncOpenAI()
            except OpenAIError as exc:
                raise RuntimeError(
                    "JudgeRubric has no judge_client and none can be made from the environment "
                    f"({exc}). Pass judge_client=AsyncOpenAI(base_url=..., api_key=...) or set "
                    "OPENAI_API_KEY (and OPENAI_BASE_URL for another server)."
                ) from exc
            self.class_objects["judge_client"] = self._judge_client
        return self._judge_client

    @judge_client.setter
    def judge_client(self, client: Any) -> None:
        self._judge_client = client
        self.class_objects["judge_client"] = client

    def _request_args(self) -> dict[str, Any]:
        """The sampling arguments sent; checked each time, as the dict is public."""
        args = {k: v for k, v in self.judge_sampling_args.items() if v is not None}
        _check_sampling_args(args)
        return args

    def judge_key(self) -> str:
        """Which judge answers, as the key of its answers in `state["judge_response"]`.

        A JSON object (as a string, with sorted keys, so equal judges give equal keys)
        of the model, the client's base URL and the sampling arguments actually sent
        (those set to None are not sent, so they do not count). Values JSON cannot hold
        are written as their repr. A client without a `base_url` is told apart by its
        identity instead, so two such clients are never mistaken for one judge.
        Reads `judge_client`, so it fails like a judge call when no client can be made.
        """
        client = self.judge_client
        base_url = getattr(client, "base_url", None)
        if base_url is None:
            kind = type(client)
            base_url = f"<{kind.__module__}.{kind.__qualname__} object at {id(client):#x}>"
        identity = {
            "model": self.judge_model,
            "base_url": str(base_url),
            "sampling_args": self._request_args(),
        }
        return json.dumps(identity, sort_keys=True, default=repr)

    async def _ask(self, judge_prompt: str) -> str:
        create = self.judge_client.chat.completions.create
        try:
            response = await call_offloaded(
                create,
                model=self.judge_model,
                messages=[{"role": "user", "content": judge_prompt}],
                **self._request_args(),
            )
        except Exception as exc:
            raise RuntimeError(
                f"judge model {self.judge_model!r} could not answer: {type(exc).__name__}: {exc}. "
                "Check the judge server, the model name and the API key."
            ) from exc
        return _reply_text(self.judge_model, response)

    async def judge(
        self,
        prompt: Messages,
        completion: Messages,
        answer: Any,
        state: State | None,
        **kwargs: Any,
    ) -> str:
        """The judge's reply on this rollout's answer, asked at most once per rollout.

        The judge prompt is filled with the question (last user message), the
        reference `answer` and the parser's answer from `completion`. The reply is
        reused only for the same filled prompt put to the same judge (`judge_key`);
        a failed call caches nothing, so a later call asks again. With `state` None (a
        reward function without one) there is nowhere to cache: the judge is asked.
        Identical asks about one rollout in flight at once, from any rubric, share one
        request.
        """
        response = self.parser.parse_answer(completion)
        filled = self.judge_prompt.format(
            question=question_of(prompt),
            answer=answer,
            response="" if response is None else response,
        )
        if state is None:
            return await self._ask(filled)
        judge_key = self.judge_key()
        cache = state.get("judge_response")
        if not isinstance(cache, dict):
            cache = state["judge_response"] = {}
        answers = cache.get(judge_key)
        if isinstance(answers, dict) and filled in answers:
            return answers[filled]
        text = await self._ask_shared((asyncio.get_running_loop(), id(state), judge_key, filled))
        _remember(cache, judge_key, filled, text)
        return text

    async def _ask_shared(self, key: _InflightKey) -> str:
        """Ask, or await the identical ask about the same rollout already in flight.

        Several rubrics (or reward functions) may put the same question about one
        rollout to the same judge at once: one request serves them all, as the cache
        would once it is answered. A shared failure is every waiter's failure (the
        same request would fail again). A cancelled ask is only its caller's: its
        waiters ask again, one of them sending the request and the others awaiting it.
        """
        while True:
            pending = _INFLIGHT.get(key)
            if pending is None or pending.done():
                return await self._ask_first(key)
            # asyncio.wait neither raises the request's outcome nor passes this
            # task's own cancellation on to the shared request.
            await asyncio.wait([pending])
            if not pending.cancelled():
                return pending.result()

    async def _ask_first(self, key: _InflightKey) -> str:
        """Send the request, published in `_INFLIGHT` for identical asks to await."""
        future: asyncio.Future[str] = key[0].create_future()
        _INFLIGHT[key] = future
        try:
            text = await self._ask(key[3])
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so an unshared failure is not reported twice
            raise
        else:
            future.set_result(text)
            return text
        finally:
            if not future.done():  # cancelled (or interrupted): the waiters ask again
                future.cancel()
            if _INFLIGHT.get(key) is future:
                del _INFLIGHT[key]


#: (event loop, id of the rollout's State, judge key, filled prompt): what makes two
#: judge asks identical. (The State outlives the entry: its asker holds it.)
_InflightKey = tuple[asyncio.AbstractEventLoop, int, str, str]

#: Judge requests in flight, shared by every JudgeRubric, so that identical asks about
#: one rollout from several rubrics at once send one request. Keyed by the event loop
#: too, as a future can only be awaited on its own loop. An entry lives while its
#: request does, so the table is empty whenever no judge is being asked.
_INFLIGHT: dict[_InflightKey, asyncio.Future[str]] = {}


def _remember(cache: dict[str, Any], judge_key: str, filled: str, text: str) -> None:
    """File `text` under its judge and prompt. An entry under the judge's key that
    is not a mapping (user code wrote something else there) is replaced, not crashed on."""
    answers = cache.get(judge_key)
    if not isinstance(answers, dict):
        answers = cache[judge_key] = {}
    answers[filled] = text
