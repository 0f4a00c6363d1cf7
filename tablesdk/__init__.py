"""tablesdk: a Python client SDK for the Azure Table service.

Start with :class:`CloudStorageAccount` (``parse`` a connection string or use
``development_storage_account()``), get a :class:`CloudTableClient`, and use a
:class:`TableServiceContext` to track entities and save changes. See
docs/index.md for the concepts.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._version import __version__
from ._core._account import CloudStorageAccount
from ._unit_of_work._actions import TableBatchOperation, TableOperation, TableResult
from ._core._auth import (
    BearerTokenCredential,
    SasCredential,
    SharedKeyCredential,
    SharedKeyLiteCredential,
    TokenCredential,
    generate_account_sas,
    generate_table_sas,
)
from ._formats._batch import BatchOperation, BatchOperationKind, BatchOperationResult
from ._clients._client import CloudTableClient
from ._unit_of_work._context import TableServiceContext
from ._unit_of_work._merge import MergeOption
from ._unit_of_work._save_plan import SaveChangesOptions
from ._unit_of_work._tracking import EntityDescriptor, EntityStates
from ._unit_of_work._tracking_context import UnsavedChangesWarning
from ._core._cosmos import CosmosTimestampFilterWarning
from ._entities._edm import EdmDateTime, EdmType, EntityProperty, Int64
from ._entities._entity import DynamicEntity, TableEntity, allow_unfilterable_names
from ._entities._model_annotations import Flatten, StoredAs
from ._entities._models import AsJson, ByValue, Chunked, Converter, Encrypted, Json
from ._core._errors import (
    AuthenticationError,
    BatchError,
    ConflictError,
    ConnectionFailedError,
    ContinuationCycleError,
    PreconditionFailedError,
    RequestTimeoutError,
    ResourceNotFoundError,
    ResponseDecodeError,
    SchemaConflictError,
    ServerBusyError,
    TableErrorCode,
    TableServiceError,
    TableValidationError,
)
from ._entities._filter import col, prop
from ._pipeline._http import (
    AttemptState, HttpRequest, HttpResponse, MockSender, SendError, Sender, SendingRequest, Timeout,
)
from ._queries._continuation import ContinuationToken, ResultSegment
from ._queries._keys import datetime_from_reverse_ticks, fixed_width_key, reverse_ticks
from ._queries._parallel import find_partition_boundaries
from ._queries._query import EmptyResultError, TableQuery
from ._queries._watermark import ChangeWindow
from ._queries._watermark import Changes, Watermark, since_filter
from ._pipeline._retry import CosmosRetry, ExponentialRetry, LinearRetry, NoRetry, RetryPolicy, is_retryable, server_delay
from ._unit_of_work._table import CloudTable, TableContext
from ._unit_of_work._save_outcome import DataServiceRequestError, DataServiceResponse, OperationResponse
from ._pipeline._transport import OperationContext, ResponseReceived, RetryDecision
from ._pipeline._options import TableRequestOptions

if _TYPE_CHECKING:
    from ._bulk_loading._bulk import BulkInsertError, BulkResult, EntityOutcome
    from ._pipeline._requests_sender import RequestsSender
    from ._clients._service import AccessPolicy, AnalyticsLogging, CorsRule, Metrics, ServiceProperties, ServiceStats
    from ._columns._arrow_since import next_watermark
    from ._encryption import (
        PROTOCOL_AUTHENTICATED,
        PROTOCOL_LEGACY,
        EncryptedDataError,
        EncryptionKeyError,
        EncryptionRequiredError,
        KeyEncryptionKey,
        KeyResolver,
        KeyVaultKeyWrapper,
        LocalKeyWrapper,
        RsaKeyWrapper,
        TableEncryptionError,
        TableEncryptionPolicy,
        UnknownEncryptionProtocolError,
    )
else:
    #: Public names whose module loads when one of them is first named (or when a call needs
    #: it), not by ``import tablesdk`` (start-up): the default sender brings requests and
    #: urllib3; the bulk loader and the service-level settings are used by few programs.
    _LAZY = {
        "RequestsSender": "._pipeline._requests_sender",
        "BulkInsertError": "._bulk_loading._bulk", "BulkResult": "._bulk_loading._bulk", "EntityOutcome": "._bulk_loading._bulk",
        "AccessPolicy": "._clients._service", "AnalyticsLogging": "._clients._service", "CorsRule": "._clients._service",
        "Metrics": "._clients._service", "ServiceProperties": "._clients._service", "ServiceStats": "._clients._service",
        "next_watermark": "._columns._arrow_since",
        **dict.fromkeys((
            "TableEncryptionPolicy", "KeyEncryptionKey", "KeyResolver", "LocalKeyWrapper", "RsaKeyWrapper",
            "KeyVaultKeyWrapper", "PROTOCOL_LEGACY", "PROTOCOL_AUTHENTICATED", "TableEncryptionError",
            "EncryptionKeyError", "EncryptedDataError", "UnknownEncryptionProtocolError", "EncryptionRequiredError",
        ), "._encryption"),
    }

    def __getattr__(name: str) -> object:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(module, __name__), name)
        globals()[name] = value  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LAZY})

__all__ = [
    "__version__",
    "CloudStorageAccount",
    "CloudTableClient",
    "TableServiceContext",
    "CloudTable",
    "TableContext",
    "TableOperation",
    "TableBatchOperation",
    "TableResult",
    "UnsavedChangesWarning",
    "CosmosTimestampFilterWarning",
    "TableEntity",
    "DynamicEntity",
    "allow_unfilterable_names",
    "EntityProperty",
    "Converter",
    "StoredAs",
    "ByValue",
    "Chunked",
    "Encrypted",
    "Flatten",
    "Json",
    "AsJson",
    "EdmType",
    "EdmDateTime",
    "Int64",
    "MergeOption",
    "SaveChangesOptions",
    "EntityStates",
    "EntityDescriptor",
    "OperationResponse",
    "DataServiceResponse",
    "TableQuery",
    "Changes",
    "Watermark",
    "ChangeWindow",
    "since_filter",
    "next_watermark",
    "TableEncryptionPolicy",
    "KeyEncryptionKey",
    "KeyResolver",
    "LocalKeyWrapper",
    "RsaKeyWrapper",
    "KeyVaultKeyWrapper",
    "PROTOCOL_LEGACY",
    "PROTOCOL_AUTHENTICATED",
    "TableEncryptionError",
    "EncryptionKeyError",
    "EncryptedDataError",
    "UnknownEncryptionProtocolError",
    "EncryptionRequiredError",
    "ContinuationToken",
    "ResultSegment",
    "EmptyResultError",
    "prop",
    "col",
    "reverse_ticks",
    "datetime_from_reverse_ticks",
    "fixed_width_key",
    "find_partition_boundaries",
    "NoRetry",
    "LinearRetry",
    "ExponentialRetry",
    "CosmosRetry",
    "RetryPolicy",
    "is_retryable",
    "server_delay",
    "ResponseReceived",
    "RetryDecision",
    "OperationContext",
    "TableRequestOptions",
    "SendingRequest",
    "HttpRequest",
    "HttpResponse",
    "Sender",
    "RequestsSender",
    "MockSender",
    "SendError",
    "AttemptState",
    "Timeout",
    "BatchOperation",
    "BatchOperationKind",
    "BatchOperationResult",
    "BulkResult",
    "EntityOutcome",
    "BulkInsertError",
    "SharedKeyCredential",
    "SharedKeyLiteCredential",
    "SasCredential",
    "generate_table_sas",
    "generate_account_sas",
    "TokenCredential",
    "BearerTokenCredential",
    "AccessPolicy",
    "ServiceProperties",
    "AnalyticsLogging",
    "Metrics",
    "CorsRule",
    "ServiceStats",
    "TableServiceError",
    "TableErrorCode",
    "ResourceNotFoundError",
    "ConflictError",
    "PreconditionFailedError",
    "ServerBusyError",
    "AuthenticationError",
    "RequestTimeoutError",
    "ConnectionFailedError",
    "DataServiceRequestError",
    "BatchError",
    "TableValidationError",
    "SchemaConflictError",
    "ResponseDecodeError",
    "ContinuationCycleError",
]
