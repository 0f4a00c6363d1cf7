"""The OData ``$filter`` subset the Table service accepts: tokenizer, parser, evaluator.

Grammar (lowest precedence first)::

    expr       := and_expr ( "or" and_expr )*
    and_expr   := unary ( "and" unary )*
    unary      := "not" unary | comparison
    comparison := primary ( ("eq"|"ne"|"gt"|"ge"|"lt"|"le") primary )?
    primary    := "(" expr ")" | literal | property

Literals: ``'text'`` (a quote inside is doubled), ``123`` (Edm.Int32),
``123L`` (Edm.Int64), ``1.5`` / ``1e3`` / ``2.0d`` (Edm.Double), ``true`` and
``false``, ``datetime'2024-01-02T03:04:05.1234567Z'``, ``guid'...'``,
``X'0aff'`` and ``binary'0aff'``. Keywords are lower case, as in OData.

Evaluation follows the service's typing rule (the white paper, section 8.4):
a comparison whose operands have different EDM types does not match, except that
an Int32 literal compares by value with Int64 and Double properties (as the
service does: microsoft/AzureStorageExplorer issues 5346 and 6866); it is
*unknown* rather than false, so ``not`` cannot turn it into a match. A
comparison with a property the entity does not have is *false* (so ``ne``
does not match it either), and ``not`` turns it into a match:
``not (Opt eq 'x')`` returns the entities without ``Opt``. The REST
documentation does not say; this is what Azurite does, what users report of
the service (azure-storage-net issue 696, Azurite issue 1929), and what the
differential test (tests/integration/test_differential.py) checks. A bare
property is a condition when it is Edm.Boolean (a missing one is false).
Strings order by UTF-16 code units, as keys do (:func:`~.values.utf16_key`).
Anything else (functions,
arithmetic, ``null``, a misplaced token, operands whose literal types cannot
be compared) is a malformed query: :class:`FilterError`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ._values import (
    BINARY, BOOLEAN, DATETIME, DOUBLE, GUID, INT32, INT64, STRING,
    canonical_datetime, canonical_guid, utf16_key,
)

__all__ = ["FilterError", "Filter", "compile_filter", "KeyRange"]

Typed = Optional[tuple[str, Any]]
Entity = dict[str, tuple[str, Any]]
Evaluator = Callable[[Entity], Typed]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class FilterError(ValueError):
    """The filter text is not a valid query condition."""


#: The service's limit of discrete comparisons in one ``$filter``.
MAX_COMPARISONS = 15
#: Parentheses and ``not`` nested deeper than this are refused: no 15-comparison filter
#: needs them, and a recursive parser must not run out of stack on hostile input.
MAX_NESTING = 64
#: Longest numeric literal: every double's positional form (1e-300 as 0.000...1) fits.
MAX_NUMBER_LENGTH = 400


# ------------------------------------------------------------------ tokens

@dataclass(frozen=True)
class Token:
    kind: str  # "(" ")" "lit" "ident" "end"
    value: Any
    pos: int


_NUMBER_RE = re.compile(
    r"-?(?:[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)([LlDdFfMm]?)"
)
_TYPED_PREFIXES = {"datetime": DATETIME, "guid": GUID, "X": BINARY, "binary": BINARY}
_HEX_RE = re.compile(r"(?:[0-9a-fA-F]{2})*\Z")


def _read_quoted(text: str, start: int) -> tuple[str, int]:
    """Read a quoted literal whose opening quote is at ``start``; return (content, next index)."""
    i = start + 1
    parts: list[str] = []
    while True:
        end = text.find("'", i)
        if end == -1:
            raise FilterError(f"unterminated string literal at {start}")
        parts.append(text[i:end])
        if end + 1 < len(text) and text[end + 1] == "'":
            parts.append("'")
            i = end + 2
            continue
        return "".join(parts), end + 1


def _typed_literal(prefix: str, content: str, pos: int) -> tuple[str, Any]:
    edm = _TYPED_PREFIXES[prefix]
    try:
        if edm == DATETIME:
            return DATETIME, canonical_datetime(content)
        if edm == GUID:
            return GUID, canonical_guid(content)
    except ValueError:
        raise FilterError(f"invalid {prefix} literal at {pos}") from None
    if not _HEX_RE.match(content):
        raise FilterError(f"invalid binary literal at {pos}")
    return BINARY, bytes.fromhex(content)


def _number(text: str, suffix: str, pos: int) -> tuple[str, Any]:
    body = text[: len(text) - len(suffix)] if suffix else text
    if len(body) > MAX_NUMBER_LENGTH:
        raise FilterError(f"numeric literal of {len(body)} characters at {pos}")
    is_integral = not any(ch in body for ch in ".eE")
    if is_integral and len(body.lstrip("-")) > 20:  # beyond any Int64; int() of it is slow
        raise FilterError(f"integer literal out of range at {pos}")
    if suffix in ("L", "l"):
        if not is_integral:
            raise FilterError(f"invalid Int64 literal at {pos}")
        value = int(body)
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise FilterError(f"Int64 literal out of range at {pos}")
        return INT64, value
    if suffix in ("D", "d") or (not suffix and not is_integral):
        number = float(body)
        if math.isinf(number):
            raise FilterError(f"Edm.Double literal out of range at {pos}")
        return DOUBLE, number
    if suffix:  # f/F (single) and m/M (decimal) are not table types
        raise FilterError(f"unsupported numeric literal at {pos}")
    value = int(body)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise FilterError(f"integer literal {body} does not fit Edm.Int32 (use the L suffix) at {pos}")
    return INT32, value


def _is_ident_start(ch: str) -> bool:
    # OData identifiers start with a letter of any kind, letter numbers (Nl, e.g. U+216B) included
    return ch == "_" or ch.isalpha() or unicodedata.category(ch) == "Nl"


def _is_ident_char(ch: str) -> bool:
    return ch == "_" or ch.isalnum()


def tokenize(text: str) -> list[Token]:
    """Split filter text into tokens (FilterError on a character that starts none)."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if ch in "()":
            tokens.append(Token(ch, ch, i))
            i += 1
            continue
        if ch == "'":
            content, i2 = _read_quoted(text, i)
            tokens.append(Token("lit", (STRING, content), i))
            i = i2
            continue
        if ch.isdigit() or ch == "." or (ch == "-" and i + 1 < n and (text[i + 1].isdigit() or text[i + 1] == ".")):
            m = _NUMBER_RE.match(text, i)
            if not m or m.end() == i:
                raise FilterError(f"invalid number at {i}")
            end = m.end()
            if end < n and _is_ident_char(text[end]):
                raise FilterError(f"invalid number at {i}")
            tokens.append(Token("lit", _number(m.group(0), m.group(1), i), i))
            i = end
            continue
        if _is_ident_start(ch):
            j = i + 1
            while j < n and _is_ident_char(text[j]):
                j += 1
            word = text[i:j]
            if word in _TYPED_PREFIXES and j < n and text[j] == "'":
                content, j2 = _read_quoted(text, j)
                tokens.append(Token("lit", _typed_literal(word, content, i), i))
                i = j2
                continue
            if j < n and text[j] == "'":
                raise FilterError(f"unsupported literal prefix {word!r} at {i}")
            tokens.append(Token("ident", word, i))
            i = j
            continue
        raise FilterError(f"unexpected character {ch!r} at {i}")
    tokens.append(Token("end", None, n))
    return tokens


