"""Azure Cosmos DB for Table: recognising its endpoints, and where it differs from Azure Storage.

Cosmos DB's Table API speaks the Table service's REST protocol, with differences that
Microsoft documents ("Azure Cosmos DB for Table" FAQ, "Where is API for Table not identical
with Azure Table storage behavior?"; the API for Table query tutorial). A client decides once,
from its account (:func:`is_cosmos_endpoint`, or the account's explicit ``cosmos=``), whether
it talks to Cosmos DB, and then:

* refuses the Atom payload format when it is made (the API for Table speaks JSON only);
* checks the keys, property names and batch size of what it writes against Cosmos DB's
  own limits before sending (:func:`check_cosmos_keys`, :func:`check_cosmos_property_names`,
  :data:`COSMOS_MAX_BATCH_BYTES`), each error naming the field and the limit;
* refuses the Storage-only service calls (service properties and statistics, table ACLs)
  before sending (:func:`cosmos_unsupported`);
* warns when a query filters on ``Timestamp`` (:func:`filter_names_timestamp`,
  :class:`CosmosTimestampFilterWarning`): the API for Table answers such a query with no
  entities rather than an error;
* asks Entra ID for tokens of the audience ``https://cosmos.azure.com`` unless told otherwise
  (:func:`cosmos_credential`).

Nothing here resolves or contacts a host: recognising an endpoint reads its text only.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from ._auth import STORAGE_SCOPE, BearerTokenCredential, TableCredential, with_token_audience
from ._errors import TableValidationError

__all__ = [
    "COSMOS_AUDIENCE",
    "COSMOS_HOST_SUFFIXES",
    "COSMOS_EMULATOR_KEY",
    "COSMOS_EMULATOR_PORT",
    "COSMOS_MAX_ROW_KEY_BYTES",
    "COSMOS_MAX_BATCH_BYTES",
    "COSMOS_RESERVED_PROPERTY_NAMES",
    "CosmosTimestampFilterWarning",
    "is_cosmos_endpoint",
    "check_cosmos_keys",
    "check_cosmos_property_names",
    "check_cosmos_write",
    "check_cosmos_batch_size",
    "cosmos_unsupported",
    "COSMOS_UNSUPPORTED",
    "filter_names_timestamp",
    "timestamp_filter_message",
    "cosmos_since_refused",
    "cosmos_credential",
    "client_credential",
]

#: The Entra ID audience of Cosmos DB data-plane tokens (the scope is ``<audience>/.default``).
COSMOS_AUDIENCE = "https://cosmos.azure.com"

#: Host name endings of Cosmos DB table endpoints: ``<account>.table.cosmos.azure.com`` (what
#: the portal gives today) and ``<account>.table.cosmosdb.azure.com`` (the connection string
#: the API for Table FAQ shows). Any other host (a custom domain, a sovereign cloud) is
#: Cosmos DB when the account says so (``cosmos=True``).
COSMOS_HOST_SUFFIXES = (".table.cosmos.azure.com", ".table.cosmosdb.azure.com")

#: The Cosmos DB emulator's well-known account key (public, documented; not a secret): an
#: account that signs with it is talking to the emulator, whatever its port.
COSMOS_EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
#: The Cosmos DB emulator's documented gateway port, on the loopback host.
COSMOS_EMULATOR_PORT = 8081
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

#: RowKey values are at most 255 bytes in Cosmos DB (Azure Storage allows 1 KiB). Measured
#: in UTF-8, the encoding of Cosmos DB's JSON documents.
COSMOS_MAX_ROW_KEY_BYTES = 255
#: A batch (``$batch`` body) is at most 2 MB in Cosmos DB (Azure Storage allows 4 MiB); read
#: as 2,000,000 bytes, the smaller of the two meanings of "MB".
COSMOS_MAX_BATCH_BYTES = 2_000_000
#: Property names Cosmos DB keeps for itself (the FAQ lists ``Id``, ``rid``, ``etag`` and
#: ``ResourceId``; an older version of it lists ``ID``): compared without regard to case.
COSMOS_RESERVED_PROPERTY_NAMES = frozenset({"id", "rid", "etag", "resourceid"})


class CosmosTimestampFilterWarning(UserWarning):
    """A query sent to Cosmos DB's Table API filters on ``Timestamp``.

    The API for Table keeps an entity's Timestamp as a number of seconds (its ``_ts``) and
    blocks filters on it: such a query answers no entities, without an error. Store the
    time in a property of your own (an ``Edm.DateTime`` or ``Edm.Int64``) and filter on that.
    """


def is_cosmos_endpoint(endpoint: str, account_key: str | None = None) -> bool:
    """Whether ``endpoint`` (a table endpoint URL) is Cosmos DB's Table API.

    True for hosts ending in one of :data:`COSMOS_HOST_SUFFIXES`, for the Cosmos DB emulator on
    the loopback host at :data:`COSMOS_EMULATOR_PORT`, and for any endpoint whose account key is
    :data:`COSMOS_EMULATOR_KEY`. Only the URL's text is read (no name is resolved).
    """
    if account_key is not None and account_key == COSMOS_EMULATOR_KEY:
        return True
    try:
        parts = urlsplit(endpoint)
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port
    except ValueError:
        return False
    if any(host.endswith(suffix) for suffix in COSMOS_HOST_SUFFIXES):
        return True
    return host in _LOOPBACK_HOSTS and port == COSMOS_EMULATOR_PORT


def check_cosmos_keys(partition_key: str, row_key: str) -> None:
    """Refuse a RowKey longer than Cosmos DB allows (the PartitionKey limit, 1 KB, is Storage's,
    checked with every key). Keys are checked against the common rules first, elsewhere."""
    size = len(row_key.encode("utf-8", "surrogatepass"))
    if size > COSMOS_MAX_ROW_KEY_BYTES:
        raise TableValidationError(
            "RowKey", f"Cosmos DB's Table API takes RowKey values of at most {COSMOS_MAX_ROW_KEY_BYTES} bytes",
            f"got {size} bytes in UTF-8",
        )


def check_cosmos_property_names(names: Iterable[str]) -> None:
    """Refuse a property name Cosmos DB reserves (:data:`COSMOS_RESERVED_PROPERTY_NAMES`)."""
    for name in names:
        if name.lower() in COSMOS_RESERVED_PROPERTY_NAMES:
            raise TableValidationError(
                name, "Cosmos DB's Table API reserves the property names Id, rid, etag and ResourceId "
                "(in any case): rename the property",
            )


def check_cosmos_write(partition_key: str, row_key: str, property_names: Iterable[str]) -> None:
    """Cosmos DB's own limits on one write: its RowKey and its property names."""
    check_cosmos_keys(partition_key, row_key)
    check_cosmos_property_names(property_names)


