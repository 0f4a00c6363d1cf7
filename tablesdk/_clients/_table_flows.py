"""The table-level flows: create, delete, exists, list; table ACLs and the service's properties and stats."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._entities._entity import validate_table_name
from .._core._errors import ConflictError, ResourceNotFoundError, TableErrorCode
from .._entities._filter import FilterLike, as_filter, prop, render_filter
from .._formats import decoded, decoding
from .._queries._query import ContinuationToken, ResultSegment
from .._pipeline._transport import OperationContext

from ._client_base import ClientBase
from ._flows import Call, Flow

if TYPE_CHECKING:
    from ._service import AccessPolicy, ServiceProperties, ServiceStats


class TableFlows(ClientBase):
    """The flows of tables and of the service level (see :mod:`tablesdk._clients._flows`)."""

    def _f_create_table(self, table_name: str, operation_context: OperationContext | None) -> Flow[None]:
        validate_table_name(table_name, cosmos=self.is_cosmos)
        yield Call(
            "POST", "Tables", body=self._format.serialize_table(table_name),
            headers=self._prefer_headers(False), operation_context=operation_context,
        )

    def _f_create_table_if_not_exists(self, table_name: str, operation_context: OperationContext | None) -> Flow[bool]:
        try:
            yield from self._f_create_table(table_name, operation_context)
        except ConflictError as exc:
            if exc.ambiguous_retry:  # our own lost first attempt may have created it: don't guess
                raise
            if exc.error_code == TableErrorCode.TABLE_BEING_DELETED:
                exc.message = (
                    f"table {table_name!r} is being deleted; it cannot be created until the "
                    f"service finishes (retry after some seconds): {exc.message}"
                )
                raise
            return False
        return True

    def _f_delete_table(self, table_name: str, operation_context: OperationContext | None) -> Flow[None]:
        validate_table_name(table_name, cosmos=self.is_cosmos)
        yield Call("DELETE", f"Tables('{table_name}')", operation_context=operation_context)

    def _f_delete_table_if_exists(self, table_name: str, operation_context: OperationContext | None) -> Flow[bool]:
        try:
            yield from self._f_delete_table(table_name, operation_context)
        except ResourceNotFoundError as exc:
            if exc.ambiguous_retry:  # our own lost first attempt may have deleted it: don't guess
                raise
            return False
        return True

    def _f_table_exists(self, table_name: str, operation_context: OperationContext | None) -> Flow[bool]:
        validate_table_name(table_name, cosmos=self.is_cosmos)
        try:
            yield Call("GET", f"Tables('{table_name}')", operation_context=operation_context)
        except ResourceNotFoundError:
            return False
        return True

    def _f_list_tables_segmented(
        self,
        token: ContinuationToken | None,
        prefix: str | None,
        filter: FilterLike | None,
        max_results: int | None,
        operation_context: OperationContext | None,
    ) -> Flow[ResultSegment[str]]:
        if max_results is not None and (
            isinstance(max_results, bool) or not isinstance(max_results, int) or not 1 <= max_results <= 1000
        ):
            raise ValueError(f"max_results must be an int from 1 to 1000, got {max_results!r}")
        if token is not None and token.next_table_name is None:
            raise ValueError("this continuation token belongs to an entity query, not to table listing")
        params: list[tuple[str, str]] = []
        text = _table_filter(prefix, filter)
        if text:
            params.append(("$filter", text))
        if max_results is not None:
            params.append(("$top", str(max_results)))
        if token is not None and token.next_table_name:
            params.append(("NextTableName", token.next_table_name))
        call = Call("GET", "Tables", query=params, operation_context=operation_context,
                    pinned=token.target_location if token is not None else None)
        response = yield call
        names = decoded(response, self._format.parse_tables)
        next_name = response.headers.get("x-ms-continuation-NextTableName")
        if not next_name:
            return ResultSegment(names, None)
        return ResultSegment(names, ContinuationToken(next_table_name=next_name,
                                                      target_location=self._answered_from(response, call)))

    # ------------------------------------------------------------ access policies, service level

    def _f_get_table_acl(
        self, table_name: str, operation_context: OperationContext | None
    ) -> Flow[dict[str, AccessPolicy]]:
        from ._service import parse_acl  # the service-level XML loads with its first call (start-up)

        validate_table_name(table_name, cosmos=self.is_cosmos)
        self._refuse_on_cosmos("get_table_acl")
        response = yield Call("GET", table_name, query=[("comp", "acl")], operation_context=operation_context)
        return decoded(response, decoding(parse_acl))

    def _f_set_table_acl(
        self, table_name: str, policies: dict[str, AccessPolicy], operation_context: OperationContext | None
    ) -> Flow[None]:
        from ._service import serialize_acl

        validate_table_name(table_name, cosmos=self.is_cosmos)
        self._refuse_on_cosmos("set_table_acl")
        body = serialize_acl(policies)
        yield Call(
            "PUT", table_name, query=[("comp", "acl")], body=body,
            headers={"Content-Type": "application/xml"}, operation_context=operation_context,
        )

    def _f_get_service_properties(self, operation_context: OperationContext | None) -> Flow[ServiceProperties]:
        from ._service import parse_service_properties

        self._refuse_on_cosmos("get_service_properties")
        response = yield Call(
            "GET", "", query=[("restype", "service"), ("comp", "properties")], operation_context=operation_context
        )
        return decoded(response, decoding(parse_service_properties))

    def _f_set_service_properties(
        self, properties: ServiceProperties, operation_context: OperationContext | None
    ) -> Flow[None]:
        from ._service import serialize_service_properties

        self._refuse_on_cosmos("set_service_properties")
        body = serialize_service_properties(properties)
        yield Call(
            "PUT", "", query=[("restype", "service"), ("comp", "properties")], body=body,
            headers={"Content-Type": "application/xml"}, operation_context=operation_context,
        )

    def _f_get_service_stats(self, operation_context: OperationContext | None) -> Flow[ServiceStats]:
        from ._service import parse_service_stats

        self._refuse_on_cosmos("get_service_stats")
        response = yield Call(
            "GET", "", query=[("restype", "service"), ("comp", "stats")],
            operation_context=operation_context, endpoint=self.account.secondary_table_endpoint,
        )
        return decoded(response, decoding(parse_service_stats))


def _table_filter(prefix: str | None, filter: FilterLike | None) -> str | None:
    """The Query Tables ``$filter`` for a name prefix and/or a filter on TableName."""
    parts = []
    if prefix:
        parts.append(prop("TableName").startswith(prefix))
    if filter is not None:
        parts.append(as_filter(filter))
    if not parts:
        return None
    return render_filter(parts[0] if len(parts) == 1 else parts[0] & parts[1])
