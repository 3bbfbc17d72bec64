"""`PolicyServer`: the trainer's own model behind the slice of vLLM's HTTP API vfgym uses.

vfgym's multi-turn loop talks to a model through an OpenAI-compatible server. To train
on-policy without vLLM (on a CPU, in tests), this server answers with the live
`transformers` model the trainer is updating, so each rollout comes from the weights
of the current step. It speaks what token-level training needs, as vLLM does:

- ``POST /v1/chat/completions``: chat messages (and tools) rendered with the
  tokenizer's chat template; ``return_token_ids`` adds ``prompt_token_ids`` and each
  choice's ``token_ids``; ``logprobs`` gives each sampled token's logprob; hermes-style
  ``<tool_call>{json}</tool_call>`` blocks become ``tool_calls`` when tools were sent.
- ``POST /v1/completions``: a text prompt or a list of token ids (the token-exact way
  to continue a conversation), with the same ``return_token_ids`` and legacy logprobs.
- ``POST /tokenize`` (``prompt`` or ``messages``), ``POST /detokenize``, ``GET /v1/models``.

The sampled ids are returned as sampled, never re-encoded from text; the end-of-turn
id is part of them when the model sampled it. Streaming, ``n`` > 1 and stop strings are
refused with a 400 that says so (a stop string would cut ids the model sampled).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
import uuid
from typing import Any

from aiohttp import web

from vfgym.inference.server.background import serve_in_thread, stop_thread
from vfgym.integrations.trl.sampling import ModelSampler, Sample, SamplingSettings
from vfgym.training.alignment import chat_ids

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class _BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param = param
        self.status = status


def _error(exc: _BadRequest) -> web.Response:
    body = {"error": {"message": str(exc), "type": "BadRequestError", "param": exc.param,
                      "code": exc.status}}  # fmt: skip
    return web.json_response(body, status=exc.status)


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Split hermes-style tool calls off `text`: (the content before them, the calls).

    As vLLM's hermes parser does, a reply whose calls do not all parse as JSON objects
    with a "name" stays plain content with no calls.
    """
    blocks = _TOOL_CALL.findall(text)
    if not blocks:
        return text, []
    calls = []
    for block in blocks:
        try:
            parsed = json.loads(block)
        except json.JSONDecodeError:
            return text, []
        if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
            return text, []
        arguments = parsed.get("arguments", {})
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {
                    "name": parsed["name"],
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments, ensure_ascii=False),
                },
            }
        )
    content = text[: text.index("<tool_call>")].strip()
    return content or None, calls


