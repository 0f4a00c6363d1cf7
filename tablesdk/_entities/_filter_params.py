"""Raw ``$filter`` text with parameters: ``"Age gt @age and Name eq @name"`` and their values.

Each ``@name`` outside the text's quoted literals is replaced by its value's literal,
rendered by the code that renders ``prop("Age") > value``
(:func:`~tablesdk._entities._filter.typed_literal`), so a value is typed and escaped
exactly as the typed builder types and escapes it: a quote in a string is doubled,
an ``int`` is Edm.Int32 (Edm.Int64 when it does not fit), a ``datetime`` keeps its
seven fractional digits, an :class:`~tablesdk._entities._edm.EntityProperty` gives its
own EDM type. A parameter compared with a property of a known type (PartitionKey,
RowKey, Timestamp, or a declared property of the query's entity class) is converted
to that type as the builder converts it, or refused.

The text is read as a filter before anything is bound, so a value can never change
its structure: ``Name eq @name`` with ``name = "x' or true or Name eq 'y"`` compares
``Name`` with that whole string. ``'@name'`` inside quotes is text, not a parameter.
A parameter used without a value, or a value no ``@name`` uses, is refused: both are
typos that would otherwise change what the query matches.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._core._errors import TableValidationError
from ._edm import EdmType
from ._filter import prop, typed_literal
from ._filter_text import FILTER_KEYWORDS, filter_name_problem, parameter_uses

__all__ = ["bind_parameters", "refuse_parameters_without_filter"]


def _check_names(parameters: Mapping[str, object]) -> None:
    if not isinstance(parameters, Mapping):
        raise TypeError(f"parameters is a mapping of names to values, not {type(parameters).__name__}")
    for key in parameters:
        if not isinstance(key, str):
            raise TypeError(f"parameter names are str, not {type(key).__name__} ({key!r})")
        if key.startswith("@"):
            raise TableValidationError(
                key, "name a parameter without its '@'", f"{key} in the text is {{{key[1:]!r}: ...}} in parameters"
            )
        problem = filter_name_problem(key)
        if problem is not None and key not in FILTER_KEYWORDS:  # the text reads @and as a parameter too
            raise TableValidationError(key, "a parameter name is an identifier (letters, digits, '_')", problem)


def bind_parameters(
    text: str, parameters: Mapping[str, object], declared: Mapping[str, EdmType] | None = None
) -> str:
    """``text`` with each ``@name`` replaced by the literal of ``parameters[name]``.

    ``declared`` maps property names to their declared EDM types (a query's entity class):
    a parameter compared with such a property is converted to its type. Raises
    :class:`TableValidationError` for text that is no filter (with the position), a
    parameter without a value or a value without a parameter (naming it, as ``@name``),
    and a value that cannot be compared with its property (naming both).
    """
    if not isinstance(text, str):
        raise TypeError(f"parameters go with raw $filter text (a str), not {type(text).__name__}")
    _check_names(parameters)
    uses = parameter_uses(text)
    used = {use.name for use in uses}
    for use in uses:
        if use.name not in parameters:
            given = ", ".join(sorted(parameters)) or "none"
            raise TableValidationError(
                f"@{use.name}", "the filter names this parameter and parameters gives it no value",
                f"position {use.position}; parameters given: {given}",
            )
    for name in parameters:
        if name not in used:
            raise TableValidationError(
                f"@{name}", "parameters gives a value that the filter text never uses",
                _unused_hint(text, name),
            )
    parts: list[str] = []
    index = 0
    for use in uses:
        parts.append(text[index:use.position])
        parts.append(_literal(use.name, parameters[use.name], use.property_name, declared))
        index = use.end
    parts.append(text[index:])
    return "".join(parts)


def refuse_parameters_without_filter(parameters: Mapping[str, object]) -> None:
    """Raise :class:`TableValidationError` naming a value of ``parameters`` when there is one: with
    no filter text, no ``@name`` uses it (a filter left out by mistake would match every entity)."""
    _check_names(parameters)
    for name in parameters:
        raise TableValidationError(
            f"@{name}", "parameters gives a value and there is no filter to use it",
            "pass the filter text whose @name it binds",
        )


def _literal(name: str, value: object, property_name: str | None, declared: Mapping[str, EdmType] | None) -> str:
    """The literal of parameter ``name``'s value, typed as a comparison with its property renders it."""
    if property_name is None:
        label, edm_type = f"@{name}", None
    else:
        label, edm_type = property_name, prop(property_name, (declared or {}).get(property_name))._effective_type()
    try:
        return typed_literal(label, value, edm_type)[2]
    except TableValidationError as exc:
        if property_name is None:
            raise
        raise TableValidationError(f"@{name}", f"compared with {exc}") from None


def _unused_hint(text: str, name: str) -> str:
    if f"@{name}" in text:
        return f"@{name} appears only inside a quoted literal, where it is text"
    return f"a parameter is '@' then its name, outside quotes: @{name}"