def check_cosmos_batch_size(size: int) -> None:
    """Refuse a ``$batch`` body larger than Cosmos DB takes."""
    if size > COSMOS_MAX_BATCH_BYTES:
        raise TableValidationError(
            "batch", f"Cosmos DB's Table API takes batches of at most 2 MB ({COSMOS_MAX_BATCH_BYTES} bytes)",
            f"this batch is {size} bytes: send fewer or smaller entities per batch",
        )


_NO_ACL = (
    "Cosmos DB sets and manages the stored access policies of shared access signatures its own way "
    "(in the Azure portal or its management API), not with the Table service's table ACL"
)
_NO_PROPERTIES = (
    "Cosmos DB does not support CORS, and configures analytics and logging its own way "
    "(Azure Monitor), not with the Table service's properties"
)
#: The Table service calls Cosmos DB does not serve (its API for Table FAQ), and why.
COSMOS_UNSUPPORTED = {
    "get_table_acl": _NO_ACL,
    "set_table_acl": _NO_ACL,
    "get_service_properties": _NO_PROPERTIES,
    "set_service_properties": _NO_PROPERTIES,
    "get_service_stats": "replication is part of every write in Cosmos DB, so it keeps no replication statistics",
}


def cosmos_unsupported(operation: str) -> NotImplementedError:
    """The error of a Storage-only call (one of :data:`COSMOS_UNSUPPORTED`) made to Cosmos DB,
    raised before anything is sent."""
    return NotImplementedError(
        f"{operation} is not supported by Cosmos DB's Table API: {COSMOS_UNSUPPORTED[operation]}"
    )


def filter_names_timestamp(filter_text: str) -> bool:
    """Whether an OData ``$filter`` names the ``Timestamp`` property (outside string literals)."""
    if "Timestamp" not in filter_text:
        return False
    index, length = 0, len(filter_text)
    while index < length:
        char = filter_text[index]
        if char == "'":  # a string literal: '' is an escaped quote inside it
            index += 1
            while index < length:
                if filter_text[index] == "'":
                    if index + 1 < length and filter_text[index + 1] == "'":
                        index += 2
                        continue
                    break
                index += 1
            index += 1
            continue
        if char.isalnum() or char == "_":
            start = index
            while index < length and (filter_text[index].isalnum() or filter_text[index] == "_"):
                index += 1
            if filter_text[start:index] == "Timestamp":
                return True
            continue
        index += 1
    return False


def timestamp_filter_message(filter_text: str) -> str:
    """The warning a Timestamp filter sent to Cosmos DB gets (the filter is not secret)."""
    shown = filter_text if len(filter_text) <= 200 else filter_text[:200] + "..."
    return (
        f"the filter {shown!r} compares Timestamp, and Cosmos DB's Table API answers such filters "
        "with no entities (it keeps Timestamp to the second and blocks queries on it): filter on a "
        "date-time property your application writes instead (see docs/cosmos.md)"
    )


def cosmos_since_refused(field: str = "since") -> TableValidationError:
    """The error of an incremental read (``since=``, a ``Watermark`` or ``ChangeWindow``) asked of
    Cosmos DB, raised before anything is sent: such a read filters on ``Timestamp``, which the API
    for Table answers with no entities. ``field``: the argument or option that asked for it."""
    return TableValidationError(
        field,
        "incremental reads (since=, Watermark, ChangeWindow) filter on Timestamp, which Cosmos DB's Table API "
        "does not serve (it answers such filters with no entities, without an error): write the time in a "
        "property of your own on every write and filter on that (see docs/cosmos.md)",
    )


def cosmos_credential(credential: TableCredential | None) -> TableCredential | None:
    """An Entra ID credential left at Azure Storage's scope asks for Cosmos DB's instead;
    any other credential is returned as it is."""
    if isinstance(credential, BearerTokenCredential) and credential.scope == STORAGE_SCOPE:
        return credential.with_audience(COSMOS_AUDIENCE)
    return credential


def client_credential(credential: TableCredential | None, token_audience: str | None, cosmos: bool) -> TableCredential | None:
    """The credential a client signs with: the account's, asking for tokens of ``token_audience``
    when given, else of Cosmos DB's audience for a Cosmos DB account."""
    if token_audience is None and cosmos:
        return cosmos_credential(credential)
    return with_token_audience(credential, token_audience)
