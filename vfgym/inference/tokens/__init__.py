"""Token-exact mode: a rollout's sequence kept as the ids the model really saw.

See `caller.py` for the approach and the server subset it needs, `render.py` for
the chat-template rendering and `tool_parsers.py` for reading tool calls from text.
"""

from vfgym.inference.tokens.caller import TokenExactCaller, completion_sampling_args
from vfgym.inference.tokens.mode import TOKEN_MODES, TokenMode, checked_token_mode
from vfgym.inference.tokens.render import (
    LocalRenderer,
    ServerRenderer,
    with_parsed_arguments,
)
from vfgym.inference.tokens.samples import exact_samples
from vfgym.inference.tokens.tool_parsers import TOOL_PARSERS, parse_hermes

__all__ = [
    "TOKEN_MODES",
    "TOOL_PARSERS",
    "LocalRenderer",
    "ServerRenderer",
    "TokenExactCaller",
    "TokenMode",
    "checked_token_mode",
    "completion_sampling_args",
    "exact_samples",
    "parse_hermes",
    "with_parsed_arguments",
]
