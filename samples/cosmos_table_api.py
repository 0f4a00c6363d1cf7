"""Cosmos DB's Table API: what a client of a Cosmos DB account does differently.

Runs offline: a stand-in for the service (a ``MockSender`` answering as the API for Table's
documentation describes: a throttled first write, then success) replaces the network, so no
Cosmos DB account is needed and no host name is looked up. Point ``CONNECTION_STRING`` at a
real account and drop ``sender=`` to run the same calls against the service.

    python samples/cosmos_table_api.py
"""

from __future__ import annotations

import json
import warnings
from datetime import datetime, timedelta, timezone

from tablesdk import (
    CloudStorageAccount,
    CosmosTimestampFilterWarning,
    HttpRequest,
    HttpResponse,
    MockSender,
    OperationContext,
    TableValidationError,
    prop,
)

CONNECTION_STRING = (
    "DefaultEndpointsProtocol=https;AccountName=orders;AccountKey=a2V5;"
    "TableEndpoint=https://orders.table.cosmos.azure.com:443/"
)


class RecordedCosmos:
    """Answers as Cosmos DB does: the first write is throttled (429, x-ms-retry-after-ms)."""

    def __init__(self) -> None:
        self.throttled = False

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "GET":
            return MockSender.response(200, json.dumps({"value": []}), {"Content-Type": "application/json"})
        if not self.throttled:
            self.throttled = True
            message = {"lang": "en-us", "value": "Request rate is large"}
            body = {"odata.error": {"code": "TooManyRequests", "message": message}}
            return MockSender.response(429, json.dumps(body), {"x-ms-retry-after-ms": "100"})
        return MockSender.response(204, headers={"ETag": 'W/"datetime\'2024-01-01T00%3A00%3A00Z\'"'})


def main() -> None:
    account = CloudStorageAccount.parse(CONNECTION_STRING)
    print(f"{account.table_endpoint}: Cosmos DB? {account.is_cosmos}")
    sender = MockSender(RecordedCosmos())
    with account.create_cloud_table_client(sender=sender) as client:
        print(f"default retry policy: {client.retry_policy!r}")
        throttles = OperationContext()
        throttles.retrying.append(lambda decision: print(
            f"attempt {decision.attempt}: {decision.error.status_code}, waiting {decision.delay} s "
            f"(asked for {decision.server_delay} s)"
        ))
        now = datetime.now(timezone.utc)
        client.upsert_entity(
            "Orders", {"PartitionKey": "2024", "RowKey": "1", "UpdatedAt": now}, operation_context=throttles
        )
        print(f"written after {len(sender.requests)} attempts")

        for entity in ({"PartitionKey": "2024", "RowKey": "r" * 300}, {"PartitionKey": "2024", "RowKey": "2", "Id": 7}):
            try:
                client.insert_entity("Orders", entity)
            except TableValidationError as exc:
                print(f"refused before sending: {exc}")

        try:
            client.get_table_acl("Orders")
        except NotImplementedError as exc:
            print(f"refused before sending: {exc}")

        since = now - timedelta(hours=1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CosmosTimestampFilterWarning)
            list(client.create_query("Orders").where(prop("Timestamp") >= since))
        print(f"warned: {caught[0].message}")
        recent = list(client.create_query("Orders").where(prop("UpdatedAt") >= since))
        print(f"filtering on the application's own UpdatedAt instead: {len(recent)} entities (the stand-in has none)")


if __name__ == "__main__":
    main()
