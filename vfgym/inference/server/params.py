"""Reading and checking a generation request's parameters, as vLLM and OpenAI do.

Every parameter a route takes is read here, and refused with the 400 those servers
give (naming the parameter), so the request handling in `core` deals only in
values already known to be good.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from vfgym.inference.server.protocol import (
    HTTPFailure,
    bad_request,
)
from vfgym.inference.server.tokenizer import content_text

#: The range of `seed` vLLM accepts (a signed 64-bit integer); OpenAI's is the same.
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


def int_param(
    body: dict[str, Any], name: str, *, minimum: int, maximum: int | None = None
) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"'{name}' must be an integer, got {value!r}", name)
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and <= {maximum}" if maximum is not None else ""
        raise bad_request(f"'{name}' must be >= {minimum}{upper}, got {value}", name)
    return value


def stop_param(body: dict[str, Any]) -> list[str] | None:
    stop = body.get("stop")
    if stop is None:
        return None
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return stop
    raise bad_request(f"'stop' must be a string or a list of strings, got {stop!r}", "stop")


#: What /v1/completions gives a request with no `max_tokens`, as vLLM and OpenAI do.
TEXT_COMPLETION_DEFAULT_MAX_TOKENS = 16


def tools_param(body: dict[str, Any]) -> list[Any] | None:
    """`tools`, checked as vLLM and OpenAI check it: malformed schemas are a 400 there too."""
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise bad_request(f"'tools' must be a list of tool dicts, got {tools!r:.120}", "tools")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or tool.get("type", "function") != "function"
        ):
            raise bad_request(
                f"tools[{i}] must be {{'type': 'function', 'function': {{'name': str, "
                f"'description': str, 'parameters': {{...}}}}}}, got {tool!r:.120}",
                f"tools[{i}]",
            )
    return tools


def check_tool_choice(body: dict[str, Any], tools: list[Any] | None) -> None:
    """`tool_choice`, checked as vLLM checks it (OpenAI refuses the same requests).

    "none" needs nothing; "auto", "required" and a named function need `tools`, and
    the named function must be one of them.
    """
    choice = body.get("tool_choice")
    if choice is None or choice == "none":
        return
    if not tools:
        raise bad_request(
            f"'tool_choice' {choice!r:.120} is only allowed when 'tools' are given; "
            "send tools or drop tool_choice",
            "tool_choice",
        )
    if choice in ("auto", "required"):
        return
    if not isinstance(choice, dict):
        raise bad_request(
            "'tool_choice' must be 'none', 'auto', 'required' or "
            f"{{'type': 'function', 'function': {{'name': ...}}}}, got {choice!r:.120}",
            "tool_choice",
        )
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or choice.get("type", "function") != "function":
        raise bad_request(
            "a named 'tool_choice' must be {'type': 'function', 'function': {'name': str}}, "
            f"got {choice!r:.120}",
            "tool_choice",
        )
    names = [tool["function"]["name"] for tool in tools]
    if name not in names:
        raise bad_request(
            f"'tool_choice' names the function {name!r}, which is not one of the tools "
            f"{names}; name one of them or add it to tools",
            "tool_choice",
        )


@dataclass(frozen=True)
class ForcedCall:
    """What a forced `tool_choice` promises the client: a reply that calls a tool,
    and calls only functions among `names`. `shown` and `wanted` word it for errors."""

    shown: str
    wanted: str
    names: tuple[str, ...]


def forced_call(body: dict[str, Any], tools: list[Any] | None) -> ForcedCall | None:
    """The promise of the request's tool_choice ("required" or a named function), or
    None when the model may answer in text ("auto", "none", no tool_choice).

    Read before the policy runs, as the policy gets `body` and may edit it; the
    choice itself has been checked by `check_tool_choice`.
    """
    choice = body.get("tool_choice")
    if choice == "required" and tools:
        names = tuple(tool["function"]["name"] for tool in tools)
        return ForcedCall("'required'", f"a call of one of the tools {list(names)}", names)
    if isinstance(choice, dict):
        name = choice["function"]["name"]
        return ForcedCall(f"naming the function {name!r}", f"a call of {name!r}", (name,))
    return None


def broken_promise(forced: ForcedCall, message: dict[str, Any], model: Any) -> HTTPFailure | None:
    """The error for a policy reply that breaks a forced tool_choice, None for one that keeps it.

    vLLM decodes under a grammar in these modes, so its output is always a call of
    the named function (or of one of the tools for "required"); OpenAI promises the
    same. A scripted policy cannot be constrained, and passing its text on would
    hand the client an answer that no real server gives, so the request fails.
    It is a 500, not a 400: the request is valid (vLLM serves it), the stand-in
    model broke the contract, as a policy that returns a bad reply does. It
    carries `x-should-retry: false`, as a retry would call the same policy again.
    Several calls are let through when each names an allowed function (OpenAI may
    send parallel calls); a call cut short later by `max_tokens` or a stop string
    is cut as any reply is.
    """
    calls = message.get("tool_calls") or []
    if not calls:
        got = f"no tool call, only the text {content_text(message.get('content'))!r:.200}"
    else:
        wrong = [c["function"]["name"] for c in calls if c["function"]["name"] not in forced.names]
        if not wrong:
            return None
        got = f"a call of {wrong[0]!r}"
    return HTTPFailure(
        500,
        f"tool_choice {forced.shown} promises {forced.wanted}, but the policy for model {model!r} "
        f"returned {got}; vLLM constrains the model's output to such a call here, so make "
        "the policy return {'tool_calls': [...]} calling that function when it sees this "
        "tool_choice (or send tool_choice 'auto' to allow text)",
        headers=NO_RETRY,
    )


#: Sent with a 500 that a retry cannot mend (a policy that raised, or answered
#: nonsense): the openai client and `vfgym.inference.client` retry a 5xx unless told not to,
#: which would call the broken policy again and delay the error by the backoff.
NO_RETRY = {"x-should-retry": "false"}

#: The `response_format` types vLLM knows; OpenAI knows the first three.
RESPONSE_FORMAT_TYPES = ("text", "json_object", "json_schema", "structural_tag")


def check_response_format(body: dict[str, Any]) -> None:
    """`response_format`, checked as vLLM and OpenAI check it: a misspelt type is a 400
    there, so it must not pass here and fail only in production."""
    fmt = body.get("response_format")
    if fmt is None:
        return
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind not in RESPONSE_FORMAT_TYPES:
        raise bad_request(
            f"'response_format' must be {{'type': T}} with T one of {list(RESPONSE_FORMAT_TYPES)} "
            "(and a 'json_schema' object for type json_schema), got "
            f"{fmt!r:.120}",
            "response_format",
        )
    schema = fmt.get("json_schema")
    if kind == "json_schema" and (
        not isinstance(schema, dict) or not isinstance(schema.get("name"), str)
    ):
        raise bad_request(
            "'response_format' of type json_schema needs 'json_schema': "
            f"{{'name': str, 'schema': {{...}}}}, got {fmt!r:.120}",
            "response_format",
        )


def refuse_max_completion_tokens(body: dict[str, Any]) -> None:
    """/v1/completions takes `max_tokens` only: OpenAI refuses `max_completion_tokens`
    there and vLLM ignores it (giving the default 16 tokens), so honouring it here
    would hide the mistake until production."""
    if body.get("max_completion_tokens") is not None:
        raise bad_request(
            "'max_completion_tokens' is a chat completions parameter; /v1/completions "
            "takes 'max_tokens' (vLLM would ignore it and give 16 tokens)",
            "max_completion_tokens",
        )


def own_requests(body: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """`body` for the first of `count` policy calls and a copy for each other one.

    A real server samples n choices independently from the request as sent; a
    policy may edit what it is given (append to the messages, say), and one call's
    edits must not reach another's. The first call may have `body` itself, as the
    caller reads what it needs from it beforehand; so n=1 copies nothing.
    """
    return [body] + [copy.deepcopy(body) for _ in range(count - 1)]


@dataclass(frozen=True)
class StreamSettings:
    """How a request that streams wants its stream: with a last usage chunk or not."""

    include_usage: bool


def stream_param(body: dict[str, Any]) -> StreamSettings | None:
    """`stream` and `stream_options`, checked as OpenAI checks them; None: no streaming.

    `stream_options` on a request that does not stream is a 400 on OpenAI and vLLM,
    so a client that sends it fails here as it would against them. A null
    `stream` or `stream_options` means "not set". vLLM's `continuous_usage_stats`
    is refused rather than ignored, so nobody counts on usage it does not send.
    """
    stream = body.get("stream")
    if stream is not None and type(stream) is not bool:
        raise bad_request(f"'stream' must be true or false, got {stream!r:.40}", "stream")
    options = body.get("stream_options")
    if not stream:
        if options is not None:
            raise bad_request(
                "'stream_options' is only allowed when 'stream' is true; "
                "drop stream_options or set stream=True",
                "stream_options",
            )
        return None
    if options is None:
        return StreamSettings(include_usage=False)
    if not isinstance(options, dict):
        raise bad_request(
            f"'stream_options' must be an object like {{'include_usage': true}}, "
            f"got {options!r:.80}",
            "stream_options",
        )
    include_usage = options.get("include_usage")
    if include_usage is not None and type(include_usage) is not bool:
        raise bad_request(
            f"'stream_options.include_usage' must be true or false, got {include_usage!r:.40}",
            "stream_options",
        )
    if options.get("continuous_usage_stats"):
        raise bad_request(
            "'stream_options.continuous_usage_stats' is not supported by this server; "
            "use include_usage for the usage of the whole answer",
            "stream_options",
        )
    return StreamSettings(include_usage=bool(include_usage))


def top_logprobs_param(body: dict[str, Any]) -> int:
    """`top_logprobs` of a chat request; OpenAI and vLLM refuse it without `logprobs`,
    and refuse a `logprobs` that is a count (as in /v1/completions) rather than a flag."""
    flag = body.get("logprobs")
    if flag is not None and type(flag) is not bool:
        raise bad_request(
            f"'logprobs' of a chat completion is true or false, got {flag!r:.40}; the "
            "number of alternatives per token is 'top_logprobs' (0-20)",
            "logprobs",
        )
    top_n = int_param(body, "top_logprobs", minimum=0, maximum=20)
    if top_n is not None and not flag:
        raise bad_request(
            "'top_logprobs' needs 'logprobs': true; set logprobs=True or drop top_logprobs",
            "top_logprobs",
        )
    return top_n or 0
