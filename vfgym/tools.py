"""Plain Python functions as OpenAI tools: schema from type hints and docstring.

A `Tool` keeps the function, its JSON schema and a validator built from the same
signature, so the schema the model sees and the checks its arguments get can
never disagree.
"""

from __future__ import annotations

import functools
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


#: The function names OpenAI's API accepts (other OpenAI-compatible servers follow it).
_VALID_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: How many characters of a name (of a tool, of an argument) a message or record keeps.
NAME_SHOWN = 64


def tool_name(func: Callable[..., Any]) -> str:
    """The name a tool is called by: the function's `__name__`; for a `functools.partial`
    without one, the name of the function it wraps; else its class name.

    The same rule as `ToolRubric`'s names, so its counts find the calls recorded.
    """
    name = getattr(func, "__name__", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(func, functools.partial):
        return tool_name(func.func)
    return type(func).__name__


def check_tool_name(name: str) -> None:
    """Refuse a name an OpenAI-compatible server would refuse, while it is easy to fix.

    Left to the server, a bad name (a lambda's "<lambda>", a name with spaces) fails
    every request of every rollout with a 400 that names neither tool nor function.
    """
    if not _VALID_NAME.fullmatch(name):
        raise ValueError(
            f"tool name {clip(name)!r} is not one an OpenAI-compatible server accepts: "
            "use 1 to 64 letters, digits, '_' or '-'. Offer a function made with `def` "
            "(not a lambda), or set the callable's __name__"
        )


def clip(text: str, limit: int = NAME_SHOWN) -> str:
    """`text` as it is, or when longer than `limit` its start and its length.

    A model can send a name (of a tool, of an argument) of any length; echoed whole,
    it would go back into the model's context and into every record of the rollout.
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def quote(text: str, limit: int = NAME_SHOWN) -> str:
    """`repr(text)`, or when longer than `limit` the repr of its start and its length."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit] + '…'!r} ({len(text)} characters)"


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


def _described(func: Callable[..., Any]) -> Callable[..., Any]:
    """The callable whose docstring and annotations describe `func`'s parameters: the
    function a `functools.partial` wraps, the `__call__` of a callable object."""
    while isinstance(func, functools.partial):
        func = func.func
    if inspect.isroutine(func) or inspect.isclass(func):
        return func
    call = getattr(func, "__call__", None)  # noqa: B004 - callable objects are meant here
    return call if inspect.isroutine(call) else func


def _docstring(
    func: Callable[..., Any], described: Callable[..., Any]
) -> tuple[str, dict[str, str]]:
    """Summary and argument descriptions: a callable object's own (class) docstring
    first, then its `__call__`'s; a partial's are those of the function it wraps."""
    own = None if isinstance(func, functools.partial) else inspect.getdoc(func)
    summary, args = parse_docstring(own)
    if described is not func:
        call_summary, call_args = parse_docstring(inspect.getdoc(described))
        summary, args = summary or call_summary, {**call_args, **args}
    return summary, args


def _type_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """`func`'s resolved annotations (`Annotated` metadata kept: a Field's constraints).

    One annotation that cannot be resolved (a name imported only for type checkers)
    costs that parameter its type, not every parameter theirs.
    """
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception:
        pass
    annotations = getattr(func, "__annotations__", None)
    globalns = getattr(func, "__globals__", None)
    hints: dict[str, Any] = {}
    for name, annotation in (annotations or {}).items():
        try:
            hints.update(_resolved(name, annotation, globalns))
        except Exception:
            continue
    return hints


def _resolved(name: str, annotation: Any, globalns: dict[str, Any] | None) -> dict[str, Any]:
    """One annotation resolved as `typing.get_type_hints` would."""

    def holder() -> None: ...

    holder.__annotations__ = {name: annotation}
    return typing.get_type_hints(holder, globalns=globalns, include_extras=True)


#: The errors pydantic raises for a type it cannot validate or describe as JSON schema.
_SCHEMA_ERRORS = (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError)


def _arguments_model(
    name: str, fields: dict[str, Any]
) -> tuple[type[pydantic.BaseModel], dict[str, Any]]:
    """The validator of a tool's arguments, and its JSON schema.

    Fields get neutral names (`arg0`, `arg1` ...) with the parameters' names as
    aliases: a parameter may be called anything, `model_config`, `json` or `_private`
    included, which pydantic would refuse, drop or warn about as field names.
    """
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    try:
        model = pydantic.create_model(f"{name}_arguments", __config__=config, **fields)
        return model, model.model_json_schema()
    except _SCHEMA_ERRORS as exc:
        culprit = _unsupported_field(name, fields, config)
        raise ValueError(
            f"tool {name!r}: {culprit}cannot be checked and described as JSON schema "
            f"({str(exc).splitlines()[0]}); annotate it with a JSON type (str, int, float, "
            "bool, list[...], dict[str, ...], Literal[...], a pydantic model), or hide it "
            "from the model (StatefulToolEnv's args_to_skip)"
        ) from None


def _unsupported_field(name: str, fields: dict[str, Any], config: pydantic.ConfigDict) -> str:
    """ "parameter 'x' (annotated T) " for the first field pydantic cannot handle, else ""."""
    for field_name, (annotation, info) in fields.items():
        try:
            one = pydantic.create_model(
                f"{name}_probe", __config__=config, **{field_name: (annotation, info)}
            )
            one.model_json_schema()
        except _SCHEMA_ERRORS:
            shown = getattr(annotation, "__name__", None) or repr(annotation)
            return f"parameter {info.alias!r} (annotated {shown}) "
    return ""


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
    # The validator's field names -> the parameters' names (see `_arguments_model`).
    _params: dict[str, str] = field(default_factory=dict)
    #: Positional-only parameters, in order: they cannot be passed by keyword.
    positional_only: tuple[str, ...] = ()

    @classmethod
    def from_function(cls, func: Callable[..., Any], hidden_args: Iterable[str] = ()) -> Tool:
        """Build the tool; `hidden_args` are injected by the environment, not the model."""
        hidden = frozenset(hidden_args)
        name = tool_name(func)
        described = _described(func)
        summary, arg_docs = _docstring(func, described)
        signature = inspect.signature(func)
        hints = _type_hints(described)
        fields: dict[str, Any] = {}
        annotations: dict[str, Any] = {}
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name in hidden:
                continue
            annotation = hints.get(param.name, Any)
            default = ... if param.default is inspect.Parameter.empty else param.default
            annotations[param.name] = annotation
            # A description only when the docstring has one: `None` would override
            # one given in the annotation (`Annotated[int, Field(description=...)]`).
            described_by = {"description": arg_docs[param.name]} if arg_docs.get(param.name) else {}
            fields[f"arg{len(fields)}"] = (
                annotation,
                pydantic.Field(default, alias=param.name, **described_by),
            )
        unknown = hidden - set(signature.parameters)
        if unknown:
            raise ValueError(
                f"tool {name!r} has no parameter(s) {sorted(unknown)} to hide; "
                f"its parameters are {list(signature.parameters)}"
            )
        validator, raw_schema = _arguments_model(name, fields)
        parameters = _strip_titles(raw_schema)
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
            for param, annotation in annotations.items()
            if annotation in (str, int, float, bool)
        }
        return cls(
            func=func,
            name=name,
            schema=schema,
            hidden_args=hidden,
            _validator=validator,
            _plain_types=plain if len(plain) == len(fields) else None,
            _params={key: info.alias for key, (_, info) in fields.items()},
            positional_only=tuple(
                p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_ONLY
            ),
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
                f"{'.'.join(clip(str(p)) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ValueError(f"invalid arguments for {self.name}: {problems}") from None
        # The fields, by parameter name (extra keys are forbidden).
        return {self._params[key]: value for key, value in model.__dict__.items()}

    def call_arguments(self, arguments: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """(positional, keyword) arguments that call `func` with `arguments` (by name):
        positional-only parameters must be passed by position."""
        if not self.positional_only:
            return [], arguments
        keywords = dict(arguments)
        positional = []
        for name in self.positional_only:
            if name not in keywords:
                break  # the call fails with Python's own message for a missing argument
            positional.append(keywords.pop(name))
        return positional, keywords


def convert_func_to_oai_tool(func: Callable[..., Any]) -> ChatCompletionToolParam:
    """The OpenAI tool schema of a plain function (verifiers-compatible name)."""
    return Tool.from_function(func).schema
