"""Plain Python functions as OpenAI tools: schema from type hints and docstring.

A `Tool` keeps the function, its JSON schema and a validator built from the same
signature, so the schema the model sees and the checks its arguments get can
never disagree. This module builds both from the function; checking a call's
arguments beyond the validator, and explaining what is wrong, is in `arguments.py`,
and tool names in `names.py`.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

import pydantic

from vfgym.tools._docstrings import parse_docstring
from vfgym.tools.arguments import (
    MAX_INTEGER_DIGITS,
    all_finite,
    explain,
    is_strict_json,
    json_text_decoded,
    read_json_integer,
    refuse_booleans_as_numbers,
)
from vfgym.tools.names import NAME_SHOWN, check_tool_name, clip, json_kind, quote, tool_name
from vfgym.types import ChatCompletionToolParam

logger = logging.getLogger(__name__)

# Schema keywords whose value maps names (parameters, definitions) to sub-schemas:
# a key "title" there is a name, not pydantic's title annotation.
_NAME_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
# Keywords whose value is data (a default argument, allowed values), kept verbatim.
_LITERALS = frozenset({"default", "enum", "const", "examples"})


def _strip_titles(schema: Any) -> Any:
    """Pydantic adds `title` everywhere; the model needs none of it.

    A default JSON has no form for (infinity, NaN) goes too: the openai client
    refuses to send such a schema, so every request of every rollout would fail.
    The parameter stays optional; only the schema no longer shows its default.
    """
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "default" and not is_strict_json(value)):
            continue
        if key in _LITERALS:
            out[key] = value
        elif key in _NAME_MAPS and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


def _check_sendable(name: str, parameters: dict[str, Any]) -> None:
    """Refuse a schema the openai client cannot send (a bound such as `le=math.inf`)."""
    if not is_strict_json(parameters):
        raise ValueError(
            f"tool {name!r}: its JSON schema holds a number JSON cannot carry (infinity "
            "or NaN), so no request offering it could be sent; give its parameters "
            "finite bounds and values"
        )


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
    # No NaN nor infinity: JSON has no such numbers (1e400 reads as infinity, "nan" as
    # text would be read as NaN), and a tool computing with one answers nonsense.
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True, allow_inf_nan=False)
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
            + (_SANDBOX_HINT if "parameter 'sandbox' " in culprit else "")
        ) from None


#: What a tool's unsupported `sandbox` parameter most likely means.
_SANDBOX_HINT = (
    ". A tool whose `sandbox` parameter takes the rollout's sandbox belongs in a "
    "vf.SandboxEnv, which fills it in and hides it from the model"
)


def _unsupported_field(name: str, fields: dict[str, Any], config: pydantic.ConfigDict) -> str:
    """ "parameter 'x' (annotated T) " for the first field pydantic cannot handle, else ""."""
    for field_name, (annotation, info) in fields.items():
        try:
            probe: dict[str, Any] = {field_name: (annotation, info)}
            one = pydantic.create_model(f"{name}_probe", __config__=config, **probe)
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
    # The plain float parameters: their values must also be finite to pass as they stand.
    _plain_floats: tuple[str, ...] = ()
    # The parameters whose schema holds a number: only in them can a boolean become one.
    _numeric: frozenset[str] = frozenset()
    # The validator's field names -> the parameters' names (see `_arguments_model`).
    _params: dict[str, str] = field(default_factory=dict)
    # The offered parameters' defaults, to tell a model that sent null what to do.
    _defaults: dict[str, Any] = field(default_factory=dict)
    #: Positional-only parameters, in order: they cannot be passed by keyword.
    positional_only: tuple[str, ...] = ()

    @classmethod
    def from_function(cls, func: Callable[..., Any], hidden_args: Iterable[str] = ()) -> Tool:
        """Build the tool; `hidden_args` are injected by the environment, not the model."""
        hidden = frozenset(hidden_args)
        name = tool_name(func)
        described = _described(func)
        if inspect.isgeneratorfunction(described) or inspect.isasyncgenfunction(described):
            # Its call returns a generator, which the model would be sent as its text.
            raise TypeError(
                f"tool {name!r} is a generator function: a tool's result is what it "
                "returns, so return the value (a list, say) instead of yielding it"
            )
        summary, arg_docs = _docstring(func, described)
        signature = inspect.signature(func)
        unknown = hidden - set(signature.parameters)
        if unknown:
            raise ValueError(
                f"tool {name!r} has no parameter(s) {sorted(unknown)} to hide; "
                f"its parameters are {list(signature.parameters)}"
            )
        not_offered = hidden | _bound_keywords(func)
        hints = _type_hints(described)
        _warn_star_args(name, signature, hints, not_offered)
        offered = [
            param
            for param in signature.parameters.values()
            if param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
            and param.name not in not_offered
        ]
        _warn_undescribed(name, summary, [p.name for p in offered if p.name not in hints])
        fields = {
            f"arg{index}": _field(param, hints.get(param.name, Any), arg_docs.get(param.name))
            for index, param in enumerate(offered)
        }
        validator, raw_schema = _arguments_model(name, fields)
        parameters = _strip_titles(raw_schema)
        parameters.pop("additionalProperties", None)
        parameters.setdefault("properties", {})
        parameters.setdefault("required", [])
        _check_sendable(name, parameters)
        schema: ChatCompletionToolParam = {
            "type": "function",
            "function": {
                "name": name,
                "description": summary or f"Call {name}.",
                "parameters": parameters,
            },
        }
        plain = {
            info.alias: annotation for annotation, info in fields.values() if annotation in _PLAIN
        }
        return cls(
            func=func,
            name=name,
            schema=schema,
            hidden_args=hidden,
            _validator=validator,
            _plain_types=plain if len(plain) == len(fields) else None,
            _plain_floats=tuple(k for k, t in plain.items() if t is float),
            _numeric=_numeric_parameters(parameters),
            _params={key: info.alias for key, (_, info) in fields.items()},
            _defaults={p.name: p.default for p in offered if p.default is not p.empty},
            positional_only=tuple(
                p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_ONLY
            ),
        )

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the model's arguments against the signature; ValueError says what is off.

        An array or object sent as JSON text (`"[1, 2]"`) is read as that JSON: tool
        parsers that cannot tell a parameter's type from its schema (an `anyOf`, a
        `$ref`) send every value as a string.
        """
        plain = self._plain_types
        if plain is not None and len(arguments) == len(plain):
            # The common case, decided without pydantic: every parameter given, each
            # with exactly its annotated type (anything else is validated below).
            if all(type(arguments.get(k)) is t for k, t in plain.items()) and (
                not self._plain_floats or all_finite(arguments, self._plain_floats)
            ):
                return dict(arguments)
        assert self._validator is not None
        try:
            model = self._validator.model_validate(arguments)
        except pydantic.ValidationError as exc:
            decoded = json_text_decoded(arguments, exc.errors())
            if decoded is None:
                raise ValueError(self._explain(exc.errors())) from None
            try:
                model = self._validator.model_validate(decoded)
            except pydantic.ValidationError as again:
                raise ValueError(self._explain(again.errors())) from None
            arguments = decoded
        # The fields, by parameter name (extra keys are forbidden).
        values = {self._params[key]: value for key, value in model.__dict__.items()}
        if self._numeric:
            refuse_booleans_as_numbers(self.name, self._numeric, arguments, values)
        return values

    def _explain(self, errors: list[Any]) -> str:
        """The model's error message for pydantic's `errors` (see `arguments.explain`)."""
        return explain(self.name, self._params.values(), self._defaults, errors)

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


