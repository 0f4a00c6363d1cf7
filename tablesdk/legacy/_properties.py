"""The service-level settings of the old package (``azure.cosmosdb.table.common.models``) and
their translation to and from tablesdk's :class:`~tablesdk.ServiceProperties`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import AnalyticsLogging as SdkLogging
from .. import CorsRule as SdkCorsRule
from .. import Metrics as SdkMetrics
from .. import ServiceProperties as SdkServiceProperties
from .. import ServiceStats as SdkServiceStats


class RetentionPolicy:
    """How long logs or metrics are kept: ``enabled`` with ``days`` (1-365), or kept forever."""

    def __init__(self, enabled: bool = False, days: int | None = None) -> None:
        if enabled is None:
            raise ValueError("enabled should not be None.")
        if enabled and days is None:
            raise ValueError("days should not be None.")
        self.enabled = enabled
        self.days = days


class Logging:
    """Storage Analytics logging: which requests (``delete``, ``read``, ``write``) are logged."""

    def __init__(
        self, delete: bool = False, read: bool = False, write: bool = False,
        retention_policy: RetentionPolicy | None = None,
    ) -> None:
        for name, value in (("read", read), ("write", write), ("delete", delete)):
            if value is None:
                raise ValueError(f"{name} should not be None.")
        self.version = "1.0"
        self.delete = delete
        self.read = read
        self.write = write
        self.retention_policy = retention_policy if retention_policy else RetentionPolicy()


class Metrics:
    """Hour or minute metrics: ``enabled``, with per-API statistics when ``include_apis``."""

    def __init__(
        self, enabled: bool = False, include_apis: bool | None = None, retention_policy: RetentionPolicy | None = None,
    ) -> None:
        if enabled is None:
            raise ValueError("enabled should not be None.")
        if enabled and include_apis is None:
            raise ValueError("include_apis should not be None.")
        self.version = "1.0"
        self.enabled = enabled
        self.include_apis = include_apis
        self.retention_policy = retention_policy if retention_policy else RetentionPolicy()


class CorsRule:
    """One CORS rule: origins, methods, preflight cache time, exposed and allowed headers."""

    def __init__(
        self, allowed_origins: list[str], allowed_methods: list[str], max_age_in_seconds: int = 0,
        exposed_headers: list[str] | None = None, allowed_headers: list[str] | None = None,
    ) -> None:
        for name, value in (
            ("allowed_origins", allowed_origins), ("allowed_methods", allowed_methods),
            ("max_age_in_seconds", max_age_in_seconds),
        ):
            if value is None:
                raise ValueError(f"{name} should not be None.")
        self.allowed_origins = allowed_origins if allowed_origins else []
        self.allowed_methods = allowed_methods if allowed_methods else []
        self.max_age_in_seconds = max_age_in_seconds
        self.exposed_headers = exposed_headers if exposed_headers else []
        self.allowed_headers = allowed_headers if allowed_headers else []


class ServiceProperties:
    """The Table service's ``logging``, ``hour_metrics``, ``minute_metrics`` and ``cors``."""

    logging: Logging | None = None
    hour_metrics: Metrics | None = None
    minute_metrics: Metrics | None = None
    cors: list[CorsRule] | None = None


class GeoReplication:
    """The secondary's ``status`` (live, bootstrap, unavailable) and ``last_sync_time``."""

    status: str
    last_sync_time: datetime | None


class ServiceStats:
    """Replication statistics: ``geo_replication``."""

    geo_replication: GeoReplication


def _retention(days: int | None) -> RetentionPolicy:
    return RetentionPolicy(enabled=True, days=days) if days is not None else RetentionPolicy()


def _days(policy: RetentionPolicy | None) -> int | None:
    return policy.days if policy is not None and policy.enabled else None


def _metrics(metrics: SdkMetrics) -> Metrics:
    legacy = Metrics()
    legacy.version, legacy.enabled = metrics.version, metrics.enabled
    legacy.include_apis = metrics.include_apis if metrics.enabled else None
    legacy.retention_policy = _retention(metrics.retention_days)
    return legacy


def from_sdk_properties(properties: SdkServiceProperties) -> ServiceProperties:
    """The old package's :class:`ServiceProperties` for tablesdk's."""
    legacy = ServiceProperties()
    if properties.logging is not None:
        logging = properties.logging
        legacy.logging = Logging(logging.delete, logging.read, logging.write, _retention(logging.retention_days))
        legacy.logging.version = logging.version
    if properties.hour_metrics is not None:
        legacy.hour_metrics = _metrics(properties.hour_metrics)
    if properties.minute_metrics is not None:
        legacy.minute_metrics = _metrics(properties.minute_metrics)
    if properties.cors is not None:
        legacy.cors = [
            CorsRule(list(rule.allowed_origins), list(rule.allowed_methods), rule.max_age_in_seconds,
                     list(rule.exposed_headers), list(rule.allowed_headers))
            for rule in properties.cors
        ]
    return legacy


def to_sdk_properties(
    logging: Logging | None, hour_metrics: Metrics | None, minute_metrics: Metrics | None, cors: list[CorsRule] | None,
) -> SdkServiceProperties:
    """tablesdk's :class:`~tablesdk.ServiceProperties` for the settings of ``set_table_service_properties``
    (a section left None keeps the service's current value)."""

    def metrics(value: Metrics | None) -> SdkMetrics | None:
        if value is None:
            return None
        return SdkMetrics(value.version, bool(value.enabled), value.include_apis, _days(value.retention_policy))

    sdk_logging = None
    if logging is not None:
        sdk_logging = SdkLogging(
            logging.version, bool(logging.delete), bool(logging.read), bool(logging.write),
            _days(logging.retention_policy),
        )
    sdk_cors = None
    if cors is not None:
        sdk_cors = [
            SdkCorsRule(
                list(rule.allowed_origins), list(rule.allowed_methods), list(rule.allowed_headers),
                list(rule.exposed_headers), rule.max_age_in_seconds,
            )
            for rule in cors
        ]
    return SdkServiceProperties(sdk_logging, metrics(hour_metrics), metrics(minute_metrics), sdk_cors)


def from_sdk_stats(stats: SdkServiceStats) -> ServiceStats:
    """The old package's :class:`ServiceStats` for tablesdk's."""
    geo: Any = GeoReplication()
    geo.status, geo.last_sync_time = stats.geo_replication_status, stats.last_sync_time
    legacy = ServiceStats()
    legacy.geo_replication = geo
    return legacy
