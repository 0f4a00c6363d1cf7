"""The query flows: a page fetched (the HTTP stage) and decoded (no I/O), point reads of one entity."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._core._cosmos import CosmosTimestampFilterWarning, filter_names_timestamp, timestamp_filter_message
from .._formats._batch import entity_path
from .._entities._edm import EntityPage, EntityPayload
from .._entities._entity import E, validate_key
from .._core._errors import ResourceNotFoundError, ResponseDecodeError, TableErrorCode, warn_the_caller
from .._entities._filter import prop
from .._formats import PayloadFormat, decoded, require_entity, require_keys, require_page_keys
from .._formats.errors import body_excerpt
from .._pipeline._http import RequestHook
from .._pipeline._options import TableRequestOptions
from .._queries._query import ContinuationToken, FetchedPage, ResultSegment, TableQuery, with_keys
from .._pipeline._retry import RetryPolicy
from .._pipeline._transport import OperationContext

from ._client_base import ClientBase, _scope_of
from ._flows import Call, Flow, _not_found, path_can_carry_keys

if TYPE_CHECKING:
    from ._encryption_scope import EncryptionScope


class QueryFlows(ClientBase):
    """The flows that read entities: a query page in two stages, and the entity of a pair of keys."""

    def _f_page_payloads(
        self, fetching: Flow[FetchedPage]
    ) -> Flow[tuple[list[EntityPayload], ContinuationToken | None]]:
        """A page as payloads with the next page's token: the HTTP stage ``fetching``
        (:meth:`_f_fetch_entity_page` or :meth:`_f_fetch_page`), then its decode."""
        fetched = yield from fetching
        return self._decode_page(fetched).payloads(), fetched.continuation_token

    def _f_fetch_entity_page(
        self,
        table_name: str,
        filter: str | None,
        select: Sequence[str] | None,
        top: int | None,
        continuation_token: ContinuationToken | None,
        retry_policy: RetryPolicy | None,
        operation_context: OperationContext | None,
        request_hook: RequestHook | None,
        *,
        select_text: str | None = None,
        options: TableRequestOptions | None = None,
        entity_type: Any = None,
    ) -> Flow[FetchedPage]:
        """The HTTP stage of one Query Entities page: the answer, its body not decoded, and the
        next page's token (from the headers, so the next request can start before decoding).
        ``select_text``: the ``$select`` of ``select`` made already (a compiled query's).
        ``options``: the call's request options (their encryption adds the metadata properties to a
        projection), ``entity_type`` the class the entities are read into."""
        params: list[tuple[str, str]] = []
        if filter:
            params.append(("$filter", filter))
            if self.is_cosmos and filter_names_timestamp(filter):
                warn_the_caller(timestamp_filter_message(filter), CosmosTimestampFilterWarning)
        if top is not None:
            params.append(("$top", str(top)))
        if select:
            projection = None if _keys_only(select) else self._encryption(options, entity_type)
            if projection is not None and projection.reads_metadata:
                select_text = ",".join(projection.with_metadata_columns(_with_keys(select)))
            params.append(("$select", select_text or ",".join(_with_keys(select))))
        if continuation_token is not None:
            if continuation_token.next_partition_key is not None:
                params.append(("NextPartitionKey", continuation_token.next_partition_key))
            if continuation_token.next_row_key is not None:
                params.append(("NextRowKey", continuation_token.next_row_key))
        call = Call(
            "GET", f"{table_name}()", query=params,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
            pinned=continuation_token.target_location if continuation_token is not None else None,
        )
        response = yield call
        npk = response.headers.get("x-ms-continuation-NextPartitionKey")
        nrk = response.headers.get("x-ms-continuation-NextRowKey")
        token = None
        if npk or nrk:
            token = ContinuationToken(next_partition_key=npk, next_row_key=nrk,
                                      target_location=self._answered_from(response, call))
        return FetchedPage(
            token, response, selected=tuple(select) if select else None,
            encryption=None if select and _keys_only(select) else _scope_of(self._settings_for(call), entity_type),
        )

    def _decode_page(self, fetched: FetchedPage) -> EntityPage:
        """The decode stage of a page: its entities read from the body (no I/O; the caller's thread)."""
        response = fetched.response
        if response is None:
            assert fetched.page is not None, "a FetchedPage holds a response or a page"
            return fetched.page
        page = decoded(
            response, lambda body: require_page_keys(self._format.parse_entity_page(body), body, fetched.selected)
        )
        encryption: EncryptionScope | None = fetched.encryption
        return page if encryption is None else encryption.decrypt_page(page)

    def _f_get_entity_payload(
        self,
        table_name: str,
        partition_key: str,
        row_key: str,
        select: Sequence[str] | None,
        retry_policy: RetryPolicy | None,
        operation_context: OperationContext | None,
        request_hook: RequestHook | None,
        *,
        options: TableRequestOptions | None = None,
        entity_type: Any = None,
    ) -> Flow[EntityPayload]:
        """The entity of these keys as a payload, decrypted by the call's encryption (``options``,
        the client's default; ``entity_type`` the class it is read into)."""
        validate_key("PartitionKey", partition_key)
        validate_key("RowKey", row_key)
        if not path_can_carry_keys(table_name, partition_key, row_key):
            expr = (prop("PartitionKey") == partition_key) & (prop("RowKey") == row_key)
            fetched = yield from self._f_fetch_entity_page(
                table_name, expr.render(), select, None, None, retry_policy, operation_context, request_hook,
                options=options, entity_type=entity_type,
            )

            def the_entity(body: bytes) -> EntityPayload | None:
                payloads = self._decode_page(fetched).payloads()
                if len(payloads) > 1:
                    raise ResponseDecodeError(
                        f"{len(payloads)} entities answered a query for one pair of keys", excerpt=body_excerpt(body)
                    )
                return require_entity(payloads[0], partition_key, row_key, body) if payloads else None

            assert fetched.response is not None
            found = decoded(fetched.response, the_entity)
            if found is None:
                raise _not_found()
            return found
        projection = _with_keys(select) if select else ()
        if projection and not _keys_only(projection):
            reading = self._encryption(options, entity_type)
            if reading is not None and reading.reads_metadata:
                projection = reading.with_metadata_columns(projection)
        params = [("$select", ",".join(projection))] if projection else []
        call = Call(
            "GET", entity_path(table_name, partition_key, row_key), query=params,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
        )
        response = yield call
        payload = decoded(response, lambda body: require_entity(
            _one_entity(self._format, body, response.etag, select), partition_key, row_key, body
        ))
        encryption = None if projection and _keys_only(projection) else _scope_of(self._settings_for(call), entity_type)
        return payload if encryption is None else encryption.decrypt(payload)

    def _f_fetch_page(
        self,
        query: TableQuery[Any],
        continuation_token: ContinuationToken | None,
        top: int | None,
        ignore_missing_entity: bool,
        ignore_missing_table: bool,
        request_hook: RequestHook | None,
    ) -> Flow[FetchedPage]:
        """The HTTP stage of one page of ``query`` (see :meth:`_f_fetch_entity_page`).

        A point query is one request with no continuation: its entity is read
        here and the page comes back already decoded.
        """
        compiled = query.compiled()
        keys = compiled.point_keys
        if keys is not None and continuation_token is None:
            try:
                payload = yield from self._f_get_entity_payload(
                    query.table, keys[0], keys[1], query.select_columns, None, None, request_hook,
                    options=query.request_options, entity_type=query.entity_type,
                )
            except ResourceNotFoundError as exc:
                missing_table = exc.error_code == TableErrorCode.TABLE_NOT_FOUND
                if ignore_missing_table if missing_table else ignore_missing_entity:
                    return FetchedPage(None, page=EntityPage.of([]))
                raise
            return FetchedPage(None, page=EntityPage.of([payload]))
        return (yield from self._f_fetch_entity_page(
            query.table, compiled.filter_text, query.select_columns, top, continuation_token, None, None,
            request_hook, select_text=compiled.select_text, options=query.request_options,
            entity_type=query.entity_type,
        ))

    def _f_execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> Flow[ResultSegment[E]]:
        fetched = yield from self._f_fetch_page(query, continuation_token, top, True, False, None)
        return self._decode_segment(query, fetched)

    def _decode_segment(self, query: TableQuery[E], fetched: FetchedPage) -> ResultSegment[E]:
        """The decode stage of a client query's page: untracked entities of the query's class."""
        return ResultSegment(query.compiled().read(self._decode_page(fetched)), fetched.continuation_token)


def _one_entity(
    fmt: PayloadFormat, body: bytes, etag: str | None, selected: Sequence[str] | None = None
) -> EntityPayload:
    return require_keys([fmt.parse_entity(body, etag)], body, selected)[0]


def _with_keys(select: Iterable[str]) -> tuple[str, ...]:
    """A projection always brings back the keys and Timestamp, so results stay addressable."""
    return with_keys(tuple(select))


def _keys_only(select: Iterable[str]) -> bool:
    """Whether a projection reads only the keys and Timestamp: nothing encrypted can be in it (a
    key scan of a delete or count needs neither the metadata nor a key)."""
    return all(name in _SYSTEM_NAMES for name in select)


_SYSTEM_NAMES = frozenset({"PartitionKey", "RowKey", "Timestamp"})
