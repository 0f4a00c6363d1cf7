"""What to install for an optional part of tablesdk, said the same way wherever tablesdk came from.

tablesdk is not on PyPI, so asking pip for the extra of a package named tablesdk finds nothing. A hint that names the
extra's own packages is true for a checkout, a wheel and an editable install alike; it also names
the extra, for a reinstall from the checkout or the wheel. setup.cfg's ``extras_require`` holds the
same lists (a unit test keeps them equal).
"""

from __future__ import annotations

from .._version import __version__

__all__ = ["EXTRAS", "install_hint", "require_extra"]

#: The packages of each optional extra, as setup.cfg declares them.
EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("click>=8.1", "rich>=13"),
    "aio": ("aiohttp>=3.10",),
    "tracing": ("opentelemetry-api>=1.20",),
    "arrow": ("pyarrow>=14", "pandas>=2.1"),
    "dask": ("pyarrow>=14", "pandas>=2.1", "dask[dataframe]>=2024.1", "distributed>=2024.1"),
    "ray": ("pyarrow>=14", "ray[data]>=2.40"),
    "polars": ("pyarrow>=14", "polars>=1.20"),
    "models": ("pydantic>=2", "attrs>=23"),
    "spark": ("pyspark>=4.1", "pyarrow>=14", "pandas>=2.1"),
    "encryption": ("cryptography>=41",),
}


def install_hint(extra: str) -> str:
    """The commands that install ``extra``: its packages, or the extra from a checkout or the wheel."""
    packages = " ".join(f"'{requirement}'" for requirement in EXTRAS[extra])
    return (
        f"pip install {packages} (or reinstall tablesdk with the '{extra}' extra: `pip install '.[{extra}]'` "
        f"in a checkout, `pip install 'tablesdk-{__version__}-py3-none-any.whl[{extra}]'` from the wheel)"
    )


def require_extra(extra: str, modules: tuple[str, ...], what: str) -> None:
    """Raise an ImportError that says what to install when one of ``modules`` is not installed.

    Looks the modules up without importing them, so a module that calls this when it is imported
    costs nothing more.
    """
    from importlib.util import find_spec

    missing = [module for module in modules if find_spec(module) is None]
    if missing:
        raise ImportError(f"{what} needs {', '.join(missing)}: {install_hint(extra)}", name=missing[0])
