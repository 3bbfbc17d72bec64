"""Plain Python functions as OpenAI tools: schema from type hints and docstring.

A `Tool` keeps the function, its JSON schema and a validator built from the same
signature, so the schema the model sees and the checks its arguments get can
never disagree.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pydantic

from vfgym.types import ChatCompletionToolParam

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SECTION = re.compile(r"^\s*(Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$")


def tool_name(func: Callable[..., Any]) -> str:
    """The name a tool is called by: the function's `__name__`, or its class name."""
    return getattr(func, "__name__", None) or type(func).__name__


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into a summary and per-argument descriptions."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if _SECTION.match(line):
            in_args, current = False, None
            continue
        if in_args:
            match = _ARG_LINE.match(line)
            indent = len(line) - len(line.lstrip())
            if match and indent <= 4:
                current = match.group(1).lstrip("*")
                args[current] = match.group(3).strip()
            elif current and line.strip():
                args[current] = f"{args[current]} {line.strip()}".strip()
        elif not args and (line.strip() or summary):
            summary.append(line.strip())
    text = " ".join(part for part in summary if part)
    return text.strip(), args


# Schema keywords whose value maps names (parameters, definitions) to sub-schemas:
# a key "title" there is a name, not pydantic's title annotation.
_NAME_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
# Keywords whose value is data (a default argument, allowed values), kept verbatim.
_LITERALS = frozenset({"default", "enum", "const", "examples"})


def _strip_titles(schema: Any) -> Any:
    """Pydantic adds `title` everywhere; the model needs none of it."""
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _LITERALS:
            out[key] = value
        elif key in _NAME_MAPS and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


@dataclass
class Tool:
    """A callable offered to the model, with its schema and argument validator."""

    func: Callable[..., Any]
    name: str
    schema: ChatCompletionToolParam
    hidden_args: frozenset[str] = field(default_factory=frozenset)
    _validator: type[pydantic.BaseModel] | None = None
    # Parameter -> type, when every parameter is a plain str/int/float/bool: a call
    # that gives each exactly, with that exact type, is valid as it stands.
    _plain_types: dict[str, type] | None = None

    @classmethod
    def from_function(cls, func: Callable[..., Any], hidden_args: Iterable[str] = ()) -> Tool:
        """Build the tool; `hidden_args` are injected by the environment, not the model."""
        hidden = frozenset(hidden_args)
        name = tool_name(func)
        summary, arg_docs = parse_docstring(inspect.getdoc(func))
        signature = inspect.signature(func)
        try:
            hints = typing.get_type_hints(func)
        except Exception:
            hints = {}
        fields: dict[str, Any] = {}
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name in hidden:
                continue
            annotation = hints.get(param.name, Any)
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (
                annotation,
                pydantic.Field(default, description=arg_docs.get(param.name) or None),
            )
        unknown = hidden - set(signature.parameters)
        if unknown:
            raise ValueError(
                f"tool {name!r} has no parameter(s) {sorted(unknown)} to hide; "
                f"its parameters are {list(signature.parameters)}"
            )
        validator = pydantic.create_model(
            f"{name}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True),
            **fields,
        )
        parameters = _strip_titles(validator.model_json_schema())
        parameters.pop("additionalProperties", None)
        parameters.setdefault("properties", {})
        parameters.setdefault("required", [])
        schema: ChatCompletionToolParam = {
            "type": "function",
            "function": {
                "name": name,
                "description": summary or f"Call {name}.",
                "parameters": parameters,
            },
        }
        plain = {
            param: annotation
            for param, (annotation, _) in fields.items()
            if annotation in (str, int, float, bool)
        }
        return cls(
            func=func,
            name=name,
            schema=schema,
            hidden_args=hidden,
            _validator=validator,
            _plain_types=plain if len(plain) == len(fields) else None,
        )

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the model's arguments against the signature; ValueError says what is off."""
        plain = self._plain_types
        if plain is not None and len(arguments) == len(plain):
            # The common case, decided without pydantic: every parameter given, each
            # with exactly its annotated type (anything else is validated below).
            if all(type(arguments.get(k)) is t for k, t in plain.items()):
                return dict(arguments)
        assert self._validator is not None
        try:
            model = self._validator.model_validate(arguments)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ValueError(f"invalid arguments for {self.name}: {problems}") from None
        return dict(model.__dict__)  # the fields, by name (extra keys are forbidden)


def convert_func_to_oai_tool(func: Callable[..., Any]) -> ChatCompletionToolParam:
    """The OpenAI tool schema of a plain function (verifiers-compatible name)."""
    return Tool.from_function(func).schema
