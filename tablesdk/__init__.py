"""tablesdk: a Python client SDK for the Azure Table service (public names re-exported once all modules land)."""

from ._version import __version__

__all__ = ["__version__"]
