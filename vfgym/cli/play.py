"""`vfgym play`: a person takes the model's seat and plays an environment in the terminal.

It walks the same episode pieces a rollout does (`init_state`, `setup_state`,
`record_model_turn`, `advance`, `finish`, `cleanup_state`), so what the player
sees is exactly what a model would: the environment's replies, tool results and,
for games, the board. Each line read from the input is one model turn; a line
`/tool NAME {json}` makes a tool call and `/quit` ends the episode. Input is read
from a stream, so a session can be scripted by piping lines in. A turn that needs
line breaks (a fenced code block) is typed between `/paste` and `/end`.

The event loop runs only while the environment works, never while waiting for
the person, so Ctrl-C at the prompt interrupts at once and cleanup still runs.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import math
import re
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any

from vfgym.cli._support import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandError,
    build_environment,
    check_docker,
    describe_environment,
)
from vfgym.engine._async import maybe_await
from vfgym.envs.env_group import EnvGroup
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.types import ChatMessage, State

HELP = (
    "Type the model's turn and press Enter. `/paste` starts a turn of several lines, "
    "ended by a line `/end`. `/tool NAME {json arguments}` calls a tool, "
    "`/help` shows this, `/quit` (or end of input) ends the episode."
)
#: The line that ends a `/paste` turn.
PASTE_END = "/end"
#: What Python decodes undecodable bytes to under `surrogateescape`.
_SURROGATE = re.compile("[\ud800-\udfff]")


class _NotText(ValueError):
    """A typed line whose bytes are not text in the input's encoding."""