def _warn_star_args(
    name: str, signature: inspect.Signature, hints: dict[str, Any], hidden: frozenset[str]
) -> None:
    """Say that a `*args` parameter is not offered: a model sends named JSON arguments,
    so it could never fill one, and a tool whose input comes only through it would be
    offered to the model as one that takes nothing."""
    for param in signature.parameters.values():
        if param.kind is param.VAR_POSITIONAL and param.name not in hidden:
            item = hints.get(param.name)
            shown = getattr(item, "__name__", None) or ("Any" if item is None else repr(item))
            logger.warning(
                "tool %r takes *%s, which a model cannot fill (its arguments are named JSON "
                "values), so it is not offered; take a list instead, `%s: list[%s]`",
                name,
                param.name,
                param.name,
                shown,
            )


def _warn_undescribed(name: str, summary: str | None, untyped: list[str]) -> None:
    """Say once, when the tool is made, what the model will not be told: a parameter
    without a type hint gets no type in the schema (and is passed as sent, a "2" as
    text), and a tool without a docstring gets a placeholder description."""
    missing = []
    if untyped:
        missing.append(f"no type hint for {', '.join(untyped)} (passed as the model sends them)")
    if not summary:
        missing.append("no docstring (described only as its name)")
    if missing:
        logger.warning(
            "tool %r has %s: the model is told only what the schema says; add type hints "
            "and a docstring with an Args section",
            name,
            " and ".join(missing),
        )


