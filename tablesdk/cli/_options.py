"""The options every command takes: the account, the wire format, retries, progress and debug.

They go before the command (``tablesdk --dev query T``) and, as ``az`` users type
them, after it too (``tablesdk query T --dev``): the group reads them into a
:class:`Settings`, and each :class:`TablesdkCommand` takes them again, overriding
what came before it. :class:`Settings` also knows every secret they hold, so
that no output shows one.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import click

from .._core._account import CloudStorageAccount
from .._core._auth import SasCredential, SharedKeyCredential
from .._clients._client import CloudTableClient
from .._core._errors import require_positive_seconds
from .._pipeline._retry import ExponentialRetry, NoRetry
from .._core._redaction import redact_text
from ._encryption_options import ENCRYPTION_OPTIONS, key_file_secrets, policy_from_options
from ._progress import Progress, progress_wanted

if TYPE_CHECKING:
    from .._encryption import TableEncryptionPolicy

__all__ = [
    "IMPORT_MODES", "CommandGroup", "Settings", "TablesdkCommand", "deprecated_spelling", "enable_debug", "global_options",
]

#: ``--mode`` of import and copy: the command line's spelling -> the bulk loader's mode.
IMPORT_MODES = {"insert": "insert", "upsert": "merge", "merge": "merge", "replace": "replace"}


@dataclass
class Settings:
    """The global options, the secrets they hold (for redaction) and the client made from them."""

    connection_string: str | None = None
    account_name: str | None = None
    account_key: str | None = None
    sas_token: str | None = None
    table_endpoint: str | None = None
    dev: bool = False
    payload_format: str = "json"
    api_version: str | None = None
    debug: bool = False
    progress: bool | None = None
    retries: int | None = None
    deadline: float | None = None
    encryption_key_file: str | None = None
    encryption_key_id: str | None = None
    encryption_protocol: str | None = None
    encrypt_properties: str | None = None
    require_encryption: bool | None = None
    #: The options of the command being run (what an error line may suggest); None before one runs.
    command_options: frozenset[str] | None = None
    #: The command being run, as typed after ``tablesdk`` (``tables list``); None before one runs.
    command: str | None = None
    other_connection_strings: list[str] = field(default_factory=list, repr=False)
    _clients: list[CloudTableClient] = field(default_factory=list, repr=False)

    def secrets(self) -> list[str]:
        """Every secret text the options hold: keys, SAS tokens and their signatures (also decoded)."""
        found = [self.account_key, self.sas_token]
        for connection_string in (self.connection_string, *self.other_connection_strings):
            for part in (connection_string or "").split(";"):
                name, _, value = part.partition("=")
                if name.strip().lower() in ("accountkey", "sharedaccesssignature"):
                    found.append(value.strip())
        for token in list(found):
            for field_ in (token or "").lstrip("?").split("&"):
                if field_.lower().startswith("sig="):
                    found.extend((field_[4:], unquote(field_[4:])))
        found.extend(key_file_secrets(self.encryption_key_file))
        return [secret for secret in found if secret and len(secret) >= 4]

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced, and SAS signatures in URLs removed."""
        for secret in sorted(self.secrets(), key=len, reverse=True):
            text = text.replace(secret, "REDACTED")
        return redact_text(text)

    def account(self) -> CloudStorageAccount:
        """The account the options describe; ``click.UsageError`` when they describe none."""
        if self.dev:
            return CloudStorageAccount.development_storage_account()
        if self.account_name:
            if self.account_key and self.sas_token:
                raise click.UsageError("give --account-key or --sas-token, not both")
            endpoint = self.table_endpoint or f"https://{self.account_name}.table.core.windows.net"
            credential = (
                SharedKeyCredential(self.account_name, self.account_key) if self.account_key
                else SasCredential(self.sas_token) if self.sas_token else None
            )
            return CloudStorageAccount(self.account_name, endpoint, credential)
        if self.connection_string:
            return CloudStorageAccount.parse(self.connection_string)
        raise click.UsageError(
            "no account: give --connection-string (or set AZURE_STORAGE_CONNECTION_STRING), "
            "--account-name with --account-key or --sas-token, or --dev for the local emulator"
        )

    def encryption_policy(self) -> TableEncryptionPolicy | None:
        """The client-side encryption the options describe (``--encryption-key-file`` ...), or None."""
        return policy_from_options(
            self.encryption_key_file, self.encryption_key_id, self.encryption_protocol, self.encrypt_properties,
            bool(self.require_encryption),
        )

    def client(
        self, account: CloudStorageAccount | None = None, payload_format: str | None = None, *, encryption: bool = True
    ) -> CloudTableClient:
        """A client for ``account`` (default: the options' account), closed when the command ends; with
        the options' encryption policy as its default unless ``encryption`` is False (it reads and
        writes entities as stored)."""
        options: dict[str, Any] = {"api_version": self.api_version}
        if encryption:
            options["encryption_policy"] = self.encryption_policy()
        if self.retries is not None:
            options["retry_policy"] = ExponentialRetry(self.retries) if self.retries else NoRetry()
        if self.deadline is not None:
            options["operation_deadline"] = self.deadline
        client = (account or self.account()).create_cloud_table_client(payload_format or self.payload_format, **options)
        self._clients.append(client)
        return client

    def progress_for(self, description: str, total: int | None = None) -> Progress:
        """A progress display for a long command (shown only when wanted)."""
        return Progress(description, progress_wanted(self.progress), total)

    def close(self) -> None:
        """Close every client made."""
        for client in self._clients:
            client.close()
        self._clients.clear()


