"""The table of EDM types (tablesdk._entities._edm_specs) is the one place a type is described.

Each EdmType has exactly one spec with every field filled; every per-type table of the
codecs, the entity layer and the filter builder is built from the specs and agrees with
them; and each spec's fast readers and writers do what the general conversions do.
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime, timezone
from typing import Any

import pytest

from tablesdk._entities import _edm, _entity_write, _model_annotations
from tablesdk._entities._edm import (
    EdmDateTime,
    EdmType,
    EntityPayload,
    from_atom_text,
    from_json_value,
    infer_edm_type,
    to_atom_text,
    to_filter_literal,
    to_json_value,
)
from tablesdk._entities._edm_specs import EDM_SPECS, EdmTypeSpec, text_as_is
from tablesdk._entities._filter import _order_key, prop
from tablesdk._formats import atom as atom_module, json as json_module, json_write

UTC = timezone.utc

#: A value of each type as a client sends it and the service returns it. A type added to
#: the table must be added here too (test_every_type_has_a_sample says so).
SAMPLES: dict[EdmType, Any] = {
    EdmType.STRING: "it's \u00e9t\u00e9 \U0001f600",
    EdmType.INT32: -2_000_000_000,
    EdmType.INT64: 2**62 + 5,
    EdmType.DOUBLE: 2.5,
    EdmType.BOOLEAN: True,
    EdmType.DATETIME: EdmDateTime(2024, 1, 2, 3, 4, 5, 123456, UTC, ticks_remainder=7),
    EdmType.GUID: uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833"),
    EdmType.BINARY: b"\x00\x01\xfe\xff",
}


#: The fields of a spec that are data; every other one is a function.
_DATA_FIELDS = {
    "edm_type", "python_class", "python_name", "declared_by", "sent_from", "size", "json_annotated", "json_bare_kinds",
}


def test_every_type_has_exactly_one_spec_with_every_field_filled() -> None:
    assert list(EDM_SPECS) == list(EdmType)
    assert [spec.edm_type for spec in EDM_SPECS.values()] == list(EdmType)
    for edm_type, spec in EDM_SPECS.items():
        assert type(spec) is EdmTypeSpec
        for name in EdmTypeSpec.__slots__:  # every field (a plain class with slots: start-up)
            value = getattr(spec, name)
            assert value is not None, f"{edm_type.value}: {name} is not filled"
            if name not in _DATA_FIELDS:
                assert callable(value), f"{edm_type.value}: {name} is not callable"
        assert isinstance(spec.python_class, type) and spec.python_name.endswith(spec.python_class.__name__)
        assert isinstance(spec.size, int) and spec.size > 0
        for classes in (spec.declared_by, spec.sent_from, spec.json_bare_kinds):
            assert isinstance(classes, tuple) and all(isinstance(cls, type) for cls in classes)


def test_every_type_has_a_sample() -> None:
    assert set(SAMPLES) == set(EdmType)


def test_a_class_is_sent_as_one_type_and_declares_one_type() -> None:
    sent = [cls for spec in EDM_SPECS.values() for cls in spec.sent_from]
    declared = [hint for spec in EDM_SPECS.values() for hint in spec.declared_by]
    bare = [kind for spec in EDM_SPECS.values() for kind in spec.json_bare_kinds]
    assert len(sent) == len(set(sent)) and len(declared) == len(set(declared)) and len(bare) == len(set(bare))


# ------------------------------------------------------------------ derived tables


def test_the_codecs_tables_are_built_from_the_specs() -> None:
    assert json_module._BY_NAME == {t.value: (t, spec.json_reader) for t, spec in EDM_SPECS.items()}
    assert json_module._COLUMN_READERS == {t.value: spec.json_column_reader for t, spec in EDM_SPECS.items()}
    assert json_module._PLAIN_TYPES == {k: t for t, spec in EDM_SPECS.items() for k in spec.json_bare_kinds}
    assert json_write._WRITERS == {t: spec.to_json for t, spec in EDM_SPECS.items() if spec.json_annotated}
    assert json_write._BARE == {t: t for t, spec in EDM_SPECS.items() if not spec.json_annotated}
    assert atom_module._BY_NAME == {
        t.value: (t, None if spec.atom_reader is text_as_is else spec.atom_reader) for t, spec in EDM_SPECS.items()
    }


def test_the_entity_tables_are_built_from_the_specs() -> None:
    assert _entity_write._SIZES == {t: spec.size for t, spec in EDM_SPECS.items()}
    assert _entity_write._PLANNED_SIZES == _entity_write._SIZES
    assert _entity_write._MEASURES == {t: spec.measure for t, spec in EDM_SPECS.items()}
    assert _entity_write._PYTHON_NAMES == {t: spec.python_name for t, spec in EDM_SPECS.items()}
    assert _model_annotations._ANNOTATION_TYPES == {h: t for t, spec in EDM_SPECS.items() for h in spec.declared_by}
    assert _entity_write._EXACT_TYPES == {
        cls: t for t, spec in EDM_SPECS.items() for cls in spec.sent_from if cls is not int
    }
    assert _edm._SENT_AS == {cls: t for t, spec in EDM_SPECS.items() for cls in spec.sent_from}


@pytest.mark.parametrize("edm_type", list(EdmType))
def test_each_spec_is_what_the_conversions_use(edm_type: EdmType) -> None:
    spec, value = EDM_SPECS[edm_type], SAMPLES[edm_type]
    assert to_atom_text(value, edm_type) == spec.to_atom(value)
    assert to_json_value(value, edm_type) == (spec.to_json(value), spec.json_annotated)
    assert to_filter_literal(value, edm_type) == spec.filter_literal(value, "value")
    assert infer_edm_type(value) is (edm_type if spec.sent_from else EdmType.INT64)
    assert _order_key(value, edm_type) == spec.order_key(value)


# ------------------------------------------------------------------ fast paths agree with the general ones


def _same(got: Any, want: Any) -> None:
    assert type(got) is type(want) and got == want and repr(got) == repr(want)


@pytest.mark.parametrize("edm_type", list(EdmType))
def test_atom_text_round_trips_through_the_general_and_the_fast_reader(edm_type: EdmType) -> None:
    spec, value = EDM_SPECS[edm_type], SAMPLES[edm_type]
    text = to_atom_text(value, edm_type)
    want = from_atom_text(text, edm_type)
    assert want == value
    _same(spec.atom_reader(text), want)
    element = f'<d:P m:type="{edm_type.value}">{text}</d:P>'.replace("&", "&amp;")
    body = (
        f'<entry xmlns="{atom_module.ATOM_NS}" xmlns:d="{atom_module.DATASERVICES_NS}" '
        f'xmlns:m="{atom_module.METADATA_NS}"><content><m:properties>{element}</m:properties></content></entry>'
    ).encode()
    payload = atom_module.AtomFormat().parse_entity(body)
    _same(payload.values["P"], want)
    assert payload.types["P"] is edm_type


@pytest.mark.parametrize("edm_type", list(EdmType))
def test_json_round_trips_through_the_general_the_fast_and_the_column_reader(edm_type: EdmType) -> None:
    spec, value = EDM_SPECS[edm_type], SAMPLES[edm_type]
    wire, annotated = to_json_value(value, edm_type)
    want = from_json_value(wire, edm_type)
    assert want == value
    _same(spec.json_reader(wire), want)
    column = spec.json_column_reader([wire, wire])
    assert column is not None
    for got in column:
        _same(got, want)
    # The page decoder, column by column, with the annotation when the type carries one.
    item = {"PartitionKey": "p", "RowKey": "r", "P": wire}
    if annotated:
        item["P@odata.type"] = edm_type.value
    page = json_module.JsonFormat().parse_entity_page(json.dumps({"value": [item, dict(item, RowKey="s")]}).encode())
    for values, types in zip(page.values, page.types):
        _same(values["P"], want)
        assert types["P"] is edm_type


@pytest.mark.parametrize("edm_type", list(EdmType))
def test_the_json_template_writes_what_to_json_value_gives(edm_type: EdmType) -> None:
    value = SAMPLES[edm_type]
    payload = EntityPayload({"PartitionKey": "p", "RowKey": "r", "P": value},
                            {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "P": edm_type})
    assert EDM_SPECS[edm_type].json_template(type(value)) is not None  # every sample takes the template
    text = json_module._template_text(payload)
    assert text is not None
    wire, annotated = to_json_value(value, edm_type)
    want: dict[str, Any] = {"PartitionKey": "p", "RowKey": "r", "P": wire}
    if annotated:
        want["P@odata.type"] = edm_type.value
    assert json.loads(text) == want


@pytest.mark.parametrize("edm_type", list(EdmType))
def test_the_filter_builder_and_the_entity_size_use_the_spec(edm_type: EdmType) -> None:
    spec, value = EDM_SPECS[edm_type], SAMPLES[edm_type]
    assert str(prop("P", edm_type) == value) == f"P eq {spec.filter_literal(value, 'P')}"
    assert _entity_write._value_size(value, edm_type) == spec.size + spec.measure(value)


def test_doubles_and_dates_keep_their_special_forms() -> None:
    # The per-type pieces the table moved, for the values with special wire forms.
    assert to_json_value(math.inf, EdmType.DOUBLE) == ("Infinity", True)
    assert to_atom_text(-math.inf, EdmType.DOUBLE) == "-INF"
    assert math.isnan(EDM_SPECS[EdmType.DOUBLE].json_reader("NaN"))
    naive = datetime(2024, 1, 2, 3, 4, 5)
    assert to_filter_literal(naive, EdmType.DATETIME) == "datetime'2024-01-02T03:04:05.0000000Z'"
    with pytest.raises(TypeError, match="unknown EDM type"):
        to_atom_text(1, "Edm.Int32")  # type: ignore[arg-type]  # an equal str is not an EdmType


def test_the_message_for_an_unsendable_value_names_the_classes_in_table_order() -> None:
    from tablesdk._core._errors import TableValidationError

    with pytest.raises(TableValidationError) as caught:
        infer_edm_type(object(), "P")
    assert "property values must be str, int, float, bool, datetime, uuid.UUID, bytes or EntityProperty" in str(
        caught.value
    )