def _bound_keywords(func: Callable[..., Any]) -> frozenset[str]:
    """The keywords a `functools.partial` fixes: the author's values (a client, a
    token), neither the model's to override nor to read in the schema."""
    names: set[str] = set()
    while isinstance(func, functools.partial):
        names.update(func.keywords)
        func = func.func
    return frozenset(names)


def _field(param: inspect.Parameter, annotation: Any, doc: str | None) -> tuple[Any, Any]:
    """The validator field of one offered parameter: (annotation, FieldInfo).

    A parameter that defaults to None takes None, whatever its annotation says
    (`limit: int = None`): the schema shows null as its default, so a model that
    sends null must not be refused.
    """
    default = ... if param.default is inspect.Parameter.empty else param.default
    description = doc or _annotated_text(annotation)
    if default is None and not _admits_none(annotation):
        annotation = typing.Optional[annotation]  # noqa: UP045 - any annotation, at runtime
    # A description only when there is one: `None` would override one given in the
    # annotation (`Annotated[int, Field(description=...)]`).
    if description:
        return annotation, pydantic.Field(default, alias=param.name, description=description)
    return annotation, pydantic.Field(default, alias=param.name)


#: The annotations whose values the fast path of `Tool.validate` checks by exact type.
_PLAIN = (str, int, float, bool)


def _numeric_parameters(schema: dict[str, Any]) -> frozenset[str]:
    """The parameters whose schema has an integer or a number anywhere (an `anyOf`
    member, an array's items) or refers to a definition, as its JSON text shows."""
    numeric = set()
    for name, sub in schema.get("properties", {}).items():
        text = json.dumps(sub)
        if '"integer"' in text or '"number"' in text or '"$ref"' in text:
            numeric.add(name)
    return frozenset(numeric)


def _annotated_text(annotation: Any) -> str | None:
    """The description an `Annotated[int, "How many."]` gives (a `Doc(...)` too),
    unless a pydantic Field there gives one."""
    if typing.get_origin(annotation) is not Annotated:
        return None
    metadata = annotation.__metadata__
    if any(getattr(m, "description", None) for m in metadata):
        return None  # pydantic puts the Field's own in the schema
    for meta in metadata:
        text = meta if isinstance(meta, str) else getattr(meta, "documentation", None)
        if isinstance(text, str) and text.strip():
            return text.strip()
    return None


def _admits_none(annotation: Any) -> bool:
    """Whether a parameter so annotated already takes None."""
    if annotation in (Any, None, type(None), object):
        return True
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _admits_none(typing.get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return any(_admits_none(arg) for arg in typing.get_args(annotation))
    if origin is Literal:
        return None in typing.get_args(annotation)
    return False


def convert_func_to_oai_tool(func: Callable[..., Any]) -> ChatCompletionToolParam:
    """The OpenAI tool schema of a plain function (verifiers-compatible name)."""
    return Tool.from_function(func).schema


__all__ = [
    "MAX_INTEGER_DIGITS",
    "NAME_SHOWN",
    "Tool",
    "check_tool_name",
    "clip",
    "convert_func_to_oai_tool",
    "json_kind",
    "parse_docstring",
    "quote",
    "read_json_integer",
    "tool_name",
]
