"""``--param`` of the commands that take ``--filter``: values for the filter's ``@name`` parameters.

``--param NAME=VALUE`` gives ``@NAME`` a value; the library binds it
(:func:`~tablesdk._entities._filter_params.bind_parameters`), so it is escaped and typed as
``prop(...) == value`` renders it, and a value can never change the filter's structure.
A command line has only text, so the type of VALUE is read so:

* ``NAME@Edm.Type=VALUE`` says it: VALUE is in the form a typed CSV cell holds
  (``big@Edm.Int64=5``, ``when@Edm.DateTime=2024-05-01T00:00:00Z``, ``id@Edm.Guid=...``,
  ``data@Edm.Binary=<base64>``, ``code@Edm.String=007``);
* without a type, a parameter compared with PartitionKey or RowKey is a string, with
  Timestamp a DateTime; any other is an Edm.Int32 when VALUE is an integer (Edm.Int64
  when too large), an Edm.Double when it is a decimal number (``1.5``, ``2e3``), an
  Edm.Boolean for ``true`` or ``false``, and an Edm.String otherwise (as the untyped
  values of a JSON entity are typed).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from .._entities._edm import EdmType, EntityProperty, from_atom_text
from .._entities._filter_params import bind_parameters, refuse_parameters_without_filter
from .._entities._filter_text import parameter_uses

__all__ = ["PARAM_HELP", "bind_cli_parameters", "filter_options", "typed_value"]

PARAM_HELP = (
    "A value for @NAME in --filter (repeatable). NAME=VALUE: an integer is Int32, a decimal number Double, "
    "true/false Boolean, other text (and keys) String; NAME@Edm.Type=VALUE gives the type."
)

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")
#: The types of the system properties, which an untyped value compared with them takes.
_SYSTEM = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "Timestamp": EdmType.DATETIME}

F = TypeVar("F", bound=Callable[..., Any])


def typed_value(name: str, type_name: str | None, text: str, compared_with: set[str | None]) -> object:
    """The value of ``--param name[@type_name]=text``, for a parameter compared with ``compared_with``."""
    edm_type: EdmType | None
    if type_name is not None:
        try:
            edm_type = EdmType(type_name)
        except ValueError:
            known = ", ".join(t.value for t in EdmType)
            raise click.BadParameter(f"{name}@{type_name}: unknown type (use one of {known})",
                                     param_hint="--param") from None
    else:
        system = {_SYSTEM.get(property_name or "") for property_name in compared_with}
        edm_type = system.pop() if len(system) == 1 and None not in system else None
    if edm_type is None:
        return _inferred(text)
    try:
        return EntityProperty(from_atom_text(text, edm_type), edm_type)
    except ValueError as exc:
        raise click.BadParameter(f"{name}: {text!r} is not an {edm_type.value} ({exc})", param_hint="--param") from None


def _inferred(text: str) -> object:
    if _INTEGER.match(text):
        return int(text)
    if _DECIMAL.match(text):
        return float(text)
    if text in ("true", "false"):
        return text == "true"
    return text


def bind_cli_parameters(filter_text: str | None, params: Sequence[str]) -> str | None:
    """``filter_text`` with the values of ``params`` (each ``NAME[@Edm.Type]=VALUE``) bound."""
    if not params:
        return filter_text
    parsed: dict[str, tuple[str | None, str]] = {}
    for param in params:
        head, equals, text = param.partition("=")
        name, at, type_name = head.partition("@")
        if not equals or not name:
            raise click.BadParameter(f"{param!r}: write NAME=VALUE or NAME@Edm.Type=VALUE", param_hint="--param")
        if name in parsed:
            raise click.BadParameter(f"{name} is given twice", param_hint="--param")
        parsed[name] = (type_name if at else None, text)
    if filter_text is None:
        refuse_parameters_without_filter(dict.fromkeys(parsed))
        return None
    compared: dict[str, set[str | None]] = {}
    for use in parameter_uses(filter_text):
        compared.setdefault(use.name, set()).add(use.property_name)
    values = {
        name: typed_value(name, type_name, text, compared.get(name, set()))
        for name, (type_name, text) in parsed.items()
    }
    return bind_parameters(filter_text, values)


def filter_options(help: str, required: bool = False) -> Callable[[F], F]:
    """``--filter`` and ``--param`` for a command whose function takes ``filter_``: the function
    gets the filter with its parameters bound."""
    def decorate(command: F) -> F:
        @functools.wraps(command)
        def run(*args: Any, params: tuple[str, ...], **kwargs: Any) -> Any:
            kwargs["filter_"] = bind_cli_parameters(kwargs["filter_"], params)
            return command(*args, **kwargs)

        run = click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help=PARAM_HELP)(run)
        run = click.option("--filter", "filter_", required=required, metavar="ODATA", help=help)(run)
        return run  # type: ignore[return-value]

    return decorate
