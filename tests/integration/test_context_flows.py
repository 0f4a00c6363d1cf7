"""The context's flows from the white paper and the Azure Storage team's blog against a real service."""

from __future__ import annotations

import pytest

from tablesdk import (
    CloudTableClient,
    DataServiceRequestError,
    EntityStates,
    MergeOption,
    PreconditionFailedError,
    SaveChangesOptions,
    TableEntity,
)

pytestmark = pytest.mark.integration


class Movie(TableEntity):
    ReleaseYear: int
    Rating: float
    Language: str
    Favorite: bool


def movie(title: str, rating: float = 4.5) -> Movie:
    return Movie(PartitionKey="Action", RowKey=title, ReleaseYear=2010, Rating=rating, Language="English", Favorite=False)


def test_cop_out_failed_insert_is_resent(client: CloudTableClient, table: str) -> None:
    client.insert_entity(table, movie("Cop Out"))
    ctx = client.get_table_service_context()
    ctx.add_object(table, movie("Cop Out"))
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes_with_retries()
    assert info.value.status_code == 409 and info.value.error_code == "EntityAlreadyExists"
    ctx.add_object(table, movie("Law Abiding Citizen"))
    with pytest.raises(DataServiceRequestError) as again:
        ctx.save_changes_with_retries()
    assert [r.sent for r in again.value.response] == [True, False]
    fresh = client.get_table_service_context()
    fresh.add_object(table, movie("Law Abiding Citizen"))
    fresh.save_changes()
    titles = [m.RowKey for m in client.create_query(table, Movie)]
    assert titles == ["Cop Out", "Law Abiding Citizen"]


def test_optimistic_concurrency_and_recovery(client: CloudTableClient, table: str) -> None:
    client.insert_entity(table, movie("Inception", 4.0))
    one, two = client.get_table_service_context(), client.get_table_service_context()
    a, b = one.get(table, "Action", "Inception", Movie), two.get(table, "Action", "Inception", Movie)
    assert a is not None and b is not None
    a.Rating = 5.0
    one.update_object(a)
    one.save_changes()
    b.Favorite = True
    two.update_object(b)
    with pytest.raises(DataServiceRequestError) as info:
        two.save_changes()
    assert isinstance(info.value.response[0].error, PreconditionFailedError)
    two.merge_option = MergeOption.PRESERVE_CHANGES
    two.get(table, "Action", "Inception", Movie)
    two.save_changes()
    stored = client.get_entity(table, "Action", "Inception", Movie)
    assert (stored.Rating, stored.Favorite) == (5.0, True)


def test_unconditional_update_and_delete(client: CloudTableClient, table: str) -> None:
    client.insert_entity(table, movie("Cop Out"))
    ctx = client.get_table_service_context()
    blind = movie("Cop Out", 1.0)
    ctx.attach_to(table, blind, etag="*")
    ctx.update_object(blind)
    ctx.save_changes(SaveChangesOptions.REPLACE_ON_UPDATE)
    assert client.get_entity(table, "Action", "Cop Out", Movie).Rating == 1.0
    other = client.get_table_service_context()
    gone = movie("Cop Out")
    other.attach_to(table, gone, etag="*")
    other.delete_object(gone)
    other.save_changes()
    assert list(client.create_query(table, Movie)) == []


def test_no_tracking_query_then_attach_to(client: CloudTableClient, table: str) -> None:
    client.insert_entity(table, movie("Heat"))
    ctx = client.get_table_service_context(merge_option=MergeOption.NO_TRACKING)
    found = list(ctx.create_query(table, Movie))
    assert len(found) == 1 and ctx.entities == []
    ctx.attach_to(table, found[0])
    found[0].Favorite = True
    ctx.update_object(found[0])
    ctx.save_changes()
    assert client.get_entity(table, "Action", "Heat", Movie).Favorite is True


def test_batch_save_is_all_or_nothing(client: CloudTableClient, table: str) -> None:
    client.insert_entity(table, movie("Exists"))
    ctx = client.get_table_service_context()
    new = [movie(f"New{i}") for i in range(3)]
    for m in new:
        ctx.add_object(table, m)
    ctx.add_object(table, movie("Exists"))
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes(SaveChangesOptions.BATCH)
    assert info.value.response.failed_index == 3 and info.value.status_code == 409
    assert all(d.state is EntityStates.ADDED for d in ctx.entities)
    assert [m.RowKey for m in client.create_query(table, Movie)] == ["Exists"]
    ctx.detach(ctx.entities[-1].entity)
    response = ctx.save_changes(SaveChangesOptions.BATCH)
    assert response.is_batch and [r.status_code for r in response] == [204, 204, 204]
    assert all(d.state is EntityStates.UNCHANGED and d.etag for d in ctx.entities)
    for m in new:
        m.Rating = 1.0
        ctx.update_object(m)
    ctx.delete_object(new[0])
    ctx.save_changes(SaveChangesOptions.BATCH)
    assert [(m.RowKey, m.Rating) for m in client.create_query(table, Movie)] == [
        ("Exists", 4.5), ("New1", 1.0), ("New2", 1.0)
    ]


def test_a_projected_requery_keeps_unselected_properties_and_the_old_etag(client: CloudTableClient, table: str) -> None:
    client.insert_entity(table, movie("Heat", 4.0))
    ctx = client.get_table_service_context(merge_option=MergeOption.PRESERVE_CHANGES)
    heat = ctx.get(table, "Action", "Heat", Movie)
    assert heat is not None
    read_etag = heat.etag
    heat.Favorite = True
    ctx.update_object(heat)
    list(ctx.create_query(table, Movie).select("Language"))
    assert (heat.Rating, heat.ReleaseYear, heat.Favorite, heat.etag) == (4.0, 2010, True, read_etag)
    with pytest.raises(ValueError, match="projection"):
        fresh = client.get_table_service_context()
        (partial,) = list(fresh.create_query(table, Movie).select("Language"))
        fresh.update_object(partial)
        fresh.save_changes(SaveChangesOptions.REPLACE_ON_UPDATE)
    ctx.save_changes()
    stored = client.get_entity(table, "Action", "Heat", Movie)
    assert (stored.Rating, stored.ReleaseYear, stored.Favorite) == (4.0, 2010, True)