class PlaySession:
    """One episode of `env` on dataset row `row`, with turns read from `stdin`."""

    def __init__(self, env: MultiTurnEnv, row: Mapping[str, Any], stdin: IO[str], out: IO[str]):
        self.env = env
        self.row = row
        self.stdin = stdin
        self.out = out
        self.interactive = _isatty(stdin)
        self._calls = 0
        self._last_board = ""

    # ------------------------------------------------------------- output

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def show_messages(self, messages: Any) -> None:
        if isinstance(messages, str):
            if messages:
                self.say(messages.rstrip("\n"))
            return
        for message in messages or []:
            role = str(message.get("role", "?"))
            if role == "tool":
                label = f"[tool result {message.get('tool_call_id') or ''}]".replace(" ]", "]")
            else:
                label = f"[{role}]"
            self.say(label)
            content = message.get("content")
            self.say(content if isinstance(content, str) else json.dumps(content))

    def show_board(self, state: State, shown: Any = None) -> None:
        """The game's own rendering, when it changed and the reply does not already hold it."""
        render = getattr(self.env, "render_state", None)
        if not callable(render):
            return
        try:
            board = render(state)
        except Exception as exc:  # a half-built state must not end the session
            board = f"(cannot render the state: {type(exc).__name__}: {exc})"
        if isinstance(shown, list):
            replies = "\n".join(str(m.get("content") or "") for m in shown)
        else:
            replies = str(shown or "")
        board = str(board or "").strip()
        if not board or board == self._last_board:
            return
        self._last_board = board
        if board not in replies:
            self.say("[state]")
            self.say(board)

    def tools(self) -> list[Any]:
        """The tools offered to the model in this episode: the row's own, else those of
        the environment that plays it (an EnvGroup's member, named by the row's task)."""
        info = self.row.get("info") or {}
        env: Any = self.env
        if isinstance(env, EnvGroup):
            env = env.get_env_for_task(self.row.get("task", "default"))
        return list(info.get("oai_tools") or env.oai_tools or [])

    def show_tools(self) -> None:
        tools = self.tools()
        if not tools:
            return
        self.say("[tools]  call one with: /tool NAME {json arguments}")
        for tool in tools:
            function = tool.get("function", {})
            params = ", ".join((function.get("parameters") or {}).get("properties", {}))
            summary = (function.get("description") or "").splitlines()[:1]
            self.say(f"  {function.get('name')}({params})  {' '.join(summary)}".rstrip())

    # -------------------------------------------------------------- input

    def read_line(self) -> str | None:
        """The next line typed, without its line end; None at the end of the input.

        Bytes are read and decoded here when the stream has them (as `sys.stdin` does),
        because a text stream that meets bytes it cannot decode raises and loses the
        rest of what it had read, later lines included. Raises `_NotText` for such a
        line, and for one decoded with stand-ins for bad bytes (`surrogateescape`).
        """
        encoding = getattr(self.stdin, "encoding", None) or "utf-8"
        buffer = getattr(self.stdin, "buffer", None)
        if buffer is not None:
            raw = buffer.readline()
            if not raw:
                return None
            try:
                line = raw.decode(encoding)
            except (UnicodeDecodeError, LookupError):
                raise _NotText(_encoding_name(encoding)) from None
        else:
            line = self.stdin.readline()
            if not line:
                return None
        if _SURROGATE.search(line):
            raise _NotText(_encoding_name(encoding))
        return line.rstrip("\r\n")

    def read_turn(self) -> ChatMessage | str | None:
        """The next model turn typed by the person; None to quit.

        A mistake (an empty line, text that is not text, `/tool` without a tool to
        call) is explained and read again, never spent as the model's turn.
        """
        while True:
            if self.interactive:
                self.out.write("> ")
                self.out.flush()
            try:
                line = self.read_line()
            except _NotText as exc:
                self.say(
                    f"That line is not valid {exc} text (nothing was sent); check the "
                    "terminal's encoding and type it again."
                )
                continue
            if line is None:
                if self.interactive:  # end the prompt's line: Ctrl-D printed nothing
                    self.say()
                return None
            if not self.interactive:
                self.say(f"> {line}")
            command = line.strip()
            if not command:
                self.say("(An empty line: nothing was sent. Type the model's turn, or /help.)")
                continue
            if command in ("/quit", "/exit"):
                return None
            if command == "/help":
                self.say(HELP)
                continue
            if command == "/paste":
                pasted = self.read_paste()
                if pasted is None:
                    continue
                return self._text_turn(pasted)
            word, *rest = command.split(None, 1)
            if word == "/tool":
                message = self._tool_message(rest[0] if rest else "")
                if message is None:
                    continue
                return message
            return self._text_turn(line)

    def _text_turn(self, text: str) -> ChatMessage | str:
        """`text` as the model's turn: the text itself for a completion environment."""
        if self.env.message_type == "completion":
            return text
        return {"role": "assistant", "content": text}

    def read_paste(self) -> str | None:
        """The lines typed up to a line `/end`, joined as one turn; None (and said so)
        when there are none. Each line is otherwise one turn, so an answer that needs
        line breaks (a ```python block) could not be typed at all. End of input ends
        the paste too: a piped script's last turn is sent as it was given.
        """
        self.say(f"(Pasting one turn: type or paste its lines, then a line {PASTE_END}.)")
        lines: list[str] = []
        while True:
            if self.interactive:
                self.out.write("| ")
                self.out.flush()
            try:
                line = self.read_line()
            except _NotText as exc:
                self.say(f"That line is not valid {exc} text and was left out; type it again.")
                continue
            if line is None or line.strip() == PASTE_END:
                break
            if not self.interactive:
                self.say(f"| {line}")
            lines.append(line)
        text = "\n".join(lines)
        if not text.strip():
            self.say("(An empty paste: nothing was sent. Type the model's turn, or /help.)")
            return None
        return text

    def _tool_message(self, rest: str) -> ChatMessage | None:
        if self.env.message_type != "chat":
            self.say("This environment uses text completions; it has no tool calls.")
            return None
        if not self.tools():  # a call would only be spent as an invalid turn
            self.say(
                f"{self.env.env_id or 'This environment'} has no tools; type your turn as "
                "text, in the format its instructions ask for."
            )
            return None
        name, _, arguments = rest.partition(" ")
        if not name:
            self.say('usage: /tool NAME {json arguments}, e.g. /tool add {"a": 1, "b": 2}')
            return None
        self._calls += 1
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": f"call_{self._calls}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments.strip() or "{}"},
                }
            ],
        }

    # ---------------------------------------------------------------- loop

    async def start(self) -> State:
        """The episode's new State (`init_state`); `setup` then prepares it."""
        env, row = self.env, self.row
        return await env.init_state(
            row["prompt"],
            await env.init_completion(),
            row.get("answer", ""),
            row.get("task", "default"),
            dict(row.get("info") or {}),
            row.get("example_id", 0),
        )

    async def setup(self, state: State) -> State:
        """`setup_state`, run inside the episode's try: what it acquires before failing
        or being interrupted (a sandbox lease, say) is released by `cleanup_state`."""
        # Typed as any hook: an environment may override the async hook with a sync one.
        hook: Callable[..., Any] = self.env.setup_state
        prepared: State | None = await maybe_await(hook, state)
        return prepared if prepared is not None else state

    def run(self, runner: asyncio.Runner) -> int:
        env = self.env
        state = runner.run(self.start())
        try:
            state = runner.run(self.setup(state))
            self.show_messages(state["prompt"])
            self.show_tools()
            self.say(f"({HELP})")
            stop = runner.run(env.check_stop(state))
            while stop is None:
                turn = self.read_turn()
                if turn is None:
                    stop = "quit"
                    break
                env.record_model_turn(state, turn)
                new_messages, stop = runner.run(env.advance(state))
                self.show_messages(new_messages)
                self.show_board(state, new_messages)
            env.finish(state, stop)
            score = runner.run(
                env.rubric.score_rollout(
                    state["prompt"],
                    state["completion"],
                    state.get("answer", ""),
                    state,
                    task=state.get("task", "default"),
                    info=state.get("info", {}),
                    example_id=state.get("example_id", 0),
                )
            )
        finally:
            runner.run(_cleanup(env, state))
        self.say(f"Episode over ({stop}) after {state.get('turn', 0)} turn(s).")
        self.say(f"reward  {_score_text(score.reward)}")
        width = max((len(k) for k in score.metrics), default=0)
        for name, value in score.metrics.items():
            self.say(f"  {name.ljust(width)}  {_score_text(value)}")
        return 0


