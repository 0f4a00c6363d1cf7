"""Which payload format a request reads and answers in: ``Accept`` and ``$format``,
``Content-Type``, the ``Prefer`` header, and the format an error is written in.

The version decides what is allowed: JSON from 2013-08-15, no Atom from 2015-12-11.
"""

from __future__ import annotations

from ._errors import ServiceError, error, pipeline_error
from ._request import V_JSON, V_NO_ATOM, Call
from ._wire import ATOM, JSON_MINIMAL, Format

__all__ = ["negotiate", "soft_format", "body_format", "preference"]


def _media_format(text: str) -> Format | None:
    main, _, params = text.strip().partition(";")
    main = main.strip().lower()
    if main in ("application/json", "json"):
        level = "minimalmetadata"
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "odata":
                level = value.strip().lower()
        if level not in ("nometadata", "minimalmetadata", "fullmetadata"):
            raise pipeline_error("JsonFormatNotSupported")
        return Format("json", level)
    if main in ("application/atom+xml", "atom", "application/xml", "xml", "*/*", "application/*"):
        return ATOM
    return None


def _accept_format(accept: str) -> Format:
    if not accept.strip():
        return ATOM  # the documented default response type
    ranges: list[tuple[float, int, str]] = []
    for position, item in enumerate(accept.split(",")):
        media, *params = item.split(";")
        q = 1.0
        kept = []
        for param in params:
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            else:
                kept.append(param)
        if q > 0:
            ranges.append((-q, position, ";".join([media] + kept)))
    for _, _, media in sorted(ranges):
        found = _media_format(media)
        if found is not None:
            return found
    return ATOM


def negotiate(headers: dict[str, str], query: dict[str, str], version: str) -> Format:
    """The response format for the request (PipelineError 415 when the version refuses it)."""
    if "$format" in query:
        fmt = _media_format(query["$format"])
        if fmt is None:
            raise error("InvalidQueryParameterValue")
    else:
        fmt = _accept_format(headers.get("accept", ""))
    if fmt.is_json and version < V_JSON:
        raise pipeline_error("JsonFormatNotSupported")
    if not fmt.is_json and version >= V_NO_ATOM:
        raise pipeline_error("AtomFormatNotSupported")
    return fmt


def soft_format(headers: dict[str, str], query: dict[str, str], version: str) -> Format:
    """The format to write an error in: the negotiated one, else what the version allows."""
    try:
        return negotiate(headers, query, version)
    except ServiceError:
        return JSON_MINIMAL if version >= V_JSON else ATOM


def body_format(headers: dict[str, str], version: str) -> str:
    """``"json"`` or ``"atom"`` from the request's Content-Type."""
    ctype = headers.get("content-type", "").split(";")[0].strip().lower()
    if not ctype:
        raise error("MissingRequiredHeader")
    if ctype == "application/json":
        if version < V_JSON:
            raise pipeline_error("JsonFormatNotSupported")
        return "json"
    if ctype in ("application/atom+xml", "application/xml"):
        if version >= V_NO_ATOM:
            raise pipeline_error("AtomFormatNotSupported")
        return "atom"
    raise error("MediaTypeNotSupported")



def preference(call: Call) -> str | None:
    """The ``Prefer`` header's wish about echoing the entity, when the version knows the header."""
    if call.version < V_JSON:
        return None
    value = call.header("prefer").strip().lower()
    return value if value in ("return-no-content", "return-content") else None
