"""Filter expressions: property references, comparisons and their ``$filter`` text.

This module sits below ``entity.py`` so that declared properties of a
``TableEntity`` subclass can be property references (``Blog.Rating > 3``).

Building a filter::

    (prop("PartitionKey") == "Channel9") & (prop("Rating") > 2)
    Blog.RowKey.startswith("2009-")          # a range: RowKey ge '2009-' and RowKey lt '2009.'
    ~(Blog.Rating == 3) | "Text eq 'raw'"    # raw $filter text is accepted anywhere

Comparisons (``== != < <= > >=`` on a :class:`PropertyRef`) give
:class:`Comparison` nodes; ``&``, ``|`` and ``~`` combine nodes into
:class:`And`, :class:`Or` and :class:`Not`. ``str(expr)`` or ``expr.render()``
gives the ``$filter`` text with only the parentheses OData precedence needs
(``not`` > comparison > ``and`` > ``or``); raw strings are always
parenthesized when combined, because their inside is not known.

Literal typing (the reason this module exists): the Table service compares a
property only with a literal of the same EDM type and silently skips entities
whose stored type differs (white paper section 8.4). So the literal is typed
from, in order: an :class:`~tablesdk._entities._edm.EntityProperty` value's own type; the
property reference's declared type (``Blog.Views`` declared ``Int64`` renders
``5`` as ``5L``; a ``float`` property renders ``3`` as ``3.0``); the built-in
type of ``PartitionKey``/``RowKey`` (String) and ``Timestamp`` (DateTime); and
finally the Python type of the value (:func:`~tablesdk._entities._edm.infer_edm_type`).
A value that cannot be converted to the declared type raises
:class:`~tablesdk._core._errors.TableValidationError` naming the property, instead of
producing a filter that matches nothing.

The service allows at most :data:`MAX_FILTER_COMPARISONS` (15) comparisons in
one ``$filter`` (Query Entities / "Querying Tables and Entities" in the REST
reference); :func:`render_filter` checks that before a request is sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, ClassVar, Union

from ._edm import EdmType, EntityProperty, infer_edm_type, to_filter_literal
from ._model_values import dynamic_to_wire
from ._edm_specs import EDM_SPECS
from .._core._errors import TableValidationError
from ._filter_text import check_filter_text, check_literal_type, filter_name_problem, property_names_of
from .._core._patterns import pattern_on_first_use

__all__ = [
    "PropertyRef",
    "prop",
    "col",
    "Filter",
    "FilterLike",
    "Comparison",
    "Junction",
    "And",
    "Or",
    "Not",
    "Range",
    "RawFilter",
    "MAX_FILTER_COMPARISONS",
    "as_filter",
    "count_comparisons",
    "render_filter",
    "point_keys",
    "prefix_upper_bound",
]

#: The most comparisons the Table service accepts in one ``$filter`` string.
MAX_FILTER_COMPARISONS = 15

# The types of the system properties, used when a reference declares none.
_SYSTEM_TYPES = {
    "PartitionKey": EdmType.STRING,
    "RowKey": EdmType.STRING,
    "Timestamp": EdmType.DATETIME,
}

# OData precedence, loosest first. A raw string is below everything: its
# structure is unknown, so it is parenthesized whenever it is an operand.
_PREC_RAW = 0
_PREC_OR = 1
_PREC_AND = 2
_PREC_COMPARISON = 3
_PREC_NOT = 4
_PREC_GROUP = 5

_OPERATORS = ("eq", "ne", "lt", "le", "gt", "ge")

_TRUTH_MESSAGE = (
    "a filter expression has no truth value. Combine filters with & (and), | (or) and "
    "~ (not) instead of the keywords and/or/not, and put each comparison in parentheses "
    "because & and | bind more tightly than ==: (Blog.PartitionKey == 'a') & (Blog.Rating > 2). "
    "Chained comparisons such as 1 < prop('X') < 5 are not supported: use prop('X').between(lo, hi) "
    "or two comparisons."
)

_PRECEDENCE_HINT = (
    "& and | bind more tightly than comparisons in Python; put each comparison in "
    "parentheses: (Blog.PartitionKey == 'a') & (Blog.Rating > 2)"
)


# ---------------------------------------------------------------- nodes


class Filter:
    """Base class of every filter expression node.

    Nodes are immutable. ``&``, ``|`` and ``~`` build new nodes; each side of
    ``&`` and ``|`` may also be a raw ``$filter`` string. A node has no truth
    value: ``bool(node)`` raises :class:`TypeError` (see :meth:`__bool__`).
    """

    __slots__ = ()

    _precedence: ClassVar[int] = _PREC_GROUP

    def render(self) -> str:
        """The ``$filter`` text of this expression (no comparison-count check)."""
        raise NotImplementedError

    def _operand_text(self, parent_precedence: int) -> str:
        text = self.render()
        if self._precedence < parent_precedence:
            return f"({text})"
        return text

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.render()!r})"

    # ``bool`` in these signatures is for the type checker only: ``Blog.Rating > 2`` on a plain
    # ``Rating: int`` annotation is a bool to mypy but a Filter at run time; a real bool is refused.
    def __and__(self, other: FilterLike | bool) -> Filter:
        return And._of(self, _operand(other, "&"))

    def __rand__(self, other: FilterLike | bool) -> Filter:
        return And._of(_operand(other, "&"), self)

    def __or__(self, other: FilterLike | bool) -> Filter:
        return Or._of(self, _operand(other, "|"))

    def __ror__(self, other: FilterLike | bool) -> Filter:
        return Or._of(_operand(other, "|"), self)

    def __invert__(self) -> Filter:
        return Not(self)

    def __bool__(self) -> bool:
        """Always raises :class:`TypeError`: a filter is not a Python condition.

        This catches ``(A == 1) and (B == 2)`` (which would silently drop the
        first comparison) and ``if Blog.Rating == 3:``.
        """
        raise TypeError(_TRUTH_MESSAGE)

    @staticmethod
    def raw(text: str) -> RawFilter:
        """A raw ``$filter`` string used as an expression: ``Filter.raw("Rating gt 3")``."""
        return RawFilter(text)


FilterLike = Union[Filter, str]
"""What a filter parameter accepts: an expression node or raw ``$filter`` text."""


class Comparison(Filter):
    """``<property> <op> <literal>``, e.g. ``Rating gt 3``.

    ``value`` is the Python value after conversion to ``edm_type``; ``literal``
    is its ``$filter`` form.
    """

    __slots__ = ("name", "op", "value", "edm_type", "literal")

    _precedence = _PREC_COMPARISON

    def __init__(self, name: str, op: str, value: Any, edm_type: EdmType, literal: str) -> None:
        if op not in _OPERATORS:
            raise ValueError(f"unknown comparison operator {op!r}; use one of {', '.join(_OPERATORS)}")
        self.name = name
        self.op = op
        self.value = value
        self.edm_type = edm_type
        self.literal = literal

    def render(self) -> str:
        """``Name op literal``."""
        return f"{self.name} {self.op} {self.literal}"


class Junction(Filter):
    """Base of :class:`And` and :class:`Or`: two or more operands joined by a keyword."""

    __slots__ = ("operands",)

    _keyword: ClassVar[str] = ""

    def __init__(self, *operands: Filter) -> None:
        if len(operands) < 2:
            raise ValueError(f"{type(self).__name__} needs at least two operands")
        for operand in operands:
            if not isinstance(operand, Filter):
                raise TypeError(f"{type(self).__name__} operands are filters, not {type(operand).__name__}")
        self.operands: tuple[Filter, ...] = operands

    @classmethod
    def _of(cls, left: Filter, right: Filter) -> Filter:
        parts: list[Filter] = []
        for side in (left, right):
            if type(side) is cls:  # flatten a same-kind node (never a Range group)
                assert isinstance(side, Junction)
                parts.extend(side.operands)
            else:
                parts.append(side)
        return cls(*parts)

    def render(self) -> str:
        """Operands joined by the keyword, each parenthesized only if it binds more loosely."""
        joiner = f" {self._keyword} "
        return joiner.join(op._operand_text(self._precedence) for op in self.operands)


class And(Junction):
    """Conjunction of two or more operands (``a & b & c`` is one flat node)."""

    __slots__ = ()

    _precedence = _PREC_AND
    _keyword = "and"


class Or(Junction):
    """Disjunction of two or more operands (``a | b | c`` is one flat node)."""

    __slots__ = ()

    _precedence = _PREC_OR
    _keyword = "or"


class Range(And):
    """A conjunction built by :meth:`PropertyRef.startswith` or :meth:`PropertyRef.between`.

    It always renders as one parenthesized group, ``(P ge 'ab' and P lt 'ac')``,
    so it reads as a unit wherever it is used; it is never merged into an
    enclosing :class:`And`.
    """

    __slots__ = ()

    _precedence = _PREC_GROUP

    def render(self) -> str:
        """``(first and second)``."""
        return "(" + " and ".join(op._operand_text(_PREC_AND) for op in self.operands) + ")"


class Not(Filter):
    """Negation: ``not (<operand>)``.

    ``not`` binds more tightly than a comparison in OData (``not A eq 1``
    would mean ``(not A) eq 1``), so the operand is always parenthesized
    unless it is already a parenthesized group.
    """

    __slots__ = ("operand",)

    _precedence = _PREC_NOT

    def __init__(self, operand: Filter) -> None:
        self.operand = operand

    def render(self) -> str:
        """``not (operand)``."""
        return "not " + self.operand._operand_text(_PREC_GROUP)


class RawFilter(Filter):
    """Raw ``$filter`` text, passed through unchanged (parenthesized when combined)."""

    __slots__ = ("text",)

    _precedence = _PREC_RAW

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"a raw filter is a str, not {type(text).__name__}")
        stripped = text.strip()
        if not stripped:
            raise TableValidationError("filter", "a raw $filter string must not be empty")
        check_filter_text(stripped)  # the service's bare 400 InvalidInput does not say where
        self.text = stripped

    def render(self) -> str:
        """The text as given (surrounding whitespace removed)."""
        return self.text


def _operand(other: Any, operator: str) -> Filter:
    if isinstance(other, Filter):
        return other
    if isinstance(other, str):
        return RawFilter(other)
    if isinstance(other, PropertyRef):
        raise TypeError(f"cannot combine a filter with a bare property using {operator}; {_PRECEDENCE_HINT}")
    raise TypeError(
        f"cannot combine a filter with {type(other).__name__} using {operator}; "
        f"use filter expressions or raw $filter strings. {_PRECEDENCE_HINT}"
    )


def filter_property_names(node: Filter) -> set[str]:
    """The names of the properties ``node`` compares (raw text's included)."""
    if isinstance(node, Comparison):
        return {node.name}
    if isinstance(node, Junction):
        return set().union(*map(filter_property_names, node.operands))
    if isinstance(node, Not):
        return filter_property_names(node.operand)
    if isinstance(node, RawFilter):
        return property_names_of(node.text)
    return set()


def as_filter(expr: FilterLike | bool) -> Filter:
    """``expr`` as a :class:`Filter` node: raw strings become :class:`RawFilter`.

    Anything else (notably a ``bool``, which is what comparing two plain
    Python values gives) raises :class:`TypeError`.
    """
    if isinstance(expr, Filter):
        return expr
    if isinstance(expr, str):
        return RawFilter(expr)
    if isinstance(expr, bool):
        raise TypeError(
            f"got the bool {expr!r} where a filter was expected: a comparison of plain Python "
            "values was evaluated instead of building a filter; compare a property reference "
            "such as prop('Rating') or Blog.Rating"
        )
    raise TypeError(f"a filter is an expression or a raw $filter string, not {type(expr).__name__}")


# ---------------------------------------------------------------- property references


class PropertyRef:
    """A reference to a property by name, with an optional declared EDM type.

    Comparing it with a value (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``)
    builds a :class:`Comparison`; the value is rendered in the declared type
    when there is one (see the module documentation). Comparing two property
    references is not something the Table service supports and raises
    :class:`TypeError`; so does comparing with ``None`` (the service stores no
    nulls: a missing property never matches).
    """

    __slots__ = ("name", "edm_type")

    def __init__(self, name: str, edm_type: EdmType | None = None) -> None:
        self.name = name
        self.edm_type = edm_type

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        if self.edm_type is None:
            return f"prop({self.name!r})"
        return f"prop({self.name!r}, {self.edm_type})"

    # -- comparisons

    def __eq__(self, other: object) -> Comparison:  # type: ignore[override]
        return self._compare("eq", other)

    def __ne__(self, other: object) -> Comparison:  # type: ignore[override]
        return self._compare("ne", other)

    def __lt__(self, other: Any) -> Comparison:
        return self._compare("lt", other)

    def __le__(self, other: Any) -> Comparison:
        return self._compare("le", other)

    def __gt__(self, other: Any) -> Comparison:
        return self._compare("gt", other)

    def __ge__(self, other: Any) -> Comparison:
        return self._compare("ge", other)

    # -- helpful errors for common mistakes

    def __and__(self, other: Any) -> Filter:
        raise TypeError(f"cannot use & on the property {self.name!r} itself; {_PRECEDENCE_HINT}")

    __rand__ = __and__

    def __or__(self, other: Any) -> Filter:
        raise TypeError(f"cannot use | on the property {self.name!r} itself; {_PRECEDENCE_HINT}")

    __ror__ = __or__

    def __invert__(self) -> Filter:
        raise TypeError(
            f"cannot negate the property {self.name!r} itself; negate a comparison: "
            f"~({self.name} == True)"
        )

    def __bool__(self) -> bool:
        raise TypeError(f"the property reference {self.name!r} has no truth value. {_TRUTH_MESSAGE}")

    # -- helpers

    def startswith(self, prefix: str) -> Filter:
        """Entities whose (string) property starts with ``prefix``.

        The Table service has no prefix operator, so this is the white paper's
        range: ``(P ge 'prefix' and P lt 'prefiy')``, where the upper bound is
        ``prefix`` with its last character replaced by the next character (see
        :func:`prefix_upper_bound`, which also handles a last character of
        U+FFFF by carrying into the previous one). Two edge cases give a single
        comparison, ``P ge 'prefix'``: the empty prefix (every string starts
        with ""; entities without a string ``P`` still do not match) and a
        prefix made only of U+FFFF characters (no string sorts above them).
        """
        if not isinstance(prefix, str):
            raise TableValidationError(self.name, "startswith takes a str prefix", f"got {type(prefix).__name__}")
        declared = self._effective_type()
        if declared is not None and declared is not EdmType.STRING:
            raise TableValidationError(
                self.name, "startswith needs an Edm.String property", f"the property is declared {declared.value}"
            )
        lower = self._compare("ge", prefix)
        upper = prefix_upper_bound(prefix)
        if upper is None:
            return lower
        return Range(lower, self._compare("lt", upper))

    def between(self, low: Any, high: Any) -> Filter:
        """``(P ge low and P le high)``: both ends inclusive, typed like any comparison.

        Raises :class:`TableValidationError` when both ends have the same type
        and ``low > high`` (the range would silently match nothing).
        """
        lower = self._compare("ge", low)
        upper = self._compare("le", high)
        if lower.edm_type is upper.edm_type:
            low_key = _order_key(lower.value, lower.edm_type)
            high_key = _order_key(upper.value, upper.edm_type)
            if low_key is not None and high_key is not None and low_key > high_key:
                raise TableValidationError(
                    self.name, "between(low, high) needs low <= high", f"got {lower.literal} > {upper.literal}"
                )
        return Range(lower, upper)

    # -- internals

    def _effective_type(self) -> EdmType | None:
        if self.edm_type is not None:
            return self.edm_type
        return _SYSTEM_TYPES.get(self.name)

    def _compare(self, op: str, other: object) -> Comparison:
        name = self.name
        if not isinstance(name, str):
            raise TableValidationError(repr(name), "property names in a filter are str")
        problem = filter_name_problem(name)
        if problem is not None:
            raise TableValidationError(
                name, "no $filter can name this property (an OData identifier: letters, digits, '_')", problem
            )
        if isinstance(other, PropertyRef):
            raise TypeError(
                f"cannot compare the property {name!r} with the property {other.name!r}: the Table "
                "service compares properties with literal values only"
            )
        if isinstance(other, Filter):
            raise TypeError(f"cannot compare the property {name!r} with a filter expression; {_PRECEDENCE_HINT}")
        edm_type, value, literal = typed_literal(name, other, self._effective_type())
        return Comparison(name, op, value, edm_type, literal)


def typed_literal(name: str, value: object, declared: EdmType | None) -> tuple[EdmType, Any, str]:
    """The EDM type, converted value and ``$filter`` literal of ``value`` compared with the
    property ``name`` of type ``declared`` (None: typed from the value), as every comparison
    renders it; :class:`TableValidationError` naming ``name`` for a value that cannot be one."""
    if value is None:
        raise TableValidationError(
            name, "filters cannot compare with null", "the service stores no nulls: a missing property never matches"
        )
    if isinstance(value, EntityProperty):
        if value.value is None:
            raise TableValidationError(name, "filters cannot compare with null")
        edm_type, converted = value.edm_type, value.value
    elif declared is None:
        converted = dynamic_to_wire(name, value)  # an Enum, Decimal, date or timedelta as a dynamic entity stores it
        edm_type = infer_edm_type(converted, name)
    else:
        edm_type, converted = declared, _convert(name, value, declared)
    return edm_type, converted, to_filter_literal(converted, edm_type, name)


def prop(name: str, edm_type: EdmType | None = None) -> PropertyRef:
    """A property reference for building filters: ``prop("Rating") > 3``.

    Give ``edm_type`` to render literals in that type, e.g.
    ``prop("Views", EdmType.INT64) == 5`` gives ``Views eq 5L``.
    """
    return PropertyRef(name, edm_type)


def col(declared: Any) -> PropertyRef:
    """A declared property as the type checker should see it: ``col(Blog.Rating).between(1, 5)``.

    With a plain annotation (``Rating: int``) mypy types ``Blog.Rating`` as ``int``, which is
    right for ``blog.Rating`` on an instance but hides the filter methods of the class
    attribute (``between``, ``startswith``). ``col`` returns it typed as the
    :class:`PropertyRef` it is (SQLModel's ``col()`` does the same for columns). Anything that
    is not a property reference raises :class:`TypeError`.
    """
    if not isinstance(declared, PropertyRef):
        raise TypeError(
            f"col() takes a declared property of a TableEntity class such as Blog.Rating, "
            f"not {type(declared).__name__} {declared!r}"
        )
    return declared


def _mismatch(name: str, value: Any, edm_type: EdmType, why: str = "") -> TableValidationError:
    detail = f"got {type(value).__name__} {value!r}"
    if why:
        detail += f": {why}"
    return TableValidationError(
        name,
        f"the property is declared {edm_type.value} and the literal must be one too "
        "(a differently typed literal silently matches nothing)",
        detail,
    )


def _convert(name: str, value: Any, edm_type: EdmType) -> Any:
    """``value`` converted to the declared ``edm_type`` of property ``name``.

    Only lossless conversions: int to Double (when exact), str to Guid,
    bytearray/memoryview to bytes. Everything else must already be the
    right Python type.
    """
    if isinstance(value, bool) and edm_type is not EdmType.BOOLEAN:
        raise _mismatch(name, value, edm_type)
    if edm_type is EdmType.DOUBLE and isinstance(value, int):
        try:
            number = float(value)
        except OverflowError:
            raise _mismatch(name, value, edm_type, "too large for a double") from None
        if int(number) != value:
            raise _mismatch(name, value, edm_type, "not exactly representable as a double")
        return number
    if edm_type is EdmType.GUID and isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            raise _mismatch(name, value, edm_type, "not a GUID") from None
    if edm_type is EdmType.BINARY and isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if not isinstance(value, EDM_SPECS[edm_type].python_class):
        raise _mismatch(name, value, edm_type)
    return value


def _order_key(value: Any, edm_type: EdmType) -> Any:
    """A key that sorts like the service compares, or None when unknown."""
    return EDM_SPECS[edm_type].order_key(value)


# ---------------------------------------------------------------- prefix ranges


def _next_char(code: int) -> int | None:
    """The code point that follows ``code`` in UTF-16 code-unit order, or None."""
    if code == 0xD7FF:
        return 0x10000  # surrogate pairs (D800..DBFF first unit) sort right after U+D7FF
    if code == 0x10FFFF:
        return 0xE000  # the last pair (DBFF DFFF) is followed by the BMP's E000..FFFF
    if code == 0xFFFF:
        return None  # the largest UTF-16 code unit: carry into the previous character
    return code + 1


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string above every string that starts with ``prefix``, or None.

    Strings are ordered as the Table service (and Azurite) order them, by
    UTF-16 code units, in which U+10000..U+10FFFF (surrogate pairs) sort
    between U+D7FF and U+E000. The bound is ``prefix`` with its last
    character replaced by the next character in that order; a trailing
    U+FFFF has no next character, so it is dropped and the carry moves to the
    character before it (``"a\\uffff"`` gives ``"b"``). None means there is no
    upper bound: ``prefix`` is empty or made only of U+FFFF.
    """
    chars = list(prefix)
    while chars:
        successor = _next_char(ord(chars[-1]))
        if successor is not None:
            chars[-1] = chr(successor)
            return "".join(chars)
        chars.pop()
    return None


# ---------------------------------------------------------------- analysis


_raw_token = pattern_on_first_use(
    r"\s*(?:"
    r"(?P<literal>[A-Za-z]*'(?:[^']|'')*')"  # 'text', datetime'...', guid'...', X'..'
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<number>[-+]?[0-9.][0-9A-Za-z.+-]*)"
    r"|(?P<open>\()"
    r"|(?P<close>\))"
    r"|(?P<other>\S)"
    r")"
)


def _count_raw_comparisons(text: str) -> int:
    """Comparison operators in raw ``$filter`` text, outside string literals.

    A word such as ``eq`` counts only where an operator can stand (after an
    operand), so a property that happens to be called ``eq`` is not counted.
    """
    count = 0
    after_operand = False
    position = 0
    length = len(text)
    raw_token = _raw_token()
    while position < length:
        match = raw_token.match(text, position)
        if match is None:  # only trailing whitespace is left
            break
        position = match.end()
        kind = match.lastgroup
        if kind == "word":
            word = match.group("word").lower()
            if after_operand and word in _OPERATORS:
                count += 1
                after_operand = False
            elif after_operand and word in ("and", "or"):
                after_operand = False
            elif not after_operand and word == "not":
                pass
            else:
                after_operand = True
        elif kind == "open":
            after_operand = False
        elif kind in ("literal", "number", "close"):
            after_operand = True
    return count


def count_comparisons(expr: FilterLike) -> int:
    """How many comparisons ``expr`` holds (what the service's limit counts).

    Raw strings are scanned for comparison operators outside their literals.
    """
    node = as_filter(expr)
    if isinstance(node, Comparison):
        return 1
    if isinstance(node, Junction):  # And, Or and Range
        return sum(count_comparisons(op) for op in node.operands)
    if isinstance(node, Not):
        return count_comparisons(node.operand)
    if isinstance(node, RawFilter):
        return _count_raw_comparisons(node.text)
    raise TypeError(f"unknown filter node {type(node).__name__}")


def render_filter(expr: FilterLike | None, declared: Mapping[str, EdmType] | None = None) -> str | None:
    """The ``$filter`` text to send for ``expr`` (None for no filter).

    Raises :class:`TableValidationError` when ``expr`` has more than
    :data:`MAX_FILTER_COMPARISONS` comparisons, which the service would
    refuse; split such a query into several (and merge the results); and,
    given the ``declared`` types of a query's entity class, when a comparison
    (built or in raw text) has a literal of another type than its property,
    which the service would answer with no match.
    """
    if expr is None:
        return None
    node = as_filter(expr)
    if declared:
        _check_declared_types(node, declared)
    count = count_comparisons(node)
    if count > MAX_FILTER_COMPARISONS:
        raise TableValidationError(
            "$filter",
            f"the Table service allows at most {MAX_FILTER_COMPARISONS} comparisons in one $filter",
            f"got {count}",
        )
    return node.render()


def _check_declared_types(node: Filter, declared: Mapping[str, EdmType]) -> None:
    if isinstance(node, Comparison):
        check_literal_type(node.name, node.edm_type, declared)
    elif isinstance(node, Junction):
        for operand in node.operands:
            _check_declared_types(operand, declared)
    elif isinstance(node, Not):
        _check_declared_types(node.operand, declared)
    elif isinstance(node, RawFilter):
        check_filter_text(node.text, declared)


def point_keys(expr: FilterLike | None) -> tuple[str, str] | None:
    """``(PartitionKey, RowKey)`` when ``expr`` is exactly a point query, else None.

    A point query is ``PartitionKey eq X and RowKey eq Y`` (either order) with
    string literals and nothing else. Raw strings are never treated as point
    queries (they are sent as ``$filter`` text unchanged).
    """
    if not isinstance(expr, And) or type(expr) is not And or len(expr.operands) != 2:
        return None
    found: dict[str, str] = {}
    for operand in expr.operands:
        if not isinstance(operand, Comparison) or operand.op != "eq":
            return None
        if operand.name not in ("PartitionKey", "RowKey") or operand.edm_type is not EdmType.STRING:
            return None
        found[operand.name] = operand.value
    if len(found) != 2:
        return None
    return found["PartitionKey"], found["RowKey"]