def _score_text(value: float) -> str:
    """Three decimals; `n/a` for NaN (a reward function that failed, as the log says),
    the way `vfgym eval`'s summary shows it."""
    return f"{value:.3f}" if math.isfinite(value) else "n/a"


def _encoding_name(encoding: str) -> str:
    """`utf_8` or `UTF8` as people write it: UTF-8."""
    try:
        return codecs.lookup(encoding).name.upper()
    except LookupError:
        return encoding


async def _cleanup(env: MultiTurnEnv, state: State) -> None:
    hook: Callable[..., Any] = env.cleanup_state  # sync in some environments (see `setup`)
    await maybe_await(hook, state)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def play(
    env_id: str,
    env_args: dict[str, Any] | None = None,
    *,
    example: int = 0,
    stdin: IO[str] | None = None,
    out: IO[str] | None = None,
) -> int:
    """Play one episode of `env_id` with turns read from `stdin`; returns the exit code."""
    stdin = stdin if stdin is not None else sys.stdin
    out = out if out is not None else sys.stdout
    info = describe_environment(env_id)
    if info is not None and info.needs_sandbox:
        check_docker(env_id)
    env = build_environment(env_id, dict(env_args or {}))
    if not isinstance(env, MultiTurnEnv):
        raise CommandError(
            f"{env_id} is a {type(env).__name__}, which runs its own rollout loop; "
            "`vfgym play` drives multi-turn environments (MultiTurnEnv and its subclasses)",
            EXIT_USAGE,
        )
    rows = env.get_eval_dataset()
    if not 0 <= example < len(rows):
        raise CommandError(
            f"-i/--example {example} is out of range: {env_id} has {len(rows)} evaluation "
            f"examples (0 to {len(rows) - 1})",
            EXIT_USAGE,
        )
    print(f"{env_id} · example {example}", file=out)
    session = PlaySession(env, rows[example], stdin, out)
    try:
        with asyncio.Runner() as runner:
            return session.run(runner)
    except KeyboardInterrupt:
        print("\nInterrupted; the episode was cleaned up.", file=out)
        return EXIT_INTERRUPTED


__all__ = ["HELP", "PlaySession", "play"]
