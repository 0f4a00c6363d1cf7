"""``TableService``: the ``azure-cosmosdb-table`` 1.0.6 calls, sent by a tablesdk client.

Every call runs on a :class:`~tablesdk.CloudTableClient` (its retries, deadlines, tracing and
signing); this module only translates arguments, entities, results and errors.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from .. import (
    CloudStorageAccount, CloudTableClient, ContinuationToken, NoRetry, SasCredential, SharedKeyCredential,
    TableRequestOptions, generate_account_sas, generate_table_sas,
)
from .. import AccessPolicy as SdkAccessPolicy
from .._core._account import DEVSTORE_ACCOUNT_KEY, DEVSTORE_ACCOUNT_NAME, DEVSTORE_TABLE_PORT
from .._entities._edm_base import parse_datetime
from .._core._tracing import trace_public_methods
from ._batch import TableBatch
from ._convert import PropertyResolver, utc_seconds, check_entity, to_legacy_entity, to_sdk_entity
from ._retry import _Retry, no_retry
from ._properties import (
    CorsRule, Logging, Metrics, ServiceProperties, ServiceStats, from_sdk_properties, from_sdk_stats,
    to_sdk_properties,
)
from ._encryption import DEFAULT_ENCRYPTION_PROTOCOL, EntityReader, check_write, chosen_properties, encrypt_entity, read_columns
from ._errors import AzureException, AzureSigningError, legacy_errors
from ._models import AccessPolicy, Entity, ResourceTypes, AccountPermissions, Table, TablePayloadFormat, TablePermissions

T = TypeVar("T")

SERVICE_HOST_BASE = "core.windows.net"
DEFAULT_PROTOCOL = "https"
DEV_TABLE_HOST = f"127.0.0.1:{DEVSTORE_TABLE_PORT}"
_MISSING_INFO = (
    "You need to provide an account name and either an account_key or sas_token when creating a storage service."
)
_METADATA = {
    TablePayloadFormat.JSON_NO_METADATA: "nometadata",
    TablePayloadFormat.JSON_MINIMAL_METADATA: "minimalmetadata",
    TablePayloadFormat.JSON_FULL_METADATA: "fullmetadata",
}


def _require(name: str, value: object) -> None:
    if value is None:
        raise ValueError(f"{name} should not be None.")


def _options(timeout: int | None) -> TableRequestOptions | None:
    return None if timeout is None else TableRequestOptions(server_timeout=timeout)


class ListGenerator(Generic[T]):
    """The results of :meth:`TableService.list_tables` or :meth:`TableService.query_entities`.

    The first page is read by the call itself; iterating follows the service's continuation
    lazily until ``num_results`` items have been given. ``next_marker`` is then where the next
    page starts (a dict for entities, a table name for tables; empty or None at the end): pass
    it as ``marker`` to a new call to go on.
    """

    def __init__(
        self, first: tuple[list[T], Any], fetch: Callable[[Any, int | None], tuple[list[T], Any]],
        num_results: int | None,
    ) -> None:
        self.items, self.next_marker = first
        self._fetch = fetch
        self._num_results = num_results

    def __iter__(self) -> Iterator[T]:
        yield from self.items
        while self.next_marker:
            remaining = self._num_results
            if remaining is not None:
                remaining -= len(self.items)
                if remaining <= 0:
                    return
                self._num_results = remaining
            self.items, self.next_marker = self._fetch(self.next_marker, remaining)
            yield from self.items


class TableService:
    """The Table service as ``azure.cosmosdb.table.TableService`` 1.0.6 offers it.

    Give an account name with ``account_key`` (or ``sas_token``), a ``connection_string``, or
    ``is_emulated=True`` (the emulator's well-known account at ``127.0.0.1:10002``).
    ``endpoint_suffix`` and ``protocol`` build ``{protocol}://{account}.table.{endpoint_suffix}``.
    ``request_session`` is accepted and not used (tablesdk's sender is). Keyword arguments
    after those are tablesdk client options (``retry_policy``, ``operation_deadline``,
    ``sender``...); :attr:`client` is the :class:`~tablesdk.CloudTableClient` that sends.

    ``key_encryption_key``, ``key_resolver_function``, ``encryption_resolver_function`` and
    ``require_encryption`` are the old client-side encryption settings, with the old rules (see
    :mod:`tablesdk.legacy._encryption`). ``encryption_protocol`` is what new encrypted writes use:
    ``"1.0"`` (the default, the format the old package and the other legacy clients read) or
    :data:`tablesdk.PROTOCOL_AUTHENTICATED` (AES-GCM, read by tablesdk only); both are read.
    """

    def __init__(
        self, account_name: str | None = None, account_key: str | None = None, sas_token: str | None = None,
        is_emulated: bool = False, protocol: str = DEFAULT_PROTOCOL, endpoint_suffix: str = SERVICE_HOST_BASE,
        request_session: Any = None, connection_string: str | None = None, socket_timeout: Any = None,
        **client_options: Any,
    ) -> None:
        if connection_string:
            self._from_connection_string(connection_string)
        elif is_emulated:
            self._settings(is_emulated=True)
        elif account_name:
            self._settings(account_name, account_key, sas_token, protocol=protocol, endpoint_suffix=endpoint_suffix)
        else:
            raise ValueError(_MISSING_INFO)
        account = self.account_name or _name_from(self.primary_endpoint)
        if self.account_key:
            try:
                credential: Any = SharedKeyCredential(account, self.account_key)
            except ValueError as error:  # the old package failed the same way at its first request
                raise AzureSigningError(str(error)) from error
        elif self.sas_token:
            credential = SasCredential(self.sas_token)
        else:
            raise ValueError(_MISSING_INFO)
        self.request_session = request_session
        self.socket_timeout = socket_timeout
        if socket_timeout is not None:
            client_options.setdefault("timeout", socket_timeout)
        self._account = CloudStorageAccount(
            account, f"{self.protocol}://{self.primary_endpoint}",
            credential, use_development_storage=self.is_emulated,
        )
        self._client_options = client_options
        self._clients: dict[str, CloudTableClient] = {}
        self._clients_lock = threading.Lock()
        self._retry: Any = None
        self.require_encryption = False
        self.key_encryption_key: Any = None
        self.key_resolver_function: Callable[[str], Any] | None = None
        self.encryption_resolver_function: Callable[[str, str, str], bool] | None = None
        self.encryption_protocol: str = DEFAULT_ENCRYPTION_PROTOCOL

    # ------------------------------------------------------------ construction

    def _settings(
        self, account_name: str | None = None, account_key: str | None = None, sas_token: str | None = None,
        *, is_emulated: bool = False, protocol: str | None = DEFAULT_PROTOCOL, endpoint_suffix: str | None = None,
        custom_domain: str | None = None, custom_domain_secondary: str | None = None,
    ) -> None:
        self.account_name = account_name
        self.account_key = account_key
        self.sas_token = sas_token
        self.protocol = protocol or DEFAULT_PROTOCOL
        self.is_emulated = bool(is_emulated)
        if is_emulated:
            self.account_name = DEVSTORE_ACCOUNT_NAME
            self.protocol = "http"
            self.account_key = DEVSTORE_ACCOUNT_KEY if not sas_token else None
            endpoint = custom_domain if custom_domain is not None else DEV_TABLE_HOST
            self.primary_endpoint = f"{endpoint}/{DEVSTORE_ACCOUNT_NAME}"
            self.secondary_endpoint: str | None = f"{endpoint}/{DEVSTORE_ACCOUNT_NAME}-secondary"
            return
        if self.account_key:
            self.account_key = self.account_key.strip()
        suffix = endpoint_suffix or SERVICE_HOST_BASE
        if custom_domain:
            parts = urlsplit(custom_domain)
            self.primary_endpoint = parts.netloc + parts.path.rstrip("/")
            self.protocol = parts.scheme or self.protocol
        elif not account_name:
            raise ValueError(_MISSING_INFO)
        else:
            self.primary_endpoint = f"{account_name}.table.{suffix}"
        if custom_domain_secondary:
            parts = urlsplit(custom_domain_secondary)
            self.secondary_endpoint = parts.netloc + parts.path.rstrip("/")
        elif account_name:
            self.secondary_endpoint = f"{account_name}-secondary.table.{suffix}"
        else:
            self.secondary_endpoint = None

    def _from_connection_string(self, connection_string: str) -> None:
        config = dict(part.split("=", 1) for part in connection_string.split(";") if part)
        self._settings(
            config.get("AccountName"), config.get("AccountKey"), config.get("SharedAccessSignature"),
            is_emulated=bool(config.get("UseDevelopmentStorage")), protocol=config.get("DefaultEndpointsProtocol"),
            endpoint_suffix=config.get("EndpointSuffix"), custom_domain=config.get("TableEndpoint"),
            custom_domain_secondary=config.get("TableSecondaryEndpoint"),
        )

    @property
    def retry(self) -> Any:
        """The retry policy: what was assigned (``ExponentialRetry(...).retry``, ``LinearRetry(...).retry``,
        ``no_retry`` or a tablesdk :class:`~tablesdk.RetryPolicy`), else the client's tablesdk policy."""
        return self._retry if self._retry is not None else self.client.retry_policy

    @retry.setter
    def retry(self, value: Any) -> None:
        if value is no_retry:
            policy: Any = NoRetry()
        elif isinstance(getattr(value, "__self__", None), _Retry):
            policy = value.__self__
        elif callable(getattr(value, "retry_after", None)):
            policy = value
        else:
            raise TypeError(
                "TableService.retry takes ExponentialRetry(...).retry, LinearRetry(...).retry, no_retry or a "
                f"tablesdk RetryPolicy; a function of the old package's retry context cannot be called here "
                f"(got {type(value).__name__})"
            )
        with self._clients_lock:
            self._retry = value
            self._client_options["retry_policy"] = policy
            for client in self._clients.values():
                client.retry_policy = policy

    @property
    def client(self) -> CloudTableClient:
        """The tablesdk client that sends this service's calls (JSON, minimal metadata)."""
        return self._client_for(TablePayloadFormat.JSON_MINIMAL_METADATA)

    def _client_for(self, accept: str) -> CloudTableClient:
        _require("accept", accept)
        metadata = _METADATA.get(accept)
        if metadata is None:
            raise ValueError(f"accept must be one of the TablePayloadFormat values, not {accept!r}")
        with self._clients_lock:  # one client (and connection pool) per metadata level, also across threads
            client = self._clients.get(metadata)
            if client is None:
                client = self._account.create_cloud_table_client(json_metadata=metadata, **self._client_options)
                self._clients[metadata] = client
        return client

    def close(self) -> None:
        """Close the connections of the clients this service opened."""
        with self._clients_lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            client.close()

    # ------------------------------------------------------------ shared access signatures

    def _require_key(self) -> tuple[str, str]:
        _require("self.account_name", self.account_name)
        _require("self.account_key", self.account_key)
        return str(self.account_name), str(self.account_key)

    def generate_account_shared_access_signature(
        self, resource_types: ResourceTypes | str, permission: AccountPermissions | str, expiry: datetime | str,
        start: datetime | str | None = None, ip: str | None = None, protocol: str | None = None,
    ) -> str:
        """An account SAS for the Table service (``sas_token`` of another :class:`TableService`)."""
        name, key = self._require_key()
        return generate_account_sas(
            name, key, resource_types=str(resource_types), permission=str(permission),
            expiry=_sas_time(expiry), start=_sas_time(start) if start is not None else None, services="t",
            ip=ip, protocol=protocol,
        )

    def generate_table_shared_access_signature(
        self, table_name: str, permission: TablePermissions | str | None = None, expiry: datetime | str | None = None,
        start: datetime | str | None = None, id: str | None = None, ip: str | None = None,
        protocol: str | None = None, start_pk: str | None = None, start_rk: str | None = None,
        end_pk: str | None = None, end_rk: str | None = None,
    ) -> str:
        """A SAS for one table, optionally limited to a key range or naming a stored policy (``id``)."""
        _require("table_name", table_name)
        name, key = self._require_key()
        return generate_table_sas(
            name, key, table_name, str(permission) if permission else "",
            expiry=_sas_time(expiry) if expiry is not None else None,
            start=_sas_time(start) if start is not None else None,
            start_partition_key=start_pk, start_row_key=start_rk, end_partition_key=end_pk, end_row_key=end_rk,
            policy_id=id, protocol=protocol, ip=ip,
        )

    # ------------------------------------------------------------ service level

    def get_table_service_properties(self, timeout: int | None = None) -> ServiceProperties:
        """The service's analytics logging, hour and minute metrics and CORS rules."""
        with legacy_errors():
            return from_sdk_properties(self.client.get_service_properties(options=_options(timeout)))

    def set_table_service_properties(
        self, logging: Logging | None = None, hour_metrics: Metrics | None = None,
        minute_metrics: Metrics | None = None, cors: list[CorsRule] | None = None, timeout: int | None = None,
    ) -> None:
        """Set the service's properties; a section left None keeps its current value, ``cors=[]`` removes the rules."""
        properties = to_sdk_properties(logging, hour_metrics, minute_metrics, cors)
        with legacy_errors():
            self.client.set_service_properties(properties, options=_options(timeout))

    def get_table_service_stats(self, timeout: int | None = None) -> ServiceStats:
        """Geo-replication statistics, read from the secondary endpoint of the account's address
        (``acct-secondary...``, or ``/devstoreaccount1-secondary`` for a path-style emulator)."""
        with legacy_errors():
            return from_sdk_stats(self.client.get_service_stats(options=_options(timeout)))

    # ------------------------------------------------------------ tables

    def list_tables(
        self, num_results: int | None = None, marker: str | None = None, timeout: int | None = None
    ) -> ListGenerator[Table]:
        """The tables, as :class:`Table` objects; ``num_results`` caps them, ``marker`` resumes."""
        client, options = self.client, _options(timeout)

        def fetch(marker: str | None, top: int | None) -> tuple[list[Table], str | None]:
            token = ContinuationToken(next_table_name=marker) if marker else None
            with legacy_errors():
                segment = client.list_tables_segmented(token, max_results=top, options=options)
            following = segment.continuation_token
            return [Table(name) for name in segment.results], following.next_table_name if following else None

        return ListGenerator(fetch(marker, num_results), fetch, num_results)

    def create_table(self, table_name: str, fail_on_exist: bool = False, timeout: int | None = None) -> bool:
        """Create a table; True if created. An existing table gives False, or raises
        :class:`AzureConflictHttpError` with ``fail_on_exist``."""
        _require("table", table_name)
        try:
            with legacy_errors():
                self.client.create_table(table_name, options=_options(timeout))
        except AzureException as error:
            if fail_on_exist or getattr(error, "status_code", None) != 409:
                raise
            return False
        return True

    def exists(self, table_name: str, timeout: int | None = None) -> bool:
        """Whether the table exists."""
        _require("table_name", table_name)
        with legacy_errors():
            return self.client.table_exists(table_name, options=_options(timeout))

    def delete_table(self, table_name: str, fail_not_exist: bool = False, timeout: int | None = None) -> bool:
        """Delete a table; True if deleted. A missing table gives False, or raises
        :class:`AzureMissingResourceHttpError` with ``fail_not_exist``."""
        _require("table_name", table_name)
        try:
            with legacy_errors():
                self.client.delete_table(table_name, options=_options(timeout))
        except AzureException as error:
            if fail_not_exist or getattr(error, "status_code", None) != 404:
                raise
            return False
        return True

    def get_table_acl(self, table_name: str, timeout: int | None = None) -> dict[str, AccessPolicy]:
        """The table's stored access policies by id (permission letters, aware UTC start and expiry)."""
        _require("table_name", table_name)
        with legacy_errors():
            policies = self.client.get_table_acl(table_name, options=_options(timeout))
        return {
            name: AccessPolicy(policy.permission or None, _aware(policy.expiry), _aware(policy.start))
            for name, policy in policies.items()
        }

    def set_table_acl(
        self, table_name: str, signed_identifiers: Mapping[str, AccessPolicy] | None = None,
        timeout: int | None = None,
    ) -> None:
        """Replace the table's stored access policies (at most 5); None or ``{}`` removes them."""
        _require("table_name", table_name)
        if signed_identifiers and len(signed_identifiers) > 5:
            raise AzureException(
                "Too many access policies provided. The server does not support setting more than 5 access "
                "policies on a single resource."
            )
        policies = {
            name: SdkAccessPolicy(
                str(policy.permission) if policy.permission else "",
                _policy_time(policy.start), _policy_time(policy.expiry),
            )
            for name, policy in (signed_identifiers or {}).items()
        }
        with legacy_errors():
            self.client.set_table_acl(table_name, policies, options=_options(timeout))

    # ------------------------------------------------------------ queries

    def query_entities(
        self, table_name: str, filter: str | None = None, select: str | None = None, num_results: int | None = None,
        marker: Mapping[str, str] | None = None, accept: str = TablePayloadFormat.JSON_MINIMAL_METADATA,
        property_resolver: PropertyResolver | None = None, timeout: int | None = None,
    ) -> ListGenerator[Entity]:
        """The entities matching ``filter`` (OData text), with the ``select`` properties (comma
        separated); the first page is read now, the rest while iterating. See :class:`ListGenerator`."""
        _require("table_name", table_name)
        client, options = self._client_for(accept), _options(timeout)
        columns = _columns(select)
        asked = read_columns(columns, self.key_encryption_key, self.key_resolver_function)

        def fetch(marker: Mapping[str, str] | None, top: int | None) -> tuple[list[Entity], dict[str, str]]:
            token = _entity_token(marker)
            with legacy_errors():
                payloads, following = client.query_entity_payloads(
                    table_name, filter=filter, select=asked, top=top, continuation_token=token, options=options,
                )
            reader = self._reader()  # each page with the settings of its time, as the old package read them
            entities = []
            for payload in payloads:
                plain, decrypted = reader.read(payload)
                entities.append(to_legacy_entity(
                    plain.values, plain.types, plain.etag, property_resolver, columns, decrypted
                ))
            return entities, _entity_marker(following)

        return ListGenerator(fetch(marker, num_results), fetch, num_results)

    def get_entity(
        self, table_name: str, partition_key: str, row_key: str, select: str | None = None,
        accept: str = TablePayloadFormat.JSON_MINIMAL_METADATA, property_resolver: PropertyResolver | None = None,
        timeout: int | None = None,
    ) -> Entity:
        """The entity with these keys; :class:`AzureMissingResourceHttpError` if there is none."""
        _require("table_name", table_name)
        _require("partition_key", partition_key)
        _require("row_key", row_key)
        columns = _columns(select)
        asked = read_columns(columns, self.key_encryption_key, self.key_resolver_function)
        with legacy_errors():
            payload = self._client_for(accept).get_entity_payload(
                table_name, partition_key, row_key, select=asked, options=_options(timeout)
            )
        plain, decrypted = self._reader().read(payload)
        return to_legacy_entity(plain.values, plain.types, plain.etag, property_resolver, columns, decrypted)

    def _reader(self) -> EntityReader:
        return EntityReader(self.require_encryption, self.key_encryption_key, self.key_resolver_function)

    # ------------------------------------------------------------ entities

    def _entity(self, entity: Any, *, merge: bool) -> Any:
        key = self.key_encryption_key
        check_entity(entity, encrypted=key is not None and not merge)
        chosen = None
        if check_write(self.require_encryption, key, merge=merge):
            chosen = chosen_properties(entity, key, self.encryption_resolver_function)
        with legacy_errors():
            converted = to_sdk_entity(entity)
        if chosen is not None:
            converted = encrypt_entity(converted, chosen, key, self.encryption_protocol)
        return converted

    def insert_entity(self, table_name: str, entity: dict[str, Any], timeout: int | None = None) -> str | None:
        """Insert ``entity``; returns its ETag. :class:`AzureConflictHttpError` if it exists."""
        _require("table_name", table_name)
        converted = self._entity(entity, merge=False)
        with legacy_errors():
            return self.client.insert_entity(table_name, converted, options=_options(timeout))

    def update_entity(
        self, table_name: str, entity: dict[str, Any], if_match: str | None = "*", timeout: int | None = None
    ) -> str | None:
        """Replace the stored entity, conditional on ``if_match`` (``"*"``: any version); returns the new ETag."""
        return self._write(table_name, entity, if_match, timeout, "replace")

    def merge_entity(
        self, table_name: str, entity: dict[str, Any], if_match: str | None = "*", timeout: int | None = None
    ) -> str | None:
        """Merge ``entity``'s properties into the stored entity, conditional on ``if_match``; returns the new ETag."""
        return self._write(table_name, entity, if_match, timeout, "merge")

    def _write(self, table_name: str, entity: Any, if_match: str | None, timeout: int | None, mode: str) -> str | None:
        _require("table_name", table_name)
        _require("if_match", if_match)
        converted = self._entity(entity, merge=mode == "merge")
        with legacy_errors():
            return self.client.update_entity(table_name, converted, mode=mode, etag=if_match, options=_options(timeout))

    def delete_entity(
        self, table_name: str, partition_key: str, row_key: str, if_match: str | None = "*", timeout: int | None = None
    ) -> None:
        """Delete the entity with these keys, conditional on ``if_match``."""
        _require("table_name", table_name)
        _require("if_match", if_match)
        _require("partition_key", partition_key)
        _require("row_key", row_key)
        with legacy_errors():
            self.client.delete_entity(
                table_name, partition_key=partition_key, row_key=row_key, etag=if_match, options=_options(timeout)
            )

    def insert_or_replace_entity(self, table_name: str, entity: dict[str, Any], timeout: int | None = None) -> str | None:
        """Insert ``entity``, or replace the stored one; returns the ETag."""
        return self._upsert(table_name, entity, timeout, "replace")

    def insert_or_merge_entity(self, table_name: str, entity: dict[str, Any], timeout: int | None = None) -> str | None:
        """Insert ``entity``, or merge it into the stored one; returns the ETag."""
        return self._upsert(table_name, entity, timeout, "merge")

    def _upsert(self, table_name: str, entity: Any, timeout: int | None, mode: str) -> str | None:
        _require("table_name", table_name)
        converted = self._entity(entity, merge=mode == "merge")
        with legacy_errors():
            return self.client.upsert_entity(table_name, converted, mode=mode, options=_options(timeout))

    # ------------------------------------------------------------ batches

    def commit_batch(self, table_name: str, batch: TableBatch, timeout: int | None = None) -> list[str | None]:
        """Send ``batch`` as one transaction; the ETag of each operation (None for deletes).
        A failing operation raises :class:`AzureBatchOperationError` and nothing is written."""
        _require("table_name", table_name)
        with legacy_errors():
            results = self.client.get_table_reference(table_name).execute_batch(
                batch.to_batch_operation(), options=_options(timeout)
            )
        return [result.etag for result in results]

    @contextlib.contextmanager
    def batch(self, table_name: str, timeout: int | None = None) -> Iterator[TableBatch]:
        """``with service.batch(table) as batch:`` commits the operations added in the block when
        it ends normally (an exception in the block sends nothing)."""
        batch = TableBatch(self.require_encryption, self.key_encryption_key, self.encryption_resolver_function)
        batch.encryption_protocol = self.encryption_protocol
        yield batch
        self.commit_batch(table_name, batch, timeout=timeout)


# ---------------------------------------------------------------- helpers

def _name_from(endpoint: str) -> str:
    """The account of an endpoint given without one (a SAS with ``TableEndpoint``): the first
    path segment of a path-style address, else the first label of the host."""
    host, _, path = endpoint.partition("/")
    segment = path.split("/", 1)[0]
    if segment:
        return segment
    return host.split(".", 1)[0].split(":", 1)[0]


def _columns(select: str | None) -> list[str] | None:
    return None if select is None or select.strip() == "*" else [part.strip() for part in select.split(",")]


def _entity_token(marker: Mapping[str, str] | None) -> ContinuationToken | None:
    if not marker:
        return None
    partition, row = marker.get("nextpartitionkey"), marker.get("nextrowkey")
    if partition is None and row is None:
        return None
    return ContinuationToken(next_partition_key=partition, next_row_key=row)


def _entity_marker(token: ContinuationToken | None) -> dict[str, str]:
    if token is None:
        return {}
    marker = {}
    if token.next_partition_key is not None:
        marker["nextpartitionkey"] = token.next_partition_key
    if token.next_row_key is not None:
        marker["nextrowkey"] = token.next_row_key
    return marker


def _sas_time(value: datetime | str) -> datetime:
    return parse_datetime(value) if isinstance(value, str) else value


def _policy_time(value: datetime | str | None) -> datetime | None:
    if not value:
        return None
    if isinstance(value, str):
        return parse_datetime(value)
    return utc_seconds(value)


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return utc_seconds(value) if value.tzinfo is None else value


# One span per call when the application configured OpenTelemetry, around the client's own spans.
trace_public_methods(TableService, skip=frozenset({
    "batch", "close", "generate_account_shared_access_signature", "generate_table_shared_access_signature",
}))
