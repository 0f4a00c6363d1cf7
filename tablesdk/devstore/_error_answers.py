"""The answers that carry an error: the service's storage error (XML, before the request
reaches an operation), the OData error of an operation (JSON or Atom, in the request's
format), and the HTTP.sys page for a URL it refuses before the service sees it."""

from __future__ import annotations

from ._errors import PipelineError, ServiceError
from ._request import Response
from ._values import utc_now_text
from ._wire import Format, odata_error_json, odata_error_xml, storage_error_xml

__all__ = ["invalid_url_response", "pipeline_error_response", "error_response"]


def invalid_url_response() -> Response:
    """What HTTP.sys answers, before the service sees it, for a path segment over 260 characters."""
    body = (
        '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN""http://www.w3.org/TR/html4/strict.dtd">\r\n'
        '<HTML><HEAD><TITLE>Bad Request</TITLE>\r\n'
        '<META HTTP-EQUIV="Content-Type" Content="text/html; charset=us-ascii"></HEAD>\r\n'
        "<BODY><h2>Bad Request - Invalid URL</h2>\r\n<hr><p>HTTP Error 400. The request URL is invalid.</p>\r\n"
        "</BODY></HTML>\r\n"
    ).encode("ascii")
    return Response(400, [("Content-Type", "text/html; charset=us-ascii"), ("Server", "Microsoft-HTTPAPI/2.0")],
                    body)


def _trailer(request_id: str) -> str:
    return f"\nRequestId:{request_id}\nTime:{utc_now_text()}"


def pipeline_error_response(exc: PipelineError, request_id: str) -> Response:
    """A failure outside any operation, as the storage front end writes it (XML, whatever the format)."""
    body = storage_error_xml(exc.code, exc.message + _trailer(request_id), exc.details)
    headers = [("Content-Type", "application/xml"), ("x-ms-error-code", exc.code)]
    return Response(exc.status, headers, body)


def error_response(exc: ServiceError, fmt: Format, request_id: str, prefix: str = "") -> Response:
    """An operation's failure in ``fmt``; ``prefix`` is a change set's ``<index>:``."""
    message = prefix + exc.message + _trailer(request_id)
    if fmt.is_json:
        body = odata_error_json(exc.code, message)
    else:
        body = odata_error_xml(exc.code, message)
    headers = [
        ("Content-Type", fmt.error_content_type),
        ("x-ms-error-code", exc.code),
        ("X-Content-Type-Options", "nosniff"),
        ("DataServiceVersion", "3.0;" if fmt.is_json else "1.0;"),
    ]
    headers.extend(exc.extra_headers.items())
    return Response(exc.status, headers, body)
