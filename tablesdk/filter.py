"""Filter expressions: property references, comparisons and their ``$filter`` text.

This module sits below ``entity.py`` so that declared properties of a
``TableEntity`` subclass can be property references (``Blog.Rating > 3``).
"""

from __future__ import annotations

from .edm import EdmType

__all__ = ["PropertyRef", "prop"]


class PropertyRef:
    """A reference to a property by name, with an optional declared EDM type."""

    __slots__ = ("name", "edm_type")

    def __init__(self, name: str, edm_type: EdmType | None = None) -> None:
        self.name = name
        self.edm_type = edm_type

    __hash__ = object.__hash__


def prop(name: str, edm_type: EdmType | None = None) -> PropertyRef:
    """A property reference for building filters: ``prop("Rating") > 3``."""
    return PropertyRef(name, edm_type)