# ------------------------------------------------------------------ AST

@dataclass(frozen=True)
class Node:
    """A parsed expression: ``kind`` is lit, prop, cmp, and, or, not."""

    kind: str
    op: str = ""
    value: Any = None  # literal (edm, value) or property name
    left: Optional["Node"] = None
    right: Optional["Node"] = None

    @property
    def static_type(self) -> str | None:
        """The EDM type known without an entity (None for a property)."""
        if self.kind == "lit":
            return str(self.value[0])
        if self.kind == "prop":
            return None
        return BOOLEAN


_COMPARISONS = frozenset({"eq", "ne", "gt", "ge", "lt", "le"})
_KEYWORDS = _COMPARISONS | {"and", "or", "not", "true", "false", "null"}


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0
        self.comparisons = 0

    def _enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise FilterError(f"parentheses and 'not' nested more than {MAX_NESTING} deep at {pos}")

    def peek(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def is_word(self, word: str) -> bool:
        tok = self.peek()
        return tok.kind == "ident" and tok.value == word

    def parse(self) -> Node:
        node = self.expr()
        tok = self.peek()
        if tok.kind != "end":
            raise FilterError(f"unexpected {tok.value!r} at {tok.pos}")
        if node.static_type not in (None, BOOLEAN):
            raise FilterError("the filter is not a condition")
        return node

    def expr(self) -> Node:
        node = self.and_expr()
        while self.is_word("or"):
            self.take()
            node = self._logical("or", node, self.and_expr())
        return node

    def and_expr(self) -> Node:
        node = self.unary()
        while self.is_word("and"):
            self.take()
            node = self._logical("and", node, self.unary())
        return node

    @staticmethod
    def _logical(kind: str, left: Node, right: Node) -> Node:
        for side in (left, right):
            if side.static_type not in (None, BOOLEAN):
                raise FilterError(f"operand of '{kind}' is not a condition")
        return Node(kind, left=left, right=right)

    def unary(self) -> Node:
        if self.is_word("not"):
            self._enter(self.take().pos)
            operand = self.unary()
            self.depth -= 1
            if operand.static_type not in (None, BOOLEAN):
                raise FilterError("operand of 'not' is not a condition")
            return Node("not", left=operand)
        return self.comparison()

    def comparison(self) -> Node:
        left = self.primary()
        tok = self.peek()
        if tok.kind == "ident" and tok.value in _COMPARISONS:
            self.take()
            self.comparisons += 1
            if self.comparisons > MAX_COMPARISONS:
                raise FilterError(f"more than {MAX_COMPARISONS} comparisons (at {tok.pos})")
            right = self.primary()
            lt, rt = left.static_type, right.static_type
            if lt is not None and rt is not None and lt != rt:
                raise FilterError(f"cannot compare {lt} with {rt}")
            return Node("cmp", op=tok.value, left=left, right=right)
        return left

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind == "(":
            self._enter(tok.pos)
            node = self.expr()
            self.depth -= 1
            close = self.take()
            if close.kind != ")":
                raise FilterError(f"expected ')' at {close.pos}")
            return node
        if tok.kind == "lit":
            return Node("lit", value=tok.value)
        if tok.kind == "ident":
            word = tok.value
            if word == "true" or word == "false":
                return Node("lit", value=(BOOLEAN, word == "true"))
            if word in _KEYWORDS:
                raise FilterError(f"unexpected {word!r} at {tok.pos}")
            nxt = self.peek()
            if nxt.kind == "(":
                raise FilterError(f"functions are not supported ({word} at {tok.pos})")
            return Node("prop", value=word)
        if tok.kind == "end":
            raise FilterError("unexpected end of filter")
        raise FilterError(f"unexpected {tok.value!r} at {tok.pos}")


# ------------------------------------------------------------------ evaluation

_TRUE: Typed = (BOOLEAN, True)
_FALSE: Typed = (BOOLEAN, False)


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "eq":
        return bool(a == b)
    if op == "ne":
        return bool(a != b)
    if isinstance(a, str) and isinstance(b, str) and not (a.isascii() and b.isascii()):
        a, b = utf16_key(a), utf16_key(b)  # the service's string order, not Python's
    if op == "gt":
        return bool(a > b)
    if op == "ge":
        return bool(a >= b)
    if op == "lt":
        return bool(a < b)
    return bool(a <= b)


#: The property types a literal of a type also compares with, by value: the service compares an
#: Int32 literal numerically with Int64 and Double properties (an Int64 or Double literal only
#: matches its own type), so ``N ge 5`` finds an Int64 ``N`` of 7.
_WIDENED_BY: dict[str, tuple[str, ...]] = {INT32: (INT64, DOUBLE)}


def _literal_widening(node: Node | None) -> tuple[str, ...]:
    if node is None or node.kind != "lit":
        return ()
    return _WIDENED_BY.get(node.value[0], ())


def _compile(node: Node) -> Evaluator:
    kind = node.kind
    if kind == "lit":
        constant: Typed = node.value
        return lambda entity: constant
    if kind == "prop":
        name = node.value
        return lambda entity: entity.get(name)
    if kind == "cmp":
        left, right, op = _compile(node.left), _compile(node.right), node.op  # type: ignore[arg-type]
        if node.right is not None and node.right.kind == "lit" and node.left is not None and node.left.kind == "prop":
            # the common shape: Property op literal
            name = node.left.value
            edm, want = node.right.value

            widened = _WIDENED_BY.get(edm, ())

            def prop_vs_literal(entity: Entity) -> Typed:
                got = entity.get(name)
                if got is None:
                    return _FALSE
                if got[0] != edm and got[0] not in widened:
                    return None
                return _TRUE if _compare(op, got[1], want) else _FALSE

            return prop_vs_literal

        left_prop = node.left is not None and node.left.kind == "prop"
        right_prop = node.right is not None and node.right.kind == "prop"
        left_widens = _literal_widening(node.left)
        right_widens = _literal_widening(node.right)

        def comparison(entity: Entity) -> Typed:
            a, b = left(entity), right(entity)
            if (a is None and left_prop) or (b is None and right_prop):
                return _FALSE  # a property the entity lacks
            if a is None or b is None:
                return None
            if a[0] != b[0] and b[0] not in left_widens and a[0] not in right_widens:
                return None
            return _TRUE if _compare(op, a[1], b[1]) else _FALSE

        return comparison
    if kind == "not":
        operand = _compile_condition(node.left)  # type: ignore[arg-type]

        def negation(entity: Entity) -> Typed:
            value = operand(entity)
            if value is None or value[0] != BOOLEAN:
                return None
            return _FALSE if value[1] else _TRUE

        return negation
    left, right = _compile_condition(node.left), _compile_condition(node.right)  # type: ignore[arg-type]
    if kind == "and":

        def conjunction(entity: Entity) -> Typed:
            a = left(entity)
            a_bool = a[1] if a is not None and a[0] == BOOLEAN else None
            if a_bool is False:
                return _FALSE
            b = right(entity)
            b_bool = b[1] if b is not None and b[0] == BOOLEAN else None
            if b_bool is False:
                return _FALSE
            if a_bool is None or b_bool is None:
                return None
            return _TRUE

        return conjunction

    def disjunction(entity: Entity) -> Typed:
        a = left(entity)
        a_bool = a[1] if a is not None and a[0] == BOOLEAN else None
        if a_bool is True:
            return _TRUE
        b = right(entity)
        b_bool = b[1] if b is not None and b[0] == BOOLEAN else None
        if b_bool is True:
            return _TRUE
        if a_bool is None or b_bool is None:
            return None
        return _FALSE

    return disjunction


def _compile_condition(node: Node) -> Evaluator:
    """Like :func:`_compile`, for a node used as a condition: a missing bare property is false."""
    if node.kind == "prop":
        name = node.value
        return lambda entity: entity.get(name, _FALSE)
    return _compile(node)


# ------------------------------------------------------------------ key ranges

_FLIP = {"eq": "eq", "ne": "ne", "gt": "lt", "ge": "le", "lt": "gt", "le": "ge"}


@dataclass
class KeyRange:
    """Bounds on one key implied by the top-level conjunction (used to narrow a scan)."""

    eq: str | None = None
    lower: tuple[str, bool] | None = None  # (value, inclusive)
    upper: tuple[str, bool] | None = None

    def add(self, op: str, value: str) -> None:
        if op == "eq":
            self.eq = value if self.eq is None or self.eq == value else self.eq
            if self.eq != value:
                self.upper = ("", False)  # contradictory equalities: empty range
        elif op in ("gt", "ge"):
            bound = (value, op == "ge")
            if self.lower is None or utf16_key(value) > utf16_key(self.lower[0]) or (
                value == self.lower[0] and not bound[1]
            ):
                self.lower = bound
        elif op in ("lt", "le"):
            bound = (value, op == "le")
            if self.upper is None or utf16_key(value) < utf16_key(self.upper[0]) or (
                value == self.upper[0] and not bound[1]
            ):
                self.upper = bound


def _conjuncts(node: Node) -> list[Node]:
    if node.kind == "and":
        return _conjuncts(node.left) + _conjuncts(node.right)  # type: ignore[arg-type]
    return [node]


# ------------------------------------------------------------------ public

class Filter:
    """A compiled filter: ``matches(entity)`` and the key ranges it implies."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.root = _Parser(text).parse()
        self._eval = _compile_condition(self.root)
        self.ranges: dict[str, KeyRange] = {}
        #: The properties of the conjuncts that are all of the condition, when every one is a
        #: string literal compared with a property (not ``ne``); else None. See :meth:`decided_by`.
        self._range_names: set[str] | None = set()
        for node in _conjuncts(self.root):
            if node.kind != "cmp" or node.op == "ne" or node.left is None or node.right is None:
                self._range_names = None
                continue
            if node.left.kind == "prop" and node.right.kind == "lit":
                prop, lit, op = node.left, node.right, node.op
            elif node.right.kind == "prop" and node.left.kind == "lit":
                prop, lit, op = node.right, node.left, _FLIP[node.op]
            else:
                self._range_names = None
                continue
            if prop.value in ("PartitionKey", "RowKey", "TableName") and lit.value[0] == STRING:
                self.ranges.setdefault(prop.value, KeyRange()).add(op, lit.value[1])
                if self._range_names is not None:
                    self._range_names.add(prop.value)
            else:
                self._range_names = None

    def decided_by(self, names: tuple[str, ...]) -> bool:
        """True when the key ranges of ``names`` are the whole condition: every conjunct compares
        one of these properties (always strings on the rows scanned) with a string literal, so
        a scan bounded by :attr:`ranges` returns exactly the rows that match."""
        return self._range_names is not None and self._range_names <= set(names)

    def matches(self, entity: Entity) -> bool:
        """True only when the condition is definitely true for ``entity``."""
        return self._eval(entity) == _TRUE

    def evaluate(self, entity: Entity) -> bool | None:
        """True, False, or None (unknown: missing property or type mismatch)."""
        value = self._eval(entity)
        if value is None or value[0] != BOOLEAN:
            return None
        return bool(value[1])


def compile_filter(text: str) -> Filter:
    """Parse ``text``; FilterError when it is not a valid query condition."""
    return Filter(text)
