"""An OpenAI-compatible model server of the project's own, for tests, benchmarks and demos.

`ModelServer` serves a policy (a plain function standing in for a model) over
real HTTP on loopback; `ByteTokenizer` is the deterministic byte-level tokenizer
it counts and returns tokens with; `policies` has ready-made policies.
"""

from vfgym.errors import UnknownModelError
from vfgym.inference.server import policies
from vfgym.inference.server.faults import FAULT_KINDS, Fault, FaultMix, parse_fault_mix
from vfgym.inference.server.policy import Policy, PolicySpec
from vfgym.inference.server.server import ModelServer
from vfgym.inference.server.tokenizer import ByteTokenizer, assistant_text, render_tool_calls

__all__ = [
    "FAULT_KINDS",
    "ByteTokenizer",
    "Fault",
    "FaultMix",
    "ModelServer",
    "Policy",
    "PolicySpec",
    "UnknownModelError",
    "assistant_text",
    "parse_fault_mix",
    "policies",
    "render_tool_calls",
]