def enable_debug(settings: Settings) -> None:
    # logging is imported here, for --debug only: not by every command's start-up.
    import logging

    class _RedactingFormatter(logging.Formatter):
        def __init__(self, settings: Settings) -> None:
            super().__init__("%(asctime)s %(name)s %(levelname)s %(message)s")
            self.settings = settings

        def format(self, record: logging.LogRecord) -> str:
            return self.settings.redact(super().format(record))

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter(settings))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)


# ---------------------------------------------------------------- the connection options


if TYPE_CHECKING:
    _FloatParamType = click.ParamType[float]
else:  # generic in the typing of newer click only
    _FloatParamType = click.ParamType


class _Seconds(_FloatParamType):
    """A number of seconds > 0, as the library's ``operation_deadline`` takes it."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            return require_positive_seconds("seconds", float(value))
        except ValueError:
            self.fail(f"{value!r} is not a number of seconds > 0", param, ctx)


_SECONDS = _Seconds()

#: The options of the whole command line: (declarations, click arguments). They go before the
#: command (``tablesdk --dev query T``) and, as ``az`` users type them, after it too
#: (``tablesdk query T --dev``): see :class:`TablesdkCommand`.
_GLOBAL_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--connection-string",), {"metavar": "CS", "help": "Storage connection string."}),
    (("--account-name",), {"metavar": "NAME", "help": "Account name (with --account-key or --sas-token)."}),
    (("--account-key",), {"metavar": "KEY", "help": "Account key (Shared Key signing)."}),
    (("--sas-token",), {"metavar": "SAS", "help": "Shared access signature (the query string, with or without '?')."}),
    (("--table-endpoint",), {"metavar": "URL", "help": "Table endpoint for --account-name (default: the public cloud's)."}),
    (("--dev",), {"is_flag": True, "help": "Use the local emulator (devstoreaccount1 on 127.0.0.1:10002)."}),
    (("--wire-format", "payload_format"), {
        "type": click.Choice(["json", "atom"]),
        "help": "The format spoken to the service (atom speaks service version 2015-04-05 unless --api-version "
                "says otherwise). Not the file format of export/import: that is --file-format.",
    }),
    (("--api-version",), {"metavar": "VERSION", "help": "x-ms-version to send (default: the format's own)."}),
    (("--retries",), {"type": click.IntRange(0, 20), "metavar": "N",
                      "help": "Retries of a failed request (default: the library's exponential back-off policy; 0: none)."}),
    (("--deadline",), {"type": _SECONDS, "metavar": "SECONDS",
                       "help": "Bound each request to the service, its retries and waits included, to SECONDS "
                               "(default: none, as in the library: each attempt is bounded by its timeouts)."}),
    (("--progress/--no-progress", "progress"), {"default": None,
                                                "help": "Show progress on stderr (default: when it is a terminal)."}),
    (("--debug",), {"is_flag": True, "help": "Log requests and show tracebacks on stderr (secrets removed)."}),
    *ENCRYPTION_OPTIONS,
)
#: Before the command, only: the group's defaults and the environment variable.
_GROUP_ONLY: dict[str, dict[str, Any]] = {
    "--connection-string": {"envvar": "AZURE_STORAGE_CONNECTION_STRING", "show_envvar": True},
    "--wire-format": {"default": "json", "show_default": True},
}


def deprecated_spelling(old: str, new: str, meaning: str) -> None:
    """Say on stderr that ``old`` still works but is going away (stdout stays data only)."""
    click.echo(f"tablesdk: warning: {old} is deprecated: use {new} ({meaning})", err=True)


def _store_late_option(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """A connection option given after the command: it overrides the one before it."""
    name = param.name or ""
    if ctx.get_parameter_source(name) is not click.core.ParameterSource.COMMANDLINE:
        return
    settings = ctx.find_object(Settings)
    if settings is None:  # pragma: no cover - the group always makes one
        return
    if name == "debug" and value and not settings.debug:
        enable_debug(settings)
    setattr(settings, name, value)


def _late_options() -> list[click.Option]:
    return [
        click.Option(list(declarations), expose_value=False, callback=_store_late_option,
                     **{"default": None, **arguments})
        for declarations, arguments in _GLOBAL_OPTIONS
    ]


class TablesdkCommand(click.Command):
    """A command that also takes the connection options after its arguments (``az`` style)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(_late_options())

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, recording its options first: an error line suggests only options it has."""
        settings = ctx.find_object(Settings)
        if settings is not None:
            settings.command_options = self.option_names()
            settings.command = ctx.command_path.partition(" ")[2] or None
        return super().invoke(ctx)

    def option_names(self) -> frozenset[str]:
        """Every option this command takes (its own and the connection options), as typed."""
        return frozenset(name for param in self.params if isinstance(param, click.Option)
                         for name in (*param.opts, *param.secondary_opts) if name.startswith("--"))

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command's own options, then the connection options under their own heading."""
        late = {id(option) for option in self.params[-len(_GLOBAL_OPTIONS):]}
        own: list[tuple[str, str]] = []
        connection: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                (connection if id(param) in late else own).append(record)
        if own:
            with formatter.section("Options"):
                formatter.write_dl(own)
        with formatter.section("Connection options (before or after the command)"):
            formatter.write_dl(connection)


class CommandGroup(click.Group):
    """A group of commands (``tables``) whose commands take the connection options after them too."""

    command_class = TablesdkCommand


def global_options(function: Any) -> Any:
    """Decorate the group's function with the connection options (with the group's defaults)."""
    for declarations, arguments in reversed(_GLOBAL_OPTIONS):
        function = click.option(*declarations, **{**arguments, **_GROUP_ONLY.get(declarations[0], {})})(function)
    return function
