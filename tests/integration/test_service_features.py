"""Service-level features end to end: table ACLs and policy SAS, service properties, account SAS,
table listing, stats and secondary reads on every target (Azurite, devstore JSON and Atom); read
failover to the secondary, CORS preflight and Entra ID tokens on the devstore (Azurite takes tokens
only in its --oauth mode over HTTPS)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
import requests

from tablesdk import (
    AccessPolicy,
    CloudStorageAccount,
    CloudTableClient,
    ContinuationToken,
    CorsRule,
    DynamicEntity,
    LinearRetry,
    Metrics,
    OperationContext,
    SasCredential,
    TableServiceError,
    generate_account_sas,
    generate_table_sas,
    prop,
)
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY, DevStore
from tablesdk._pipeline._http import AttemptState, HttpRequest, HttpResponse, SendError, Timeout

pytestmark = pytest.mark.integration

NOW = datetime.now(timezone.utc)


def sas_version(client: CloudTableClient) -> str:
    # A SAS's signed version is the version the request runs as: Atom needs one before 2015-12-11.
    return "2015-04-05" if client.payload_format == "atom" else "2019-02-02"


def sas_client(client: CloudTableClient, token: str) -> CloudTableClient:
    account = CloudStorageAccount(DEVSTORE_ACCOUNT, client.table_endpoint, SasCredential(token))
    return account.create_cloud_table_client(payload_format=client.payload_format)


def test_table_acl_round_trip(client: CloudTableClient, table: str) -> None:
    assert client.get_table_acl(table) == {}
    policies = {
        "readers": AccessPolicy("r", NOW - timedelta(minutes=5), NOW + timedelta(hours=1)),
        "writers": AccessPolicy("au", NOW, NOW + timedelta(days=1)),
    }
    client.set_table_acl(table, policies)
    got = client.get_table_acl(table)
    assert list(got) == ["readers", "writers"]
    assert got["writers"].permission == "au"
    assert got["readers"].expiry == (NOW + timedelta(hours=1)).replace(microsecond=0)
    client.set_table_acl(table, {})
    assert client.get_table_acl(table) == {}


def test_policy_sas_and_revocation(client: CloudTableClient, table: str) -> None:
    client.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="r", A=1))
    client.set_table_acl(table, {"readers": AccessPolicy("r", NOW - timedelta(minutes=5), NOW + timedelta(hours=1))})
    token = generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, table, "", policy_id="readers",
                               version=sas_version(client))
    with sas_client(client, token) as reader:
        assert [e["A"] for e in reader.create_query(table)] == [1]
        with pytest.raises(TableServiceError) as refused:
            reader.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="x"))
        assert refused.value.status_code == 403
        client.set_table_acl(table, {})  # removing the policy revokes the SAS
        with pytest.raises(TableServiceError) as revoked:
            list(reader.create_query(table))
        assert revoked.value.status_code == 403


@pytest.fixture
def restore_properties(client: CloudTableClient) -> Iterator[None]:
    before = client.get_service_properties()
    yield
    client.set_service_properties(before)


def test_service_properties_round_trip(client: CloudTableClient, restore_properties: None) -> None:
    props = client.get_service_properties()
    assert props.logging is not None and props.cors is not None
    props.hour_metrics = Metrics(enabled=True, include_apis=True, retention_days=7)
    props.cors = [CorsRule(["https://app.example"], ["GET", "PUT"], ["x-ms-meta-*"], ["x-ms-request-id"], 90)]
    client.set_service_properties(props)
    got = client.get_service_properties()
    assert got.hour_metrics == Metrics(enabled=True, include_apis=True, retention_days=7)
    assert got.cors == props.cors
    assert got.logging == props.logging


def test_account_sas(client: CloudTableClient, unique_table_name: str) -> None:
    def token(permission: str, resource_types: str) -> str:
        return generate_account_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, resource_types=resource_types,
                                    permission=permission, expiry=NOW + timedelta(hours=1),
                                    version=sas_version(client))

    with sas_client(client, token("rwdlacu", "sco")) as full:
        full.create_table(unique_table_name)
        full.insert_entity(unique_table_name, DynamicEntity(PartitionKey="p", RowKey="r"))
        assert unique_table_name in list(full.list_tables(prefix=unique_table_name))
        assert full.get_service_properties().cors is not None
        full.delete_table(unique_table_name)
    with sas_client(client, token("rwdlacu", "o")) as objects_only:
        with pytest.raises(TableServiceError) as info:
            objects_only.create_table(unique_table_name)
        assert info.value.status_code == 403


@pytest.fixture
def many_tables(client: CloudTableClient, unique_table_name: str) -> Iterator[list[str]]:
    names = [f"{unique_table_name}x{i}" for i in range(5)]
    for name in names:
        client.create_table(name)
    yield names
    for name in names:
        client.delete_table_if_exists(name)


def test_list_tables_segmented_resumes_from_a_string_token(
    client: CloudTableClient, many_tables: list[str], unique_table_name: str
) -> None:
    seen: list[str] = []
    token: ContinuationToken | None = None
    pages = 0
    while True:
        segment = client.list_tables_segmented(token, prefix=unique_table_name, max_results=2)
        seen += segment.results
        pages += 1
        if segment.continuation_token is None:
            break
        token = ContinuationToken.from_string(segment.continuation_token.to_string())
    assert seen == many_tables and pages == 3


def test_list_tables_filter(client: CloudTableClient, many_tables: list[str], unique_table_name: str) -> None:
    assert list(client.list_tables(filter=prop("TableName") == many_tables[2])) == [many_tables[2]]
    above = list(client.list_tables(unique_table_name, filter=prop("TableName") >= many_tables[3]))
    assert above == many_tables[3:]
    raw = list(client.list_tables(filter=f"TableName eq '{many_tables[1]}'"))
    assert raw == [many_tables[1]]


def test_service_stats(client: CloudTableClient) -> None:
    stats = client.get_service_stats()  # from <account>-secondary, on both emulators
    assert stats.geo_replication_status == "live"
    assert stats.last_sync_time is not None
    assert stats.last_sync_time <= datetime.now(timezone.utc) + timedelta(seconds=5)


def test_secondary_only_reads_and_primary_writes(client: CloudTableClient, table: str) -> None:
    client.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="r", A=7))
    reader = client.account.create_cloud_table_client(
        payload_format=client.payload_format, location_mode="secondary_only"
    )
    with reader:
        context = OperationContext()
        assert reader.get_entity(table, "p", "r", operation_context=context)["A"] == 7
        assert "-secondary/" in context.attempts[0].url
        written = OperationContext()
        reader.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="s"), operation_context=written)
        assert "-secondary" not in written.attempts[0].url


# ----------------------------------------------------------------- devstore only


def test_cors_preflight_follows_stored_rules(devstore: DevStore, table_client: CloudTableClient) -> None:
    url = f"{devstore.url}/Tables"
    ask = {"Origin": "https://app.example", "Access-Control-Request-Method": "PUT"}
    assert requests.options(url, headers=ask, timeout=10).status_code == 403
    props = table_client.get_service_properties()
    props.cors = [CorsRule(["https://app.example"], ["PUT"], max_age_in_seconds=30)]
    table_client.set_service_properties(props)
    answer = requests.options(url, headers=ask, timeout=10)
    assert answer.status_code == 200 and answer.headers["Access-Control-Max-Age"] == "30"


@dataclass
class Token:
    token: str
    expires_on: int


class StaticCredential:
    """Stands in for an azure-identity credential."""

    def __init__(self, token: str) -> None:
        self._token = token
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: object) -> Token:
        self.scopes.append(scopes)
        return Token(self._token, int(datetime.now(timezone.utc).timestamp()) + 3600)


def test_entra_id_token() -> None:
    with DevStore(bearer_tokens=["valid-token"]) as store:
        good = StaticCredential("valid-token")
        with CloudStorageAccount(store.account_name, store.url, good).create_cloud_table_client() as client:
            client.create_table("tokens")
            client.insert_entity("tokens", DynamicEntity(PartitionKey="p", RowKey="r"))
            assert list(client.list_tables()) == ["tokens"]
        assert good.scopes[0] == ("https://storage.azure.com/.default",) and len(good.scopes) == 1
        bad = CloudStorageAccount(store.account_name, store.url, StaticCredential("stolen"))
        with bad.create_cloud_table_client() as client:
            with pytest.raises(TableServiceError) as info:
                list(client.list_tables())
            assert info.value.status_code == 403 and "stolen" not in str(info.value)


class PrimaryDown:
    """A sender whose primary endpoint is unreachable; the secondary answers through a real sender."""

    def __init__(self) -> None:
        from tablesdk._pipeline._requests_sender import RequestsSender

        self.inner = RequestsSender()
        self.urls: list[str] = []

    def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        self.urls.append(request.url)
        if "-secondary" not in request.url:
            raise SendError("primary unreachable", state=AttemptState.NOT_SENT, refused=True)
        return self.inner.send(request, timeout)

    def close(self) -> None:
        self.inner.close()


def test_secondary_reads(
    devstore: DevStore, devstore_account: CloudStorageAccount, table_client: CloudTableClient
) -> None:
    table_client.create_table("georeads")  # the fixture empties the emulator afterwards
    table_client.insert_entity("georeads", DynamicEntity(PartitionKey="p", RowKey="r", A=7))
    context = OperationContext()
    with devstore_account.create_cloud_table_client(location_mode="secondary_only") as reader:
        assert reader.get_entity("georeads", "p", "r", operation_context=context)["A"] == 7
        assert context.attempts[0].url.startswith(devstore.secondary_url + "/")
        reader.insert_entity("georeads", DynamicEntity(PartitionKey="p", RowKey="s"))  # writes: primary
    down = PrimaryDown()
    with devstore_account.create_cloud_table_client(
        location_mode="primary_then_secondary", sender=down, retry_policy=LinearRetry(2, 0)
    ) as failover:
        assert [e.RowKey for e in failover.create_query("georeads")] == ["r", "s"]
    assert [("-secondary" in url) for url in down.urls] == [False, True]
