"""The errors the emulator answers with: status, error code and message.

Two body shapes exist, as on the service (and Azurite):

* **OData errors** from the table and entity handlers, written in the
  negotiated payload format (JSON ``odata.error`` or the Atom/XML ``<error>``
  of the data services metadata namespace);
* **storage errors** from the request pipeline before a handler runs
  (authentication, SAS, API version, payload format refused, unknown account):
  always the storage XML ``<Error><Code/><Message/></Error>``.

Every message gets the service's ``\\nRequestId:<id>\\nTime:<iso>`` trailer
when it is written, not here.
"""

from __future__ import annotations

__all__ = ["ServiceError", "PipelineError", "MESSAGES", "error", "pipeline_error"]


class ServiceError(Exception):
    """An OData-level error: written in the request's payload format.

    ``index`` is the zero-based operation index inside a batch change set; it
    is added to the message as the ``"N:"`` prefix when the error is written in
    a batch response.
    """

    def __init__(self, status: int, code: str, message: str, *, index: int | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.index = index
        self.extra_headers: dict[str, str] = {}


class PipelineError(ServiceError):
    """A storage-level error (auth, version, format): always the storage XML body."""

    def __init__(
        self, status: int, code: str, message: str, *, details: list[tuple[str, str]] | None = None
    ) -> None:
        super().__init__(status, code, message)
        self.details = details or []


#: status and message for each error code the emulator produces.
MESSAGES: dict[str, tuple[int, str]] = {
    # Table service codes
    "DuplicatePropertiesSpecified": (400, "A property is specified more than one time."),
    "EntityAlreadyExists": (409, "The specified entity already exists."),
    "EntityTooLarge": (400, "The entity is larger than the maximum allowed size (1MB)."),
    "InvalidDuplicateRow": (
        400,
        "A command with RowKey '{0}' is already present in the batch. "
        "An entity can appear only once in a batch.",
    ),
    "CommandsInBatchActOnDifferentPartitions": (
        400, "All commands in a batch must operate on same entity group.",
    ),
    "InvalidValueType": (400, "The value specified is invalid."),
    "JsonFormatNotSupported": (415, "JSON format is not supported."),
    "AtomFormatNotSupported": (415, "Atom format is not supported."),
    "MethodNotAllowed": (405, "The requested method is not allowed on the specified resource."),
    "NotImplemented": (501, "The requested operation is not implemented on the specified resource."),
    "OutOfRangeInput": (400, "The '{1}' parameter of value '{0}' is out of range."),
    "PropertiesNeedValue": (400, "The values are not specified for all properties in the entity."),
    "PropertyNameInvalid": (400, "The property name is invalid."),
    "PropertyNameTooLong": (400, "The property name exceeds the maximum allowed length."),
    "PropertyValueTooLarge": (
        400,
        "The property value exceeds the maximum allowed size (64KB). If the property value is a "
        "string, it is UTF-16 encoded and the maximum number of characters should be 32K or less.",
    ),
    "KeyValueTooLarge": (400, "The '{0}' value exceeds the maximum allowed size (1KB)."),
    "TableAlreadyExists": (409, "The table specified already exists."),
    "TableNotFound": (404, "The table specified does not exist."),
    "TooManyProperties": (400, "The entity contains more properties than allowed."),
    "UpdateConditionNotSatisfied": (412, "The update condition specified in the request was not satisfied."),
    "XMethodIncorrectCount": (400, "More than one X-HTTP-Method is specified."),
    "XMethodIncorrectValue": (400, "The specified X-HTTP-Method is invalid."),
    "XMethodNotUsingPost": (400, "The request uses X-HTTP-Method with an HTTP verb other than POST."),
    # Common storage codes
    "AuthenticationFailed": (
        403,
        "Server failed to authenticate the request. Make sure the value of the Authorization "
        "header is formed correctly including the signature.",
    ),
    "AuthorizationFailure": (403, "This request is not authorized to perform this operation."),
    "AuthorizationPermissionMismatch": (
        403, "This request is not authorized to perform this operation using this permission.",
    ),
    "AuthorizationResourceTypeMismatch": (
        403, "This request is not authorized to perform this operation using this resource type.",
    ),
    "AuthorizationServiceMismatch": (
        403, "This request is not authorized to perform this operation using this service.",
    ),
    "AuthorizationProtocolMismatch": (
        403, "This request is not authorized to perform this operation using this protocol.",
    ),
    "AuthorizationSourceIPMismatch": (
        403, "This request is not authorized to perform this operation using this source IP {0}.",
    ),
    "InsufficientAccountPermissions": (
        403, "The account being accessed does not have sufficient permissions to execute this operation.",
    ),
    "CorsPreflightFailure": (403, "CORS not enabled or no matching rule found for this request."),
    "InvalidHeaderValue": (400, "The value for one of the HTTP headers is not in the correct format."),
    "InvalidInput": (400, "One of the request inputs is not valid."),
    "InvalidQueryParameterValue": (
        400, "Value for one of the query parameters specified in the request URI is invalid.",
    ),
    "InvalidResourceName": (400, "The specifed resource name contains invalid characters."),
    "OutOfRangeQueryParameterValue": (
        400, "One of the query parameters specified in the request URI is outside the permissible range.",
    ),
    "InvalidUri": (400, "The requested URI does not represent any resource on the server."),
    "MissingRequiredHeader": (400, "An HTTP header that's mandatory for this request is not specified."),
    "RequestBodyTooLarge": (413, "The request body is too large and exceeds the maximum permissible limit."),
    "ResourceNotFound": (404, "The specified resource does not exist."),
    "UnsupportedHttpVerb": (405, "The resource doesn't support specified Http Verb."),
    "MediaTypeNotSupported": (415, "None of the provided media types are supported"),
    "InternalError": (500, "The server encountered an internal error. Please retry the request."),
}

#: Messages used with InvalidInput for particular causes.
INVALID_QUERY = "The query condition specified in the request is invalid."
INVALID_ETAG = (
    "The etag value '{0}' specified in one of the request headers is not valid. "
    "Please make sure only one etag value is specified and is valid."
)
TOO_MANY_CHANGES = "The batch request operation exceeds the maximum 100 changes per change set."
BAD_BODY = "An error occurred while processing this request."
NAME_LENGTH = "The specified resource name length is not within the permissible limits."
KEY_COUNT = "The number of keys specified in the URI does not match number of key properties for the resource."


def error(code: str, *args: object, message: str | None = None, status: int | None = None) -> ServiceError:
    """A :class:`ServiceError` for ``code`` with its standard status and message."""
    default_status, template = MESSAGES[code]
    text = message if message is not None else template.format(*args)
    return ServiceError(status or default_status, code, text)


def pipeline_error(
    code: str,
    *args: object,
    message: str | None = None,
    detail: str | None = None,
    details: list[tuple[str, str]] | None = None,
) -> PipelineError:
    """A :class:`PipelineError` (storage XML body) for ``code``.

    ``detail`` becomes an ``<AuthenticationErrorDetail>`` element; ``details``
    are further ``(element, text)`` pairs such as the bad header's name.
    """
    status, template = MESSAGES[code]
    text = message if message is not None else template.format(*args)
    extra = list(details or [])
    if detail:
        extra.append(("AuthenticationErrorDetail", detail))
    return PipelineError(status, code, text, details=extra)
