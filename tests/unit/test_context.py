"""TableServiceContext: tracking, MergeOption, SaveChanges modes and hooks, on a fake service."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator

import pytest
import responses

from tablesdk import (
    UnsavedChangesWarning,
    CloudStorageAccount,
    CloudTableClient,
    ConflictError,
    DataServiceRequestError,
    DynamicEntity,
    EntityDescriptor,
    EntityStates,
    MergeOption,
    PreconditionFailedError,
    ResourceNotFoundError,
    SaveChangesOptions,
    TableEntity,
    TableServiceContext,
    prop,
)

import tablesdk._unit_of_work._tracking as tracking_module

from fake_service import CONNECTION_STRING, FakeTableService, error_reply

T = "Blogs"


class Blog(TableEntity):
    Text: str
    Rating: int


@pytest.fixture
def service() -> Iterator[FakeTableService]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield FakeTableService(mock)


@pytest.fixture
def client(service: FakeTableService) -> Iterator[CloudTableClient]:
    with CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client() as c:
        yield c


@pytest.fixture
def ctx(client: CloudTableClient) -> TableServiceContext:
    return client.get_table_service_context()


def blog(rk: str = "Oct-29", text: str = "Hello", rating: int = 3, pk: str = "Channel9") -> Blog:
    return Blog(PartitionKey=pk, RowKey=rk, Text=text, Rating=rating)


@pytest.fixture(autouse=True)
def descriptors_change_only_through_their_methods(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here also checks that each write to a descriptor comes from tablesdk/_unit_of_work/_tracking.py
    (its methods, its identity map), never from a context or save plan setting a slot by hand."""
    home = tracking_module.__file__

    def guarded(descriptor: EntityDescriptor, name: str, value: object) -> None:
        writer = sys._getframe(1).f_code.co_filename
        assert writer == home, f"EntityDescriptor.{name} set in {writer}: call an EntityDescriptor method"
        object.__setattr__(descriptor, name, value)

    monkeypatch.setattr(EntityDescriptor, "__setattr__", guarded)


def last_headers(service: FakeTableService) -> dict[str, str]:
    return dict(service.requests[-1].headers)


# ------------------------------------------------------------------ tracking and state


