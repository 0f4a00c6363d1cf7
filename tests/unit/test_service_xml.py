"""Golden bodies and pre-request limits of the service-level XML (ACLs, properties, stats)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tablesdk import AccessPolicy, AnalyticsLogging, CorsRule, Metrics, ServiceProperties, TableValidationError
from tablesdk._clients._service import (
    parse_acl,
    parse_service_properties,
    parse_service_stats,
    serialize_acl,
    serialize_service_properties,
)

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_acl_golden_body() -> None:
    body = serialize_acl({
        "readers": AccessPolicy("dr", T0, T0 + timedelta(days=1)),
        "<odd&id>": AccessPolicy(expiry=datetime(2030, 1, 3)),  # naive means UTC
    })
    assert body == (
        b'<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>'
        b"<SignedIdentifier><Id>readers</Id><AccessPolicy><Start>2030-01-02T03:04:05Z</Start>"
        b"<Expiry>2030-01-03T03:04:05Z</Expiry><Permission>rd</Permission></AccessPolicy></SignedIdentifier>"
        b"<SignedIdentifier><Id>&lt;odd&amp;id&gt;</Id><AccessPolicy><Expiry>2030-01-03T00:00:00Z</Expiry>"
        b"</AccessPolicy></SignedIdentifier></SignedIdentifiers>"
    )
    assert serialize_acl({}) == b'<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers></SignedIdentifiers>'


def test_acl_parse_service_answer() -> None:
    # the service writes seven fraction digits; Azurite writes what it was sent
    answer = (b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers><SignedIdentifier><Id>p1</Id>'
              b"<AccessPolicy><Start>2030-01-02T03:04:05.1234567Z</Start><Expiry>2030-01-03T00:00:00Z</Expiry>"
              b"<Permission>raud</Permission></AccessPolicy></SignedIdentifier>"
              b"<SignedIdentifier><Id>p2</Id><AccessPolicy /></SignedIdentifier></SignedIdentifiers>")
    policies = parse_acl(answer)
    assert list(policies) == ["p1", "p2"]
    assert policies["p1"].start == datetime(2030, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    assert policies["p1"].permission == "raud" and policies["p2"] == AccessPolicy()
    assert parse_acl(b"") == {}


@pytest.mark.parametrize("policies, field", [
    ({f"p{i}": AccessPolicy("r") for i in range(6)}, "policies"),
    ({"x" * 65: AccessPolicy("r")}, "policy id"),
    ({"": AccessPolicy("r")}, "policy id"),
    ({"p": AccessPolicy("rw")}, "policy 'p' permission"),
    ({"p": AccessPolicy("r", T0, T0)}, "policy 'p'"),
])
def test_acl_limits_checked_before_sending(policies: dict[str, AccessPolicy], field: str) -> None:
    with pytest.raises(TableValidationError) as info:
        serialize_acl(policies)
    assert info.value.field == field


def test_acl_parse_is_safe_xml() -> None:
    evil = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            b"<SignedIdentifiers><SignedIdentifier><Id>&e;</Id></SignedIdentifier></SignedIdentifiers>")
    policies = parse_acl(evil)
    assert all("root:" not in key for key in policies)


PROPS = ServiceProperties(
    logging=AnalyticsLogging(delete=True, write=True, retention_days=7),
    hour_metrics=Metrics(enabled=True, include_apis=True, retention_days=30),
    minute_metrics=Metrics(enabled=False),
    cors=[CorsRule(["https://a.example", "https://b.example"], ["GET", "put"], ["x-ms-meta-*"], ["x-ms-request-id"], 600)],
)


def test_service_properties_golden_body() -> None:
    assert serialize_service_properties(PROPS) == (
        b'<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties>'
        b"<Logging><Version>1.0</Version><Delete>true</Delete><Read>false</Read><Write>true</Write>"
        b"<RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></Logging>"
        b"<HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>true</IncludeAPIs>"
        b"<RetentionPolicy><Enabled>true</Enabled><Days>30</Days></RetentionPolicy></HourMetrics>"
        b"<MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled>"
        b"<RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></MinuteMetrics>"
        b"<Cors><CorsRule><AllowedOrigins>https://a.example,https://b.example</AllowedOrigins>"
        b"<AllowedMethods>GET,PUT</AllowedMethods><MaxAgeInSeconds>600</MaxAgeInSeconds>"
        b"<ExposedHeaders>x-ms-request-id</ExposedHeaders><AllowedHeaders>x-ms-meta-*</AllowedHeaders>"
        b"</CorsRule></Cors></StorageServiceProperties>"
    )


def test_sections_left_none_are_not_sent() -> None:
    body = serialize_service_properties(ServiceProperties(cors=[]))
    assert body == b'<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Cors></Cors></StorageServiceProperties>'


def test_service_properties_round_trip() -> None:
    parsed = parse_service_properties(serialize_service_properties(PROPS))
    assert parsed.logging == PROPS.logging and parsed.hour_metrics == PROPS.hour_metrics
    assert parsed.minute_metrics == Metrics(enabled=False, include_apis=None)
    assert parsed.cors is not None and parsed.cors[0].allowed_methods == ["GET", "PUT"]


def test_service_properties_defaults_for_missing_sections() -> None:
    parsed = parse_service_properties(b"<StorageServiceProperties><Cors /></StorageServiceProperties>")
    assert parsed.logging == AnalyticsLogging() and parsed.hour_metrics == Metrics() and parsed.cors == []


def _rule(**kw: object) -> CorsRule:
    base: dict[str, object] = {"allowed_origins": ["*"], "allowed_methods": ["GET"]}
    base.update(kw)
    return CorsRule(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("props, field", [
    (ServiceProperties(cors=[_rule()] * 6), "cors"),
    (ServiceProperties(cors=[_rule(allowed_origins=[f"https://o{i}.example" for i in range(65)])]),
     "cors[0].allowed_origins"),
    (ServiceProperties(cors=[_rule(allowed_origins=["https://" + "x" * 250])]), "cors[0].allowed_origins"),
    (ServiceProperties(cors=[_rule(allowed_methods=["FETCH"])]), "cors[0].allowed_methods"),
    (ServiceProperties(cors=[_rule(allowed_methods=[])]), "cors[0].allowed_methods"),
    (ServiceProperties(cors=[_rule(allowed_headers=["a*", "b*", "c*"])]), "cors[0].allowed_headers"),
    (ServiceProperties(cors=[_rule(exposed_headers=[f"h{i}" for i in range(65)])]), "cors[0].exposed_headers"),
    (ServiceProperties(cors=[_rule(max_age_in_seconds=-1)]), "cors[0].max_age_in_seconds"),
    (ServiceProperties(cors=[_rule(allowed_origins=[f"https://{i:03}.{'y' * 200}" for i in range(5)])] * 2),
     "cors"),  # 2 KiB of CORS settings in all
    (ServiceProperties(logging=AnalyticsLogging(retention_days=0)), "logging.retention_days"),
    (ServiceProperties(hour_metrics=Metrics(retention_days=366)), "HourMetrics.retention_days"),
])
def test_service_limits_checked_before_sending(props: ServiceProperties, field: str) -> None:
    with pytest.raises(TableValidationError) as info:
        serialize_service_properties(props)
    assert info.value.field == field


def test_stats_parse() -> None:
    stats = parse_service_stats(
        b'<?xml version="1.0" encoding="utf-8"?><StorageServiceStats><GeoReplication><Status>live</Status>'
        b"<LastSyncTime>Wed, 02 Jan 2030 03:04:05 GMT</LastSyncTime></GeoReplication></StorageServiceStats>"
    )
    assert stats.geo_replication_status == "live" and stats.last_sync_time == T0
    boot = parse_service_stats(b"<StorageServiceStats><GeoReplication><Status>bootstrap</Status>"
                               b"<LastSyncTime /></GeoReplication></StorageServiceStats>")
    assert boot.geo_replication_status == "bootstrap" and boot.last_sync_time is None


@pytest.mark.parametrize("body", [b"", b"<nope/>", b"<StorageServiceStats/>", b"not xml"])
def test_bad_stats_bodies(body: bytes) -> None:
    with pytest.raises(ValueError):
        parse_service_stats(body)
