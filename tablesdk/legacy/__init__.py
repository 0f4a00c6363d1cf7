"""The ``azure-cosmosdb-table`` 1.0.6 surface on tablesdk: migrating is one import.

Replace ``from azure.cosmosdb.table import TableService, Entity`` (and the names of
``azure.cosmosdb.table.models``, ``azure.cosmosdb.table.common.models`` and ``azure.common``)
with ``from tablesdk.legacy import ...``: the calls take the same parameters and give the
same values, pages, markers and exceptions, and are sent by a tablesdk client
(``TableService.client``) with its retries, deadlines and tracing. The differences are
listed in docs/migrating.md. ``import tablesdk`` does not load this module.
"""

from ._batch import TableBatch
from ._errors import (
    AzureBatchOperationError,
    AzureBatchValidationError,
    AzureConflictHttpError,
    AzureException,
    AzureHttpError,
    AzureMissingResourceHttpError,
    AzureSigningError,
    AzureValidationError,
    ClientEncryptionNotAvailableError,
)
from ._models import (
    AccessPolicy,
    AccountPermissions,
    EdmType,
    Entity,
    EntityProperty,
    LocationMode,
    Protocol,
    ResourceTypes,
    Table,
    TablePayloadFormat,
    TablePermissions,
)
from ._properties import (
    CorsRule,
    GeoReplication,
    Logging,
    Metrics,
    RetentionPolicy,
    ServiceProperties,
    ServiceStats,
)
from ._retry import ExponentialRetry, LinearRetry, no_retry
from ._service import ListGenerator, TableService

__all__ = [
    "TableService", "TableBatch", "ListGenerator", "ExponentialRetry", "LinearRetry", "no_retry",
    "Entity", "EntityProperty", "EdmType", "Table", "TablePayloadFormat",
    "ServiceProperties", "Logging", "Metrics", "RetentionPolicy", "CorsRule", "ServiceStats", "GeoReplication",
    "AccessPolicy", "TablePermissions", "ResourceTypes", "AccountPermissions", "Protocol", "LocationMode",
    "AzureException", "AzureHttpError", "AzureConflictHttpError", "AzureMissingResourceHttpError",
    "AzureBatchOperationError", "AzureBatchValidationError", "AzureSigningError", "AzureValidationError",
    "ClientEncryptionNotAvailableError",
]