class PolicyServer:
    """Serves `model` (a live `transformers` causal LM) with `tokenizer` on loopback.

    Runs on a background thread with its own event loop (`with PolicyServer(...) as s`),
    so a synchronous trainer can call into it between steps. Requests are answered one
    generation at a time; the model is read, never changed, and no gradients are kept.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_name: str = "policy",
        max_model_len: int | None = None,
        seed: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.host = host
        self.max_model_len = int(
            max_model_len or getattr(model.config, "max_position_embeddings", 0) or 4096
        )
        stop_ids = _stop_ids(model, tokenizer)
        self.sampler = ModelSampler(model, stop_ids, seed=seed)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        #: every generation request body, in arrival order (tests read what was asked)
        self.requests: list[dict[str, Any]] = []

    # -- lifecycle ---------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``http://host:port/v1``); the server must be running."""
        if self._port is None:
            raise RuntimeError("the policy server is not running; start it with `with server:`")
        return f"http://{self.host}:{self._port}/v1"

    def start(self) -> PolicyServer:
        """Listen on a free loopback port from a background thread; returns once listening."""
        if self._thread is not None:
            raise RuntimeError("this policy server is already running")
        self._thread, self._loop = serve_in_thread(
            self._start_site, self._stop_site, "vfgym-policy-server"
        )
        return self

    async def _start_site(self) -> None:
        runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        try:
            sock.bind((self.host, 0))
            site = web.SockSite(runner, sock)
            await site.start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = sock.getsockname()[1]

    async def _stop_site(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def stop(self) -> None:
        """Stop serving and wait for the thread (idempotent)."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        self._thread = self._loop = None
        stop_thread(thread, loop)
        self._port = None

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- routes --------------------------------------------------------------------

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)

        def route(handler: Any, generation: bool) -> Any:
            async def wrapped(request: web.Request) -> web.StreamResponse:
                try:
                    body = await request.json()
                except (json.JSONDecodeError, UnicodeDecodeError):
                    return _error(_BadRequest("the request body must be a JSON object"))
                if not isinstance(body, dict):
                    return _error(_BadRequest("the request body must be a JSON object"))
                if generation:
                    self.requests.append(body)
                try:
                    result = handler(body)
                    if asyncio.iscoroutine(result):
                        result = await result
                except _BadRequest as exc:
                    return _error(exc)
                return web.json_response(result)

            return wrapped

        async def models(request: web.Request) -> web.StreamResponse:
            card = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "vfgym",
                    "root": self.model_name, "max_model_len": self.max_model_len}  # fmt: skip
            return web.json_response({"object": "list", "data": [card]})

        app.router.add_post("/v1/chat/completions", route(self._chat, True))
        app.router.add_post("/v1/completions", route(self._completions, True))
        app.router.add_post("/tokenize", route(self._tokenize, False))
        app.router.add_post("/detokenize", route(self._detokenize, False))
        app.router.add_get("/v1/models", models)
        return app

    # -- shared checks ---------------------------------------------------------------

    def _settings(self, body: dict[str, Any], prompt_len: int, default_max: int | None) -> Any:
        for unsupported in ("stream", "echo", "suffix"):
            if body.get(unsupported):
                raise _BadRequest(f"{unsupported!r} is not supported by the policy server; "
                                  f"leave it out", unsupported)  # fmt: skip
        if body.get("stop"):
            raise _BadRequest(
                "stop strings are not supported by the policy server: a stop string would cut "
                "ids the model sampled; end turns with the model's end-of-turn token instead",
                "stop",
            )
        if (body.get("n") or 1) != 1:
            raise _BadRequest("'n' must be 1 here; send one request per sample", "n")
        room = self.max_model_len - prompt_len
        if room <= 0:
            raise _BadRequest(
                f"This model's maximum context length is {self.max_model_len} tokens; the "
                f"prompt has {prompt_len}. Please reduce the length of the messages or prompt.",
                "messages",
            )
        requested = body.get("max_completion_tokens") or body.get("max_tokens") or default_max
        max_tokens = room if requested is None else min(int(requested), room)
        temperature = body.get("temperature")
        top_p = body.get("top_p")
        return SamplingSettings(
            max_tokens=max(1, max_tokens),
            temperature=1.0 if temperature is None else float(temperature),
            top_p=1.0 if top_p is None else float(top_p),
        )

    async def _run(self, prompt_ids: list[int], settings: SamplingSettings) -> Sample:
        return await asyncio.to_thread(self.sampler.sample, prompt_ids, settings)

    def _decode(self, ids: list[int]) -> str:
        text_ids = ids[:-1] if ids and ids[-1] in self.sampler.stop_ids else ids
        return str(self.tokenizer.decode(text_ids, skip_special_tokens=False))

    def _head(self, kind: str, prompt_len: int, sample: Sample) -> dict[str, Any]:
        return {
            "id": f"{kind}-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": self.model_name,
            "usage": {
                "prompt_tokens": prompt_len,
                "completion_tokens": len(sample.token_ids),
                "total_tokens": prompt_len + len(sample.token_ids),
            },
        }

    # -- endpoints -------------------------------------------------------------------

    async def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("'messages' must be a non-empty list of message dicts", "messages")
        tools = body.get("tools") or None
        try:
            prompt_ids = chat_ids(self.tokenizer, messages, tools, True)
        except Exception as exc:  # a template error names what it could not render
            raise _BadRequest(f"cannot apply the chat template: {exc}", "messages") from None
        sample = await self._run(prompt_ids, self._settings(body, len(prompt_ids), None))
        text = self._decode(sample.token_ids)
        content: str | None = text
        calls: list[dict[str, Any]] = []
        if tools and body.get("tool_choice") != "none":
            content, calls = parse_tool_calls(text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        finish = sample.finish_reason
        if calls:
            message["tool_calls"] = calls
            finish = "tool_calls" if finish == "stop" else finish
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish,
                                  "logprobs": None}  # fmt: skip
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": f"token_id:{tid}", "logprob": lp, "bytes": None, "top_logprobs": []}
                    for tid, lp in zip(sample.token_ids, sample.logprobs, strict=True)
                ],
                "refusal": None,
            }
        response = {**self._head("chatcmpl", len(prompt_ids), sample),
                    "object": "chat.completion", "choices": [choice]}  # fmt: skip
        if body.get("return_token_ids"):
            choice["token_ids"] = sample.token_ids
            response["prompt_token_ids"] = prompt_ids
        return response

    async def _completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list | str):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            prompt_ids = list(self.tokenizer.encode(prompt, add_special_tokens=True))
        elif (
            isinstance(prompt, list)
            and prompt
            and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
        ):
            prompt_ids = list(prompt)
        else:
            raise _BadRequest("'prompt' must be a string or one list of token ids", "prompt")
        sample = await self._run(prompt_ids, self._settings(body, len(prompt_ids), 16))
        text = self._decode(sample.token_ids)
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": sample.finish_reason,
                                  "logprobs": None}  # fmt: skip
        if body.get("logprobs") is not None:
            tokens = [f"token_id:{tid}" for tid in sample.token_ids]
            choice["logprobs"] = {
                "tokens": tokens,
                "token_logprobs": list(sample.logprobs),
                "top_logprobs": [{t: lp} for t, lp in zip(tokens, sample.logprobs, strict=True)],
                "text_offset": [0] * len(tokens),
            }
        if body.get("return_token_ids"):
            choice["token_ids"] = sample.token_ids
            choice["prompt_token_ids"] = prompt_ids
        return {**self._head("cmpl", len(prompt_ids), sample), "object": "text_completion",
                "choices": [choice]}  # fmt: skip

    def _tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        if "messages" in body:
            if not isinstance(body["messages"], list):
                raise _BadRequest("'messages' must be a list of message dicts", "messages")
            generation = bool(body.get("add_generation_prompt", True))
            try:
                ids = chat_ids(self.tokenizer, body["messages"], body.get("tools"), generation)
            except Exception as exc:
                raise _BadRequest(f"cannot apply the chat template: {exc}", "messages") from None
        elif isinstance(body.get("prompt"), str):
            special = bool(body.get("add_special_tokens", True))
            ids = list(self.tokenizer.encode(body["prompt"], add_special_tokens=special))
        else:
            raise _BadRequest("send either 'prompt' (a string) or 'messages' (a list)", "prompt")
        return {"count": len(ids), "max_model_len": self.max_model_len, "tokens": ids,
                "token_strs": None}  # fmt: skip

    def _detokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise _BadRequest("'tokens' must be a list of integer token ids", "tokens")
        return {"prompt": self.tokenizer.decode(tokens)}


def _stop_ids(model: Any, tokenizer: Any) -> list[int]:
    """The ids that end a turn: the tokenizer's eos and the model's generation eos ids."""
    found: list[int] = []
    config = getattr(model, "generation_config", None)
    for value in (getattr(tokenizer, "eos_token_id", None), getattr(config, "eos_token_id", None)):
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, int) and item not in found:
                found.append(item)
    return found
