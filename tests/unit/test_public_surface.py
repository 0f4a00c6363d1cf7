"""The public surface: tablesdk.__all__ is exactly what docs/architecture.md lists, and documented; TableErrorCode."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import tablesdk
from tablesdk import TableErrorCode

ROOT = Path(__file__).resolve().parents[2]
#: Exported values that are data, not classes or functions (documented in their module by comments).
DATA_NAMES = {"__version__", "Int64", "Timeout", "Json", "Encrypted", "KeyResolver", "PROTOCOL_LEGACY", "PROTOCOL_AUTHENTICATED"}


def documented_surface() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Public surface", 1)[1].split("\n## ", 1)[0]
    listed = "\n".join(line for line in section.splitlines() if line.startswith("- "))
    return set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", listed))


def test_all_is_exactly_the_documented_surface() -> None:
    exported = set(tablesdk.__all__)
    documented = documented_surface()
    assert len(tablesdk.__all__) == len(exported), "a name is exported twice"
    assert exported - documented == set(), "exported but not listed in docs/architecture.md"
    assert documented - exported == set(), "listed in docs/architecture.md but not exported"


def test_every_exported_name_exists_and_has_a_docstring() -> None:
    for name in tablesdk.__all__:
        value = getattr(tablesdk, name)
        if name in DATA_NAMES:
            continue
        assert inspect.isclass(value) or inspect.isfunction(value), name
        assert value.__doc__ and value.__doc__.strip(), f"{name} has no docstring"


def test_table_error_codes_compare_with_plain_strings() -> None:
    code = TableErrorCode.ENTITY_ALREADY_EXISTS
    assert code == "EntityAlreadyExists" and "EntityAlreadyExists" == code
    assert str(code) == f"{code}" == "EntityAlreadyExists"
    assert "TableNotFound" in {TableErrorCode.TABLE_NOT_FOUND}
    assert TableErrorCode("ServerBusy") is TableErrorCode.SERVER_BUSY


@pytest.mark.parametrize(
    "code",
    [  # the Table service's documented codes (REST reference, "Table service error codes")
        "DuplicatePropertiesSpecified", "EntityNotFound", "EntityAlreadyExists", "EntityTooLarge",
        "HostInformationNotPresent", "InvalidDuplicateRow", "InvalidInput", "InvalidValueType",
        "JsonFormatNotSupported", "MethodNotAllowed", "NotImplemented", "OutOfRangeInput", "PropertiesNeedValue",
        "PropertyNameInvalid", "PropertyNameTooLong", "PropertyValueTooLarge", "TableAlreadyExists",
        "TableBeingDeleted", "TableNotFound", "TooManyProperties", "UpdateConditionNotSatisfied",
        "XMethodIncorrectCount", "XMethodIncorrectValue", "XMethodNotUsingPost",
    ],
)
def test_every_documented_table_code_is_a_member(code: str) -> None:
    assert TableErrorCode(code) == code


def test_an_error_from_the_service_compares_with_the_enum() -> None:
    from tablesdk._core._errors import error_for_status

    error = error_for_status(409, "EntityAlreadyExists", "The specified entity already exists.")
    assert error.error_code == TableErrorCode.ENTITY_ALREADY_EXISTS


#: Private state of the entity classes, owned by tablesdk/_entities/_entity.py.
ENTITY_STATE = {"_values", "_types", "_wire_types", "__dict__"}


@pytest.mark.parametrize(
    "module",
    [
        "_unit_of_work/_context.py", "aio/_context.py", "_unit_of_work/_tracking.py", "_unit_of_work/_merge.py",
        "_unit_of_work/_save_plan.py", "_unit_of_work/_tracking_context.py", "_clients/_client.py",
        "_clients/_client_base.py", "_clients/_table_flows.py", "_clients/_query_flows.py",
        "_clients/_batch_flows.py", "_clients/_entity_flows.py", "_bulk_loading/_bulk.py",
    ],
)
def test_entity_state_is_changed_only_by_entity_py(module: str) -> None:
    import ast

    tree = ast.parse((ROOT / "tablesdk" / module).read_text(encoding="utf-8"))
    touched = sorted({
        f"line {node.lineno}: .{node.attr}" for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in ENTITY_STATE
    })
    assert touched == [], f"tablesdk/{module} reaches into entity state; add a function to entity.py instead"


#: The modules a user may import; everything else in the package is private (a leading underscore).
PUBLIC_MODULES = {
    "tablesdk", "tablesdk.aio", "tablesdk.cli", "tablesdk.dask", "tablesdk.ray", "tablesdk.polars", "tablesdk.spark", "tablesdk.devstore",
    "tablesdk.testing", "tablesdk.legacy",
}


def test_only_the_public_modules_have_public_names() -> None:
    import pkgutil

    public = {"tablesdk"}
    for module in pkgutil.walk_packages(tablesdk.__path__, "tablesdk."):
        if not any(part.startswith("_") for part in module.name.split(".")):
            public.add(module.name)
    assert public == PUBLIC_MODULES
