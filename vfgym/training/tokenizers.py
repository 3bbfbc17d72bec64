"""Tokenizers for training data: the protocol processing needs, and the server's `/tokenize`.

Split from `processing.py`: a Hugging Face tokenizer already fits `Tokenizer`;
`ServerTokenizer` makes a vLLM (or vfgym) server's `/tokenize` endpoint fit it,
so training data can be built without the model's tokenizer installed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Protocol, runtime_checkable

from vfgym.errors import ServerTokenizerError


@runtime_checkable
class Tokenizer(Protocol):
    """What processing needs of a tokenizer (Hugging Face's surface)."""

    def apply_chat_template(self, conversation: Any, tools: Any = None, **kwargs: Any) -> Any: ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


#: What to do when the server cannot tokenize, said by every `ServerTokenizerError`.
_LOCAL_TOKENIZER = (
    "vLLM and vfgym's server answer /tokenize (OpenAI's API does not); otherwise pass "
    "the model's Hugging Face tokenizer as processing_class instead"
)


class ServerTokenizer:
    """Tokenize with the model server's own `/tokenize` endpoint (vLLM, vfgym's server).

    Use it when the trainer has no local copy of the model's tokenizer: the server
    applies the exact chat template it serves with.
    """

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 30.0
    ):
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.model = model
        self.timeout = timeout
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    def close(self) -> None:
        """Nothing to release: each call is one short HTTP request."""

    def __enter__(self) -> ServerTokenizer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _tokenize(self, body: dict[str, Any]) -> list[int]:
        url = f"{self.root}/tokenize"
        data = json.dumps({"model": self.model, **body}).encode()
        request = urllib.request.Request(url, data=data, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace")
            missing = " (the server has no such endpoint)" if exc.code in (404, 405) else ""
            raise ServerTokenizerError(
                f"{url} answered HTTP {exc.code}{missing}: {detail}; {_LOCAL_TOKENIZER}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerTokenizerError(
                f"could not reach {url} ({reason}); check that the model server is running "
                f"there and answers within {self.timeout:g} s (ServerTokenizer(timeout=...)); "
                f"{_LOCAL_TOKENIZER}"
            ) from None
        return _token_list(url, raw)

    def apply_chat_template(
        self,
        conversation: Any,
        tools: Any = None,
        *,
        add_generation_prompt: bool = False,
        tokenize: bool = True,
        **_: Any,
    ) -> list[int]:
        if not tokenize:
            raise ValueError("ServerTokenizer only returns token ids (tokenize=True)")
        body: dict[str, Any] = {
            "messages": list(conversation),
            "add_generation_prompt": add_generation_prompt,
            "add_special_tokens": False,
        }
        if tools:
            body["tools"] = tools
        return self._tokenize(body)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._tokenize({"prompt": text, "add_special_tokens": add_special_tokens})


def _token_list(url: str, raw: bytes) -> list[int]:
    """The ids of a `/tokenize` answer (`{"tokens": [...], ...}`, as vLLM sends)."""
    try:
        tokens = json.loads(raw)["tokens"]
        return [int(t) for t in tokens]
    except (ValueError, TypeError, KeyError):
        detail = raw[:200].decode("utf-8", "replace")
        raise ServerTokenizerError(
            f"{url} answered with no token ids (a 'tokens' list of integers was expected): "
            f"{detail}; {_LOCAL_TOKENIZER}"
        ) from None