class TestTracking:
    def test_add_then_save_becomes_unchanged_with_the_etag(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        entity = blog()
        ctx.add_object(T, entity)
        descriptor = ctx.get_entity_descriptor(entity)
        assert descriptor is not None and descriptor.state is EntityStates.ADDED and descriptor.etag is None
        response = ctx.save_changes()
        stored_etag = service.entities[(T, "Channel9", "Oct-29")][1]
        assert descriptor.state is EntityStates.UNCHANGED
        assert descriptor.etag == stored_etag == entity.etag
        assert [(r.status_code, r.etag, r.operation) for r in response] == [(204, stored_etag, "INSERT")]
        assert last_headers(service)["Prefer"] == "return-no-content"

    def test_identity_is_table_and_keys(self, ctx: TableServiceContext) -> None:
        ctx.add_object(T, blog())
        with pytest.raises(ValueError, match="different entity with the same identity"):
            ctx.attach_to(T, blog())
        ctx.attach_to("Other", blog())  # same keys, other table: a different identity
        assert sorted(d.identity for d in ctx.entities) == [("Blogs", "Channel9", "Oct-29"), ("Other", "Channel9", "Oct-29")]

    def test_attaching_the_same_object_twice_raises(self, ctx: TableServiceContext) -> None:
        entity = blog()
        ctx.attach_to(T, entity, etag="*")
        with pytest.raises(ValueError, match="already tracking this entity"):
            ctx.attach_to(T, entity, etag="*")

    def test_delete_of_an_added_entity_just_forgets_it(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        entity = blog()
        ctx.add_object(T, entity)
        ctx.delete_object(entity)
        assert ctx.get_entity_descriptor(entity) is None and ctx.entities == []
        assert list(ctx.save_changes()) == [] and service.requests == []

    def test_update_and_delete_need_tracking(self, ctx: TableServiceContext) -> None:
        with pytest.raises(ValueError, match="not tracking"):
            ctx.update_object(blog())
        with pytest.raises(ValueError, match="not tracking"):
            ctx.delete_object(blog())

    def test_detach(self, ctx: TableServiceContext) -> None:
        entity = blog()
        ctx.attach_to(T, entity, etag="*")
        assert ctx.detach(entity) is True and ctx.detach(entity) is False
        ctx.attach_to(T, blog())  # the identity is free again

    def test_deleted_entity_becomes_detached(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        etag = service.put(T, "Channel9", "Oct-29", Text="x", Rating=1)
        entity = ctx.get(T, "Channel9", "Oct-29", Blog)
        assert entity is not None and entity.etag == etag
        ctx.delete_object(entity)
        ctx.save_changes()
        assert last_headers(service)["If-Match"] == etag
        assert ctx.get_entity_descriptor(entity) is None and (T, "Channel9", "Oct-29") not in service.entities

    def test_changed_keys_of_a_tracked_entity_are_refused(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        service.put(T, "Channel9", "Oct-29", Text="x", Rating=1)
        entity = ctx.get(T, "Channel9", "Oct-29", Blog)
        assert entity is not None
        entity.RowKey = "Oct-30"
        ctx.update_object(entity)
        with pytest.raises(ValueError, match="keys of a tracked entity changed"):
            ctx.save_changes()
        assert len(service.requests) == 1  # only the read

    def test_update_of_an_entity_never_read_raises_before_sending(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        entity = blog()
        ctx.attach_to(T, entity)  # no etag known
        ctx.update_object(entity)
        with pytest.raises(ValueError, match="without an ETag"):
            ctx.save_changes()
        assert service.requests == []

    def test_validation_errors_stop_the_whole_save_before_any_request(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        ctx.add_object(T, blog("a"))
        bad = DynamicEntity(PartitionKey="p", RowKey="r", Body="x" * 40000)
        ctx.add_object(T, bad)
        with pytest.raises(ValueError, match="Body"):
            ctx.save_changes()
        assert service.requests == []


# ------------------------------------------------------------------ SaveChanges modes


class _CountingDescriptor(EntityDescriptor):
    """An EntityDescriptor that records which descriptors had their state read."""

    __slots__ = ()
    read: set[int] = set()

    @property  # type: ignore[override]
    def state(self) -> EntityStates:
        _CountingDescriptor.read.add(id(self))
        return EntityDescriptor.state.__get__(self)  # type: ignore[attr-defined, no-any-return]

    @state.setter
    def state(self, value: EntityStates) -> None:
        EntityDescriptor.state.__set__(self, value)  # type: ignore[attr-defined]


@pytest.mark.parametrize("options", [SaveChangesOptions.NONE, SaveChangesOptions.CONTINUE_ON_ERROR])
def test_a_save_looks_at_its_changes_not_at_every_tracked_entity(
    ctx: TableServiceContext, service: FakeTableService, options: SaveChangesOptions
) -> None:
    """A context holding 30,000 unchanged entities: saving one change reads the state of a few
    descriptors, not of all of them (a save costs what it sends, not what the context holds;
    BATCH plans its changes the same way, SavePlan.start)."""
    etag = service.put(T, "p", "r00007", Text="Hello", Rating=3)
    unchanged = [blog(f"r{n:05d}", pk="p") for n in range(30_000)]
    for entity in unchanged:
        ctx.attach_to(T, entity, etag)
    changed = blog("new", pk="p")
    ctx.add_object(T, changed)
    for descriptor in ctx.entities:
        object.__setattr__(descriptor, "__class__", _CountingDescriptor)
    _CountingDescriptor.read = set()
    ctx.save_changes(options)
    assert ctx.get_entity_descriptor(changed).state is EntityStates.UNCHANGED  # type: ignore[union-attr]
    assert _CountingDescriptor.read and len(_CountingDescriptor.read) <= 2
    unchanged[7].Rating = 9
    ctx.update_object(unchanged[7])
    _CountingDescriptor.read = set()
    ctx.save_changes(options)
    assert len(_CountingDescriptor.read) <= 2 and service.props(T, "p", "r00007")["Rating"] == 9


class TestSaveChangesModes:
    def test_none_stops_at_the_first_failure_and_resends_next_time(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        """The Azure Storage team's "Cop Out" example: a failed insert stays tracked and is re-sent."""
        service.put(T, "Action", "Cop Out")
        cop_out = blog("Cop Out", pk="Action")
        ctx.add_object(T, cop_out)
        later = blog("Law Abiding Citizen", pk="Action")
        ctx.add_object(T, later)
        with pytest.raises(DataServiceRequestError) as info:
            ctx.save_changes()
        outcome = info.value.response
        assert info.value.status_code == 409 and info.value.error_code == "EntityAlreadyExists"
        assert [(r.sent, r.status_code) for r in outcome] == [(True, 409), (False, None)]
        assert isinstance(outcome[0].error, ConflictError)
        assert ctx.get_entity_descriptor(cop_out).state is EntityStates.ADDED  # type: ignore[union-attr]
        assert ctx.get_entity_descriptor(later).state is EntityStates.ADDED  # type: ignore[union-attr]
        with pytest.raises(DataServiceRequestError):
            ctx.save_changes()  # "Cop Out" is issued again and fails again
        assert service.methods() == ["POST Blogs", "POST Blogs"]  # "Cop Out" twice; the second never sent
        assert (T, "Action", "Law Abiding Citizen") not in service.entities

    def test_continue_on_error_sends_everything_and_reports_every_failure(
        self, ctx: TableServiceContext, service: FakeTableService
    ) -> None:
        service.put(T, "p", "dup1")
        service.put(T, "p", "dup2")
        for rk in ("dup1", "new1", "dup2", "new2"):
            ctx.add_object(T, blog(rk, pk="p"))
        with pytest.raises(DataServiceRequestError) as info:
            ctx.save_changes(SaveChangesOptions.CONTINUE_ON_ERROR)
        outcome = info.value.response
        assert [r.status_code for r in outcome] == [409, 204, 409, 204]
        assert [r.succeeded for r in outcome] == [False, True, False, True]
        assert len(outcome.errors) == 2 and "2 of 4 changes failed" in str(info.value)
        states = [d.state for d in sorted(ctx.entities, key=lambda d: d.identity)]
        assert states == [EntityStates.ADDED, EntityStates.ADDED, EntityStates.UNCHANGED, EntityStates.UNCHANGED]

    def test_updates_merge_by_default_and_replace_with_replace_on_update(
        self, ctx: TableServiceContext, service: FakeTableService
    ) -> None:
        service.put(T, "Channel9", "Oct-29", Text="x", Rating=1, Extra="kept by merge")
        entity = ctx.get(T, "Channel9", "Oct-29", DynamicEntity)
        assert entity is not None
        del entity["Extra"]
        entity["Rating"] = 2
        ctx.update_object(entity)
        ctx.save_changes()
        assert service.requests[-1].method == "MERGE"
        assert service.props(T, "Channel9", "Oct-29")["Extra"] == "kept by merge"
        ctx.update_object(entity)
        ctx.save_changes(SaveChangesOptions.REPLACE_ON_UPDATE | SaveChangesOptions.CONTINUE_ON_ERROR)
        assert service.requests[-1].method == "PUT"
        assert "Extra" not in service.props(T, "Channel9", "Oct-29")

    def test_changes_go_out_in_the_order_they_were_made(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        service.put(T, "p", "old", Text="x", Rating=1)
        old = ctx.get(T, "p", "old", Blog)
        assert old is not None
        service.requests.clear()
        ctx.add_object(T, blog("b", pk="p"))
        ctx.delete_object(old)
        ctx.add_object(T, blog("a", pk="p"))
        ctx.save_changes()
        assert service.methods() == ["POST Blogs", "DELETE Blogs(PartitionKey='p',RowKey='old')", "POST Blogs"]

    def test_batch_with_continue_on_error_is_refused_before_any_request(
        self, ctx: TableServiceContext, service: FakeTableService
    ) -> None:
        ctx.add_object(T, blog())
        with pytest.raises(ValueError, match="BATCH cannot be combined with CONTINUE_ON_ERROR"):
            ctx.save_changes(SaveChangesOptions.BATCH | SaveChangesOptions.CONTINUE_ON_ERROR)
        assert service.requests == []

    def test_if_match_star_for_attached_entities(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        service.put(T, "Channel9", "Oct-29", Text="old", Rating=1)
        entity = blog(text="blind")
        ctx.attach_to(T, entity, etag="*")
        ctx.update_object(entity)
        ctx.save_changes()
        assert last_headers(service)["If-Match"] == "*"
        assert service.props(T, "Channel9", "Oct-29")["Text"] == "blind"
        new_etag = entity.etag
        assert new_etag == service.entities[(T, "Channel9", "Oct-29")][1]  # the response's ETag replaced "*"
        ctx.delete_object(entity)
        ctx.save_changes()
        assert last_headers(service)["If-Match"] == new_etag
        assert (T, "Channel9", "Oct-29") not in service.entities

    def test_unconditional_delete_with_attach_to_star(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        service.put(T, "Action", "Cop Out")
        existing = blog("Cop Out", pk="Action")
        ctx.attach_to(T, existing, etag="*")
        ctx.delete_object(existing)
        ctx.save_changes()
        assert last_headers(service)["If-Match"] == "*" and service.entities == {}

    def test_upserts(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        service.put(T, "p", "r", Text="old", Rating=1, Extra=1)
        ctx.upsert_object(T, DynamicEntity(PartitionKey="p", RowKey="r", Text="merged"))
        ctx.upsert_object(T, DynamicEntity(PartitionKey="p", RowKey="new", Text="created"), replace=True)
        ctx.save_changes()
        assert [r.method for r in service.requests] == ["MERGE", "PUT"]
        assert all("If-Match" not in r.headers for r in service.requests)
        assert service.props(T, "p", "r") == {"Text": "merged", "Rating": 1, "Extra": 1}
        assert service.props(T, "p", "new") == {"Text": "created"}

    def test_save_changes_with_retries_retries_and_save_changes_does_not(
        self, client: CloudTableClient, service: FakeTableService
    ) -> None:
        from tablesdk import LinearRetry

        ctx = client.get_table_service_context()
        ctx.add_object(T, blog("a"))
        service.fail_next = [error_reply(503, "ServerBusy", "busy")]
        with pytest.raises(DataServiceRequestError) as info:
            ctx.save_changes()
        assert info.value.status_code == 503
        service.fail_next = [error_reply(503, "ServerBusy", "busy")]
        ctx.save_changes_with_retries(retry_policy=LinearRetry(2, 0))
        assert [r.method for r in service.requests] == ["POST", "POST", "POST"]
        assert ctx.entities[0].state is EntityStates.UNCHANGED


# ------------------------------------------------------------------ optimistic concurrency


def test_optimistic_concurrency_flow_and_preserve_changes_recovery(
    client: CloudTableClient, service: FakeTableService
) -> None:
    service.put(T, "Channel9", "Oct-29", Text="Hello", Rating=3)
    first, second = client.get_table_service_context(), client.get_table_service_context()
    mine, theirs = first.get(T, "Channel9", "Oct-29", Blog), second.get(T, "Channel9", "Oct-29", Blog)
    assert mine is not None and theirs is not None
    mine.Rating = 4
    first.update_object(mine)
    first.save_changes()
    theirs.Text = "Hi there"
    second.update_object(theirs)
    with pytest.raises(DataServiceRequestError) as info:
        second.save_changes()
    assert info.value.status_code == 412
    assert isinstance(info.value.response[0].error, PreconditionFailedError)
    assert second.get_entity_descriptor(theirs).state is EntityStates.MODIFIED  # type: ignore[union-attr]
    second.merge_option = MergeOption.PRESERVE_CHANGES
    again = second.get(T, "Channel9", "Oct-29", Blog)
    assert again is theirs and theirs.Text == "Hi there" and theirs.Rating == 4
    second.save_changes()
    assert service.props(T, "Channel9", "Oct-29") == {"Text": "Hi there", "Rating": 4}


# ------------------------------------------------------------------ MergeOption


class TestMergeOption:
    """One scenario, four options: each assertion set fails under each of the other three."""

    @staticmethod
    def scenario(client: CloudTableClient, service: FakeTableService, option: MergeOption) -> tuple[Blog, Blog, TableServiceContext]:
        service.put(T, "p", "r", Text="v1", Rating=1)
        ctx = client.get_table_service_context(merge_option=option)
        if option is MergeOption.NO_TRACKING:
            tracked = blog("r", "local", 1, pk="p")
            ctx.attach_to(T, tracked, etag="stale")
        else:
            ctx.merge_option = MergeOption.APPEND_ONLY
            got = ctx.get(T, "p", "r", Blog)
            assert got is not None
            tracked = got
            ctx.merge_option = option
        tracked.Text = "local"  # a local change the context knows about
        ctx.update_object(tracked)
        service.put(T, "p", "r", Text="v2", Rating=2)  # someone else writes
        result = ctx.get(T, "p", "r", Blog)
        assert result is not None
        return tracked, result, ctx

    def test_append_only(self, client: CloudTableClient, service: FakeTableService) -> None:
        tracked, result, ctx = self.scenario(client, service, MergeOption.APPEND_ONLY)
        old_etag = ctx.get_entity_descriptor(tracked).etag  # type: ignore[union-attr]
        assert result is tracked
        assert (tracked.Text, tracked.Rating) == ("local", 1)
        assert old_etag != service.entities[(T, "p", "r")][1]  # etag left stale
        assert ctx.get_entity_descriptor(tracked).state is EntityStates.MODIFIED  # type: ignore[union-attr]

    def test_overwrite_changes(self, client: CloudTableClient, service: FakeTableService) -> None:
        tracked, result, ctx = self.scenario(client, service, MergeOption.OVERWRITE_CHANGES)
        descriptor = ctx.get_entity_descriptor(tracked)
        assert result is tracked and (tracked.Text, tracked.Rating) == ("v2", 2)
        assert descriptor is not None and descriptor.etag == service.entities[(T, "p", "r")][1]
        assert descriptor.state is EntityStates.UNCHANGED

    def test_preserve_changes(self, client: CloudTableClient, service: FakeTableService) -> None:
        tracked, result, ctx = self.scenario(client, service, MergeOption.PRESERVE_CHANGES)
        descriptor = ctx.get_entity_descriptor(tracked)
        assert result is tracked
        assert (tracked.Text, tracked.Rating) == ("local", 2)  # local change kept, the rest refreshed
        assert descriptor is not None and descriptor.etag == service.entities[(T, "p", "r")][1]
        assert descriptor.state is EntityStates.MODIFIED

    def test_no_tracking(self, client: CloudTableClient, service: FakeTableService) -> None:
        tracked, result, ctx = self.scenario(client, service, MergeOption.NO_TRACKING)
        assert result is not tracked and (result.Text, result.Rating) == ("v2", 2)
        assert ctx.get_entity_descriptor(result) is None
        assert ctx.get_entity_descriptor(tracked).etag == "stale"  # type: ignore[union-attr]
        assert len(ctx.entities) == 1

    def test_no_tracking_then_attach_to_updates(self, client: CloudTableClient, service: FakeTableService) -> None:
        service.put(T, "p", "r", Text="v1", Rating=1)
        ctx = client.get_table_service_context(merge_option=MergeOption.NO_TRACKING)
        entity = ctx.get(T, "p", "r", Blog)
        assert entity is not None and ctx.entities == []
        with pytest.raises(ValueError, match="not tracking"):
            ctx.update_object(entity)
        read_etag = entity.etag
        assert read_etag == service.entities[(T, "p", "r")][1]
        ctx.attach_to(T, entity)  # uses entity.etag read by the query
        entity.Rating = 9
        ctx.update_object(entity)
        ctx.save_changes()
        assert last_headers(service)["If-Match"] == read_etag
        assert service.props(T, "p", "r")["Rating"] == 9


# ------------------------------------------------------------------ queries, hooks, options


class TestQueriesAndHooks:
    def test_point_query_for_a_missing_entity(self, ctx: TableServiceContext) -> None:
        with pytest.raises(ResourceNotFoundError):
            ctx.get(T, "p", "missing")
        assert ctx.get_or_none(T, "p", "missing") is None
        assert ctx.get_or_none(T, "p", "missing", Blog) is None
        ctx.ignore_resource_not_found = True
        with pytest.warns(DeprecationWarning, match="get_or_none"):
            assert ctx.get(T, "p", "missing") is None
        assert list(ctx.create_query(T).where((prop("PartitionKey") == "p") & (prop("RowKey") == "missing"))) == []

    def test_query_results_are_tracked_once(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        service.put(T, "p", "a", Text="x", Rating=1)
        service.put(T, "p", "b", Text="y", Rating=2)
        first = list(ctx.create_query(T, Blog).where(Blog.PartitionKey == "p"))
        second = list(ctx.create_query(T, Blog).where(Blog.PartitionKey == "p"))
        assert [e.RowKey for e in first] == ["a", "b"]
        assert all(a is b for a, b in zip(first, second)) and len(ctx.entities) == 2

    def test_sending_request_hook_can_add_headers(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        seen = []

        def hook(request: object) -> None:
            request.headers["x-ms-custom"] = "yes"  # type: ignore[attr-defined]
            seen.append(request.method)  # type: ignore[attr-defined]

        ctx.sending_request.append(hook)
        ctx.add_object(T, blog())
        ctx.save_changes()
        ctx.get(T, "Channel9", "Oct-29")
        assert seen == ["POST", "GET"]
        assert all(r.headers["x-ms-custom"] == "yes" for r in service.requests)

    def test_writing_and_reading_entity_hooks(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        ctx.writing_entity.append(lambda entity, payload: payload.values.__setitem__("Audit", "ctx"))
        read: list[str] = []
        ctx.reading_entity.append(lambda entity, payload: read.append(payload.values["RowKey"]))
        ctx.add_object(T, blog())
        ctx.save_changes()
        assert service.props(T, "Channel9", "Oct-29")["Audit"] == "ctx"
        other = ctx.client.get_table_service_context()
        other.reading_entity.append(lambda entity, payload: read.append(payload.values["RowKey"]))
        assert other.get(T, "Channel9", "Oct-29") is not None and read == ["Oct-29"]

    def test_resolve_type_materialises_heterogeneous_entities(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        class Photo(TableEntity):
            Url: str

        service.put(T, "joe", "1_Blog", Text="post", Rating=1, Kind="Blog")
        service.put(T, "joe", "2_Photo", Url="http://x", Kind="Photo")
        ctx.resolve_type = lambda table, pk, rk, props: {"Blog": Blog, "Photo": Photo}[props["Kind"]]
        results = list(ctx.create_query(T).where(prop("PartitionKey") == "joe"))
        assert [type(r) for r in results] == [Blog, Photo]
        assert results[1].Url == "http://x" and results[1].extra_properties == {"Kind": "Photo"}

    def test_second_thread_gets_a_clear_error(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        entered, release = threading.Event(), threading.Event()
        errors: list[BaseException] = []

        def slow_hook(request: object) -> None:
            entered.set()
            release.wait(5)

        ctx.sending_request.append(slow_hook)
        ctx.add_object(T, blog())
        worker = threading.Thread(target=ctx.save_changes)
        worker.start()
        assert entered.wait(5)
        try:
            ctx.save_changes()
        except RuntimeError as exc:
            errors.append(exc)
        finally:
            release.set()
            worker.join(5)
        assert errors and "not thread-safe" in str(errors[0])
        assert "running save_changes" in str(errors[0])

    def test_second_thread_cannot_change_the_tracked_set_during_a_save(
        self, ctx: TableServiceContext, service: FakeTableService
    ) -> None:
        entered, release = threading.Event(), threading.Event()
        ctx.sending_request.append(lambda request: (entered.set(), release.wait(5)))
        tracked = blog()
        ctx.add_object(T, tracked)
        worker = threading.Thread(target=ctx.save_changes)
        worker.start()
        assert entered.wait(5)
        refused: list[str] = []
        try:
            for attempt in (lambda: ctx.add_object(T, blog("Nov-01")), lambda: ctx.update_object(tracked),
                            lambda: ctx.delete_object(tracked), lambda: ctx.detach(tracked)):
                try:
                    attempt()
                except RuntimeError as exc:
                    refused.append(str(exc))
        finally:
            release.set()
            worker.join(5)
        assert len(refused) == 4
        assert all("another thread is running save_changes" in text for text in refused)
        assert [text.split("so ")[1].split(" was")[0] for text in refused] == [
            "add_object", "update_object", "delete_object", "detach"]
        ctx.add_object(T, blog("Nov-02"))          # once the save is over, the same thread may go on

    def test_begin_save_changes_returns_a_future(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        ctx.add_object(T, blog())
        future = ctx.begin_save_changes()
        assert len(future.result(timeout=10)) == 1 and (T, "Channel9", "Oct-29") in service.entities
        service.put(T, "p", "x", Text="t", Rating=1)
        rows = ctx.begin_execute(ctx.create_query(T, Blog).where(Blog.PartitionKey == "p")).result(timeout=10)
        assert [r.RowKey for r in rows] == ["x"]

    def test_json_insert_body_is_typed(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        ctx.add_object(T, blog())
        ctx.save_changes()
        body = json.loads(service.requests[-1].body or b"")
        assert body["PartitionKey"] == "Channel9" and body["Rating"] == 3 and "Timestamp" not in body


def test_operation_context_records_every_attempt_of_a_save(ctx: TableServiceContext, service: FakeTableService) -> None:
    from tablesdk import LinearRetry, OperationContext

    ctx.add_object(T, blog("a"))
    ctx.add_object(T, blog("b"))
    service.fail_next = [error_reply(503, "ServerBusy", "busy")]
    recorder = OperationContext(client_request_id="save-42")
    ctx.save_changes_with_retries(retry_policy=LinearRetry(2, 0), operation_context=recorder)
    assert [a.status for a in recorder.attempts] == [503, 204, 204]
    assert all(r.headers["x-ms-client-request-id"] == "save-42" for r in service.requests)
    listing = OperationContext()
    ctx.client.get_entity(T, "Channel9", "a", operation_context=listing)
    assert [a.status for a in listing.attempts] == [200]


# ------------------------------------------------------------------ projections and untyped reads


class TestProjectionsNeverDropProperties:
    @pytest.mark.parametrize("option", [MergeOption.PRESERVE_CHANGES, MergeOption.OVERWRITE_CHANGES])
    def test_a_projected_requery_refreshes_only_the_selected_properties(
        self, client: CloudTableClient, service: FakeTableService, option: MergeOption
    ) -> None:
        service.put(T, "p", "d", Text="hello", Rating=5)
        ctx = client.get_table_service_context(merge_option=option)
        entity = ctx.get(T, "p", "d")
        assert entity is not None
        entity["Text"] = "local"
        ctx.update_object(entity)
        service.put(T, "p", "d", Text="theirs", Rating=6)
        selected = ctx.create_query(T).where(prop("PartitionKey") == "p").select("Text")
        service.requests.clear()
        original = service._query

        def projected(table: str, params: dict[str, list[str]]) -> tuple[int, dict[str, str], str]:
            status, headers, body = original(table, params)
            rows = json.loads(body)["value"]
            keep = {"odata.etag", "Timestamp", "PartitionKey", "RowKey", "Text"}
            return status, headers, json.dumps({"value": [{k: v for k, v in r.items() if k in keep} for r in rows]})

        service._query = projected  # type: ignore[method-assign]
        old_etag = entity.etag
        list(selected)
        expected_text = "theirs" if option is MergeOption.OVERWRITE_CHANGES else "local"
        assert dict(entity) == {"Text": expected_text, "Rating": 5}  # Rating neither dropped nor blanked
        assert entity.etag == old_etag  # the projection does not vouch for the stale Rating
        ctx.update_object(entity)
        with pytest.raises(DataServiceRequestError) as info:
            ctx.save_changes()
        assert info.value.status_code == 412
        assert service.props(T, "p", "d") == {"Text": "theirs", "Rating": 6}  # the other writer's change kept

    def test_replacing_an_entity_known_only_through_a_projection_is_refused(
        self, ctx: TableServiceContext, service: FakeTableService
    ) -> None:
        service.put(T, "p", "d", Text="hello", Rating=5)
        (entity,) = list(ctx.create_query(T).where(prop("PartitionKey") == "p").select("Text"))
        ctx.update_object(entity)
        service.requests.clear()
        with pytest.raises(ValueError, match="projection"):
            ctx.save_changes(SaveChangesOptions.REPLACE_ON_UPDATE)
        assert service.requests == []
        ctx.save_changes()  # a merge is safe: it only writes what was read


class TestUntypedReads:
    def test_untyped_values_are_not_written_back_as_strings(self, service: FakeTableService) -> None:
        service.put(T, "p", "r", Big="5", When="2020-01-01T00:00:00.0000000Z", Text="x")
        client = CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client(json_metadata="nometadata")
        ctx = client.get_table_service_context()
        entity = ctx.get(T, "p", "r")
        assert entity is not None
        entity["Text"] = "changed"
        ctx.update_object(entity)
        before = len(service.requests)
        with pytest.raises(ValueError, match=r"\['Big', 'When'\].*nometadata"):
            ctx.save_changes()
        assert len(service.requests) == before
        from tablesdk import EdmType, EntityProperty

        entity["Big"] = EntityProperty(5, EdmType.INT64)
        del entity["When"]
        ctx.save_changes()
        body = json.loads(service.requests[-1].body or b"")
        assert body["Big"] == "5" and body["Big@odata.type"] == "Edm.Int64"

    def test_declared_properties_are_typed_by_the_class(self, service: FakeTableService) -> None:
        service.put(T, "p", "r", Text="x", Rating=3)
        client = CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client(json_metadata="nometadata")
        ctx = client.get_table_service_context()
        entity = ctx.get(T, "p", "r", Blog)
        assert entity is not None
        entity.Rating = 4
        ctx.update_object(entity)
        ctx.save_changes()
        assert service.props(T, "p", "r") == {"Text": "x", "Rating": 4}


def test_undeclared_attribute_on_a_declared_entity_is_refused() -> None:
    entity = blog()
    with pytest.raises(AttributeError, match="Ratng"):
        entity.Ratng = 4  # type: ignore[attr-defined]
    entity.extra_properties["Ratng"] = 4  # the documented place for undeclared properties
    entity._cache = "private state is fine"  # type: ignore[attr-defined]


def test_a_single_untyped_property_is_still_caught(service: FakeTableService) -> None:
    service.put(T, "p", "r", Big="5")
    client = CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client(json_metadata="nometadata")
    ctx = client.get_table_service_context()
    entity = ctx.get(T, "p", "r")
    assert entity is not None
    ctx.update_object(entity)
    with pytest.raises(ValueError, match=r"\['Big'\]"):
        ctx.save_changes()


class TestContextManager:
    def test_with_block_returns_the_context_and_is_quiet_when_everything_was_saved(
        self, client: CloudTableClient, service: FakeTableService, recwarn: pytest.WarningsRecorder
    ) -> None:
        with client.get_table_service_context() as ctx:
            assert isinstance(ctx, TableServiceContext)
            ctx.add_object(T, blog())
            ctx.save_changes()
        assert not [w for w in recwarn if issubclass(w.category, UnsavedChangesWarning)]

    def test_leaving_with_pending_changes_warns_with_their_count(self, client: CloudTableClient) -> None:
        with pytest.warns(UnsavedChangesWarning, match="2 pending changes") as caught:
            with client.get_table_service_context() as ctx:
                ctx.add_object(T, blog("a"))
                ctx.add_object(T, blog("b"))
        assert caught[0].filename == __file__      # points at the user's with block

    def test_one_pending_change_is_counted_in_the_singular(self, client: CloudTableClient) -> None:
        with pytest.warns(UnsavedChangesWarning, match="1 pending change that was never saved"):
            with client.get_table_service_context() as ctx:
                ctx.add_object(T, blog("a"))

    def test_an_exception_leaving_the_block_is_not_hidden_by_a_warning(
        self, client: CloudTableClient, recwarn: pytest.WarningsRecorder
    ) -> None:
        with pytest.raises(KeyError):
            with client.get_table_service_context() as ctx:
                ctx.add_object(T, blog())
                raise KeyError("boom")
        assert not [w for w in recwarn if issubclass(w.category, UnsavedChangesWarning)]


class TestErrorText:
    def test_a_failed_save_names_the_request_id_once(self, ctx: TableServiceContext, service: FakeTableService) -> None:
        status, headers, body = error_reply(409, "EntityAlreadyExists", "The specified entity already exists.")
        service.fail_next = [(status, {**headers, "x-ms-request-id": "req-123"}, body)]
        ctx.add_object(T, blog())
        with pytest.raises(DataServiceRequestError) as info:
            ctx.save_changes()
        assert info.value.request_id == "req-123"
        assert str(info.value).count("req-123") == 1

    def test_authentication_failed_suggests_the_key_and_the_clock(
        self, ctx: TableServiceContext, service: FakeTableService
    ) -> None:
        service.fail_next = [error_reply(403, "AuthenticationFailed", "Server failed to authenticate the request.")]
        ctx.add_object(T, blog())
        with pytest.raises(DataServiceRequestError) as info:
            ctx.save_changes()
        text = str(info.value)
        assert "account key" in text and "clock" in text
        assert text.count("clock") == 1

