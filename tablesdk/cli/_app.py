"""The ``tablesdk`` commands (click): connection options, error reporting and every command.

Exit statuses: 0 done; 1 an error (one line on stderr: the service's status and
error code, what went wrong and what to do; the traceback only with
``--debug``); 2 a usage error; 3 the command ran but some entities failed
(import, copy: they are in the rejects file); 130 interrupted (Ctrl-C), 143
terminated (SIGTERM): the command stops as at an error, its files resumable.
"""

from __future__ import annotations

import os
import re
from contextlib import AbstractContextManager, nullcontext
import sys
from typing import IO, TYPE_CHECKING, Any

import click

from .._core._account import CloudStorageAccount
from .._clients._client import CloudTableClient
from .._entities._entity import DynamicEntity, entity_from_payload
from .._core._errors import ConnectionFailedError, TableServiceError, TableValidationError
from ._files import FILE_FORMATS, PARQUET, parse_entity_text, payload_json
from ._reencrypt_command import reencrypt_command
from ._options import (
    IMPORT_MODES, CommandGroup, Settings, TablesdkCommand, deprecated_spelling, enable_debug, global_options,
)
from ._progress import progress_wanted
from ._params import filter_options

# The commands' work (_export, _parquet, _transfer: Arrow, the export's temporary files and
# dataclasses) is imported by the commands that do it, not by every start of the command line
# (``tablesdk --help`` takes the command tree and click only).
if TYPE_CHECKING:
    from ._filter_check import NumberFilterCheck
    from ._transfer import ImportSummary

__all__ = ["cli", "run", "EXIT_ERROR", "EXIT_USAGE", "EXIT_PARTIAL"]

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
#: Rows ``query`` shows as a grid unless ``--limit`` says otherwise.
GRID_LIMIT = 100

#: What to do about a service error, by error code (then by status): a first piece of advice and
#: alternatives joined to it with "or". An alternative that names an option (outside a quoted
#: `tablesdk ...` command) is given only by a command that has that option.
_HINTS_BY_CODE: dict[str, tuple[str, ...]] = {
    "TableNotFound": ("check the table name", "create it (`tablesdk tables create NAME`)", "pass --create-table"),
    "TableAlreadyExists": ("the table is there already; use it, or pick another name",),
    "TableBeingDeleted": ("the service is still deleting a table of that name; retry in a minute",),
    "ResourceNotFound": ("check the PartitionKey and RowKey (`tablesdk query TABLE --filter ...` lists keys)",),
    "EntityAlreadyExists": ("use `tablesdk upsert` (or `tablesdk replace`) to overwrite it", "pass --mode upsert"),
    "UpdateConditionNotSatisfied": ("the entity changed since you read it: read it again for its ETag", "omit --etag"),
    "AuthenticationFailed": ("check the account key or SAS token (and that this machine's clock is right)",),
    "AuthorizationFailure": ("the credential may not do this: check the SAS permissions and expiry",),
    "AuthorizationPermissionMismatch": ("the SAS token lacks the permission: create one with it",),
    "InvalidInput": ("check the property values and names", "check the --filter syntax"),
    "OutOfRangeInput": ("a value is outside what the service accepts: check names, keys and sizes",),
    "ServerBusy": ("the service is throttling: retry later", "with fewer --workers", "with a lower --parallel"),
    "AtomFormatNotSupported": ("this service takes JSON only (Azurite, and the service from version 2015-12-11): "
                               "drop `--wire-format atom`",),
}
#: Advice for an error whose code is too general for the command at hand: by (command, status) or by
#: (code, a word of the message).
_HINTS_BY_COMMAND: dict[tuple[str, int], tuple[str, ...]] = {
    ("tables list", 404): ("this endpoint is no Table service: check the table endpoint (an account's is "
                           "https://ACCOUNT.table.core.windows.net) or the connection string",),
}
_HINTS_BY_MESSAGE: dict[tuple[str, str], tuple[str, ...]] = {
    ("InvalidInput", "etag"): ("pass --etag as the service gave it (W/\"datetime'...'\", as `tablesdk get` "
                               "prints it) or * for any version",),
}
_HINTS_BY_STATUS: dict[int, tuple[str, ...]] = {
    400: ("check the command's arguments (names, values)", "check the --filter syntax"),
    403: ("check the account key or SAS token, its permissions and expiry",),
    404: ("check the table name and keys",),
    409: ("the resource is in the way: see the error code",),
    412: ("the entity changed since you read it: read it again for its ETag",),
    500: ("the service failed: retry later",),
    503: ("the service is busy: retry later",),
}
_OPTION_NAME = re.compile(r"--[a-z][a-z0-9-]*")
_QUOTED_COMMAND = re.compile(r"`[^`]*`")


def options_named(text: str) -> set[str]:
    """The options ``text`` tells the user to pass (those inside a quoted `tablesdk ...` command aside)."""
    return set(_OPTION_NAME.findall(_QUOTED_COMMAND.sub("", text)))


def _hint(advice: tuple[str, ...], options: frozenset[str] | None) -> str:
    """``advice`` joined with "or", without the pieces naming an option the command lacks (all of those
    when the command is not known)."""
    kept = [piece for piece in advice
            if not options_named(piece) or (options is not None and options_named(piece) <= options)]
    return ", or ".join(kept)


_active = Settings()
#: The command line being run (what an interrupted import says to run again).
_argv: list[str] = []


def _settings() -> Settings:
    settings = click.get_current_context().find_object(Settings)
    return settings if settings is not None else _active


# ---------------------------------------------------------------- errors


def describe_error(error: BaseException, options: frozenset[str] | None = None, command: str | None = None) -> str:
    """One line saying what went wrong and what to do (``options``: those of the command that failed,
    so that the line suggests only options it has; None: suggest none; ``command``: the command
    that failed, as typed after ``tablesdk``)."""
    if isinstance(error, ConnectionFailedError):
        if error.unresolved:
            return (f"cannot reach the service ({error.message}); check the account name / endpoint "
                    "(--account-name, --table-endpoint or the connection string)")
        return (f"cannot reach the service ({error.message}); check the account name / endpoint, the network, "
                "and that the service is running (for --dev: `tablesdk serve`)")
    if isinstance(error, TableServiceError):
        head = " ".join(str(part) for part in (error.status_code, error.error_code) if part)
        advice = _advice(error, command)
        hint = _hint(advice, options) if advice else None
        text = f"{head}: {error.message}" if head else error.message
        return f"{text} - {hint}" if hint else text
    if isinstance(error, TableValidationError):
        return f"invalid input: {error} - fix the value and run again"
    if isinstance(error, ImportError) and "pip install" in str(error):  # a missing extra: what to install
        return str(error)
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.strerror or error}: {error.filename}"
    if isinstance(error, ValueError):  # the command's own refusals (ExportError, OutputFileError) say what to do
        return str(error)
    return f"{type(error).__name__}: {error} (run with --debug for the traceback)"


def _advice(error: TableServiceError, command: str | None) -> tuple[str, ...] | None:
    code, status, message = error.error_code or "", error.status_code or 0, (error.message or "").lower()
    for (hint_code, word), advice in _HINTS_BY_MESSAGE.items():
        if code == hint_code and word in message:
            return advice
    return (_HINTS_BY_COMMAND.get((command or "", status)) or _HINTS_BY_CODE.get(code)
            or _HINTS_BY_STATUS.get(status))


def report_error(error: BaseException, settings: Settings) -> int:
    """Print the error line (and with --debug the traceback) on stderr, secrets removed."""
    if settings.debug:
        import traceback  # with --debug only (start-up)

        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        sys.stderr.write(settings.redact(text))
    line = " ".join(describe_error(error, settings.command_options, settings.command).split())
    sys.stderr.write(settings.redact(f"tablesdk: error: {line}") + "\n")
    sys.stderr.flush()
    return EXIT_ERROR


class TablesdkGroup(click.Group):
    """The top-level group: runs a command and turns any failure into one line and an exit status."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """Run the command line; exit with its status (or return it when not standalone)."""
        code = self._run(args, prog_name or "tablesdk", complete_var, **extra)
        if standalone_mode:
            sys.exit(code)
        return code

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a reader of stdout that went away (`| head`) ends it quietly with status 0."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # not an error of ours; click itself would turn it into a bare exit 1
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            return 0

    def _run(self, args: Any, prog_name: str, complete_var: str | None, **extra: Any) -> int:
        global _active, _argv
        _active = Settings()
        _argv = [str(arg) for arg in (sys.argv[1:] if args is None else args)]
        previous = _on_sigterm(_terminate)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            return int(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            return int(exc.exit_code)
        except (click.Abort, KeyboardInterrupt) as exc:
            if isinstance(exc, Terminated) or isinstance(exc.__context__, Terminated):
                sys.stderr.write("tablesdk: terminated\n")
                return 143
            sys.stderr.write("tablesdk: interrupted\n")
            return 130
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line and a status
            return report_error(exc, _active)
        finally:
            _on_sigterm(previous)
            _active.close()
        return result if isinstance(result, int) else 0


class Terminated(KeyboardInterrupt):
    """SIGTERM: a command stops as at Ctrl-C (its files are left resumable, it says how to go on)."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


def _on_sigterm(handler: Any) -> Any:
    """Install ``handler`` for SIGTERM (on the main thread only; None: leave it); returns the one before."""
    import signal
    import threading

    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


# ---------------------------------------------------------------- the group


TablesdkGroup.command_class = TablesdkCommand


@click.group(cls=TablesdkGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@global_options
@click.option("--format", "legacy_format", type=click.Choice(["json", "atom"]), hidden=True,
              help="Deprecated spelling of --wire-format.")
@click.version_option(package_name="tablesdk", prog_name="tablesdk")
@click.pass_context
def cli(ctx: click.Context, /, legacy_format: str | None, **options: Any) -> None:
    """Scripting against Azure Table storage: tables, entities, queries, import and export.

    Data goes to stdout, messages and progress to stderr. The connection options may
    come before the command or after it (tablesdk query T --dev).
    """
    global _active
    if legacy_format is not None:
        deprecated_spelling("tablesdk --format", "--wire-format", "the format spoken to the service")
        if ctx.get_parameter_source("payload_format") is not click.core.ParameterSource.COMMANDLINE:
            options["payload_format"] = legacy_format
    _active = ctx.obj = Settings(**options)
    if _active.debug:
        enable_debug(_active)


# ---------------------------------------------------------------- tables


@cli.group(cls=CommandGroup)
def tables() -> None:
    """List, create, delete tables, or test whether one exists."""


@tables.command("list")
@click.option("--prefix", metavar="P", help="Only tables whose name starts with P.")
def tables_list(prefix: str | None) -> None:
    """Print the account's table names, one a line."""
    for name in _settings().client().list_tables(prefix):
        click.echo(name)


@tables.command("create")
@click.argument("name")
@click.option("--if-not-exists", is_flag=True, help="Succeed when the table exists already.")
def tables_create(name: str, if_not_exists: bool) -> None:
    """Create table NAME."""
    client = _settings().client()
    if if_not_exists:
        client.create_table_if_not_exists(name)
    else:
        client.create_table(name)


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(f"{question} Pass --yes to confirm when not at a terminal.")
    click.confirm(question, abort=True, err=True)


@tables.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def tables_delete(name: str, yes: bool) -> None:
    """Delete table NAME and every entity in it."""
    _confirm(f"Delete table {name!r} and all its entities?", yes)
    _settings().client().delete_table(name)


@tables.command("exists")
@click.argument("name")
def tables_exists(name: str) -> None:
    """Print true or false (exit status 0 either way)."""
    click.echo("true" if _settings().client().table_exists(name) else "false")


# ---------------------------------------------------------------- single entities


def _select(value: str | None) -> tuple[str, ...]:
    return tuple(name.strip() for name in (value or "").split(",") if name.strip())


def _entity_argument(text: str) -> DynamicEntity:
    """--entity: JSON text in the service's form, '@FILE' for a file's, '-' for stdin's."""
    if text == "-":
        raw = sys.stdin.buffer.read()
    elif text.startswith("@"):
        with open(text[1:], "rb") as handle:
            raw = handle.read()
    else:
        raw = text.encode("utf-8")
    try:
        payload = parse_entity_text(raw)
    except ValueError as exc:
        raise click.BadParameter(f"not an entity in JSON form: {exc}", param_hint="--entity") from None
    return entity_from_payload(DynamicEntity, payload)


_ENTITY_OPTION = click.option("--entity", "entity_text", required=True, metavar="JSON",
                              help='The entity, e.g. \'{"PartitionKey":"p","RowKey":"1","N":5}\'; @FILE or - to read it.')
_ETAG_OPTION = click.option("--etag", metavar="ETAG", default="*", show_default=True,
                            help="Only if the entity still has this ETag.")


@cli.command("get")
@click.argument("table")
@click.argument("partition_key")
@click.argument("row_key")
@click.option("--select", metavar="A,B", help="Only these properties (the keys always come).")
def get_command(table: str, partition_key: str, row_key: str, select: str | None) -> None:
    """Print one entity in the service's JSON form (with its Timestamp and ETag)."""
    payload = _settings().client().get_entity_payload(table, partition_key, row_key, select=_select(select) or None)
    click.echo(payload_json(payload, timestamp=True, etag=True).decode("utf-8"))


@cli.command("insert")
@click.argument("table")
@_ENTITY_OPTION
def insert_command(table: str, entity_text: str) -> None:
    """Insert an entity (fails if it exists); prints its ETag."""
    click.echo(_settings().client().insert_entity(table, _entity_argument(entity_text)) or "")


@cli.command("upsert")
@click.argument("table")
@_ENTITY_OPTION
@click.option("--mode", type=click.Choice(["merge", "replace"]), default="merge", show_default=True,
              help="Insert or merge, or insert or replace.")
def upsert_command(table: str, entity_text: str, mode: str) -> None:
    """Insert an entity, or update it if it exists; prints its ETag."""
    click.echo(_settings().client().upsert_entity(table, _entity_argument(entity_text), mode=mode) or "")


@cli.command("merge")
@click.argument("table")
@_ENTITY_OPTION
@_ETAG_OPTION
def merge_command(table: str, entity_text: str, etag: str) -> None:
    """Merge properties into an existing entity; prints its ETag."""
    client = _settings().client()
    click.echo(client.update_entity(table, _entity_argument(entity_text), mode="merge", etag=etag) or "")


@cli.command("replace")
@click.argument("table")
@_ENTITY_OPTION
@_ETAG_OPTION
def replace_command(table: str, entity_text: str, etag: str) -> None:
    """Replace an existing entity; prints its ETag."""
    client = _settings().client()
    click.echo(client.update_entity(table, _entity_argument(entity_text), mode="replace", etag=etag) or "")


@cli.command("delete")
@click.argument("table")
@click.argument("partition_key")
@click.argument("row_key")
@_ETAG_OPTION
def delete_command(table: str, partition_key: str, row_key: str, etag: str) -> None:
    """Delete one entity."""
    _settings().client().delete_entity(table, partition_key=partition_key, row_key=row_key, etag=etag)


# ---------------------------------------------------------------- queries


_FILTER_OPTION = filter_options("OData $filter, e.g. \"PartitionKey eq 'p'\" or \"Age gt @age\" with --param age=30.")
_SELECT_OPTION = click.option("--select", metavar="A,B", help="Only these properties (the keys always come).")


@cli.command("query")
@click.argument("table")
@_FILTER_OPTION
@_SELECT_OPTION
@click.option("--top", type=click.IntRange(min=1), help="At most N entities.")
@click.option("--output", "-o", type=click.Choice(["table", "json", "jsonl", "csv"]),
              help="table (a grid; the default at a terminal), json, jsonl (default in pipes) or csv.")
@click.option("--limit", type=click.IntRange(min=0), default=GRID_LIMIT, show_default=True,
              help="Rows the grid shows (0: all); the other outputs print every entity (cap them with --top).")
def query_command(table: str, filter_: str | None, select: str | None, top: int | None, output: str | None,
                  limit: int) -> None:
    """Print the entities of TABLE that match --filter."""
    from ._export import ExportOutput, ExportSpec, KeyRange
    from ._filter_check import NumberFilterCheck
    from ._transfer import build_query, pages

    settings = _settings()
    client = settings.client()
    query = build_query(client, table, filter_, _select(select), top)
    check = NumberFilterCheck(client, table, filter_)
    output = output or ("table" if sys.stdout.isatty() else "jsonl")
    if output == "table":
        _print_grid(client, query, limit, check)
    elif output == "json":
        _print_json_array(client, query, check)
    else:
        spec = ExportSpec(table, filter_, _select(select), output)
        out = ExportOutput.open(spec, "-", False, [KeyRange()])
        out.timestamp = True
        for payloads, _ in pages(client, query):
            check.page(payloads)
            out.write_page(payloads)
            out.checkpoint()
        out.finish()
        check.finish(out.count)


def _print_json_array(client: CloudTableClient, query: Any, check: NumberFilterCheck) -> None:
    from ._transfer import pages

    out = sys.stdout.buffer
    separator = b"[\n"
    for payloads, _ in pages(client, query):
        check.page(payloads)
        for payload in payloads:
            out.write(separator + payload_json(payload, timestamp=True))
            separator = b",\n"
    out.write(b"[]\n" if separator == b"[\n" else b"\n]\n")
    out.flush()
    check.finish(separator != b"[\n")


def _print_grid(client: CloudTableClient, query: Any, limit: int, check: NumberFilterCheck) -> None:
    """The first ``limit`` entities as a grid, and on stderr how many more there are.

    A grid is for reading: rich lays it out only once every row is in, so a
    whole table would take minutes and hold every row in memory. Reading stops
    at the page holding the entity after the last one shown.
    """
    from rich.console import Console
    from rich.table import Table

    from .._entities._edm import EdmType, to_atom_text
    from ._transfer import pages

    rows: list[dict[str, str]] = []
    columns: dict[str, None] = {"PartitionKey": None, "RowKey": None, "Timestamp": None}
    read, more = 0, False
    for payloads, token in pages(client, query):
        check.page(payloads)
        for payload in payloads[: limit - len(rows)] if limit else payloads:
            row = {}
            for name, value in payload.values.items():
                if value is not None:
                    edm = payload.types.get(name) or EdmType.STRING
                    row[name] = value if edm is EdmType.STRING else to_atom_text(value, edm)
                    columns.setdefault(name, None)
            rows.append(row)
        read += len(payloads)
        more = token is not None
        if limit and read > limit:
            break
    check.finish(read)
    grid = Table(*columns, show_lines=False)
    for column in grid.columns:
        column.overflow = "fold"  # a long value wraps within its cell instead of being cut off
    for row in rows:
        grid.add_row(*(row.get(name, "") for name in columns))
    Console(soft_wrap=False).print(grid)
    if len(rows) < read:
        total = f"{read}+" if more else str(read)
        click.echo(f"tablesdk: showing {len(rows)} of {total} entities; use --limit N to see more, "
                   "or --output jsonl (or csv) for all", err=True)


@cli.command("count")
@click.argument("table")
@_FILTER_OPTION
def count_command(table: str, filter_: str | None) -> None:
    """Print how many entities of TABLE match --filter (reads only their keys)."""
    from ._filter_check import NumberFilterCheck
    from ._transfer import build_query, count_entities

    settings = _settings()
    client = settings.client()
    with settings.progress_for(f"counting {table}") as progress:
        counted = count_entities(client, build_query(client, table, filter_), progress)
    click.echo(counted)
    NumberFilterCheck(client, table, filter_).finish(counted)


# ---------------------------------------------------------------- export, import, copy, delete-entities


def _file_format_options(function: Any) -> Any:
    """--file-format, and its old spelling --format (which before the command means the wire format)."""
    function = click.option("--format", "legacy_file_format", type=click.Choice([*FILE_FORMATS, PARQUET]), hidden=True,
                            help="Deprecated spelling of --file-format.")(function)
    return click.option("--file-format", "file_format", type=click.Choice([*FILE_FORMATS, PARQUET]),
                        help="jsonl, csv or parquet (default: from FILE's extension, else jsonl). "
                             "Not the wire format: that is --wire-format.")(function)


def _file_format(path: str, given: str | None, legacy: str | None = None) -> str:
    if legacy is not None:
        deprecated_spelling(f"{click.get_current_context().info_name} --format", "--file-format",
                            "the format of the file")
        given = given or legacy
    if given:
        return given
    if path.lower().endswith(".parquet"):
        return PARQUET
    return "csv" if path.lower().endswith(".csv") else "jsonl"


def entities_text(count: int) -> str:
    """``1 entity``, ``2 entities``."""
    return f"{count} {'entity' if count == 1 else 'entities'}"


_OVERWRITE_HELP = "Replace FILE if it exists (only once the command succeeds; a failed one leaves it as it was)."


@cli.command("export")
@click.argument("table")
@click.argument("file")
@_FILTER_OPTION
@_SELECT_OPTION
@_file_format_options
@click.option("--resume", is_flag=True, help="Continue an export that stopped (its state is in FILE.tablesdk-resume).")
@click.option("--parallel", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Read N PartitionKey ranges at once.")
@click.option("--overwrite", is_flag=True, help=_OVERWRITE_HELP)
@click.option("--since", "since", metavar="WATERMARK",
              help="Only the rows changed after WATERMARK: an Edm.DateTime (7 digits, e.g. "
                   "2024-01-02T03:04:05.1234567Z) or the text of a --since-state file.")
@click.option("--since-state", "since_state", metavar="STATE",
              help="Keep the watermark in STATE: start after the one it holds (else --since, else every row) "
                   "and replace it with the next one once the export succeeded.")
def export_command(table: str, file: str, filter_: str | None, select: str | None, file_format: str | None,
                   legacy_file_format: str | None, resume: bool, parallel: int, overwrite: bool,
                   since: str | None, since_state: str | None) -> None:
    """Write the entities of TABLE (matching --filter) to FILE, or to stdout for '-'.

    FILE is written beside its path and renamed into place when the export is done: a
    failed export leaves what was there as it was. A device or FIFO is written as a stream.
    """
    from ._export import RESUME_SUFFIX, ExportError, ExportSpec, export_table
    from ._filter_check import NumberFilterCheck
    from ._output import OutputFileError

    settings = _settings()
    spec = ExportSpec(table, filter_, _select(select), _file_format(file, file_format, legacy_file_format))
    changes = _changes_since(since, since_state, spec.file_format, resume, file)
    client = settings.client()
    if changes is not None and client.is_cosmos:
        from .._core._cosmos import cosmos_since_refused

        raise cosmos_since_refused("--since-state" if since_state is not None else "--since")
    check = NumberFilterCheck(client, table, filter_)
    try:
        with settings.progress_for(f"exporting {table}") as progress:
            if spec.file_format == PARQUET:
                from ._parquet import export_parquet  # Arrow and the bulk loader: not for JSON lines or CSV

                count = export_parquet(client, spec, file, resume=resume, parallel=parallel, progress=progress,
                                       overwrite=overwrite)
            else:
                count = export_table(client, spec, file, resume=resume, progress=progress, parallel=parallel,
                                     overwrite=overwrite, check=check, changes=changes)
    except (ExportError, OutputFileError):  # refused (its message says what to do)
        raise
    except BaseException:
        state = (os.path.realpath(file) if os.path.islink(file) else file) + RESUME_SUFFIX
        if file != "-" and os.path.exists(state):
            click.echo("tablesdk: the export stopped; run the same command with --resume to continue it", err=True)
        raise
    if changes is not None and since_state is not None:
        from ._since import write_since_state

        write_since_state(since_state, changes.watermark())
    click.echo(f"tablesdk: exported {entities_text(count)}", err=True)
    check.finish(count)


def _changes_since(since: str | None, since_state: str | None, file_format: str, resume: bool, file: str) -> Any:
    """The ``ChangeTracker`` of an export with ``--since``/``--since-state`` to ``file``, or None."""
    if since is None and since_state is None:
        return None
    from .._queries._watermark import ChangeTracker
    from ._export import ExportError
    from ._since import check_since_state, read_since

    if file_format == PARQUET:
        raise ExportError("--since and --since-state export JSON lines or CSV, not Parquet")
    if resume:
        raise ExportError("--since and --since-state cannot --resume: run the export again from the watermark")
    if since_state is not None:
        check_since_state(since_state, file)
    watermark = read_since(since, since_state)
    return None if watermark is None else ChangeTracker(watermark)


def _open_rejects(path: str | None, overwrite: bool) -> AbstractContextManager[IO[bytes] | None]:
    if not path:
        return nullcontext()
    from ._output import written_file

    # The rejects so far are kept when the command fails, where that destroys nothing.
    return written_file(path, overwrite=overwrite, keep_on_failure=True)


def _summary_exit(summary: ImportSummary, verb: str, rejects_path: str | None) -> int:
    skipped = f", {summary.skipped} skipped (in the table already)" if summary.skipped else ""
    resumed = f", {summary.resumed} skipped (written before the import stopped)" if summary.resumed else ""
    click.echo(f"tablesdk: {verb} {entities_text(summary.written)}{resumed}{skipped}, {summary.failed} failed",
               err=True)
    if not summary.failed:
        return 0
    where = f"see {rejects_path}" if rejects_path else "pass --rejects FILE to keep them"
    click.echo(f"tablesdk: first failure: {summary.first_error} ({where})", err=True)
    return EXIT_PARTIAL


_MODE_OPTION = click.option("--mode", type=click.Choice(list(IMPORT_MODES)), default="insert", show_default=True,
                            help="insert (fails for existing entities), upsert/merge (insert or merge), "
                                 "replace (insert or replace).")
_REJECTS_OPTION = click.option("--rejects", metavar="FILE", help="Write the entities that failed here (JSON lines, with their error).")
_SKIP_EXISTING_OPTION = click.option(
    "--skip-existing", is_flag=True,
    help="With --mode insert: an entity already in the table is done, not failed (counted as skipped), "
         "so an interrupted run can be run again.")
_OVERWRITE_REJECTS_OPTION = click.option(
    "--overwrite", is_flag=True,
    help="Replace the --rejects file if it exists (a failed command leaves it as it was).")
_WORKERS_OPTION = click.option("--workers", type=click.IntRange(1, 16), default=8, show_default=True,
                               help="Batches sent at once.")


def _check_skip_existing(skip_existing: bool, mode: str) -> None:
    if skip_existing and mode != "insert":
        raise click.UsageError(f"--skip-existing goes with --mode insert (--mode {mode} overwrites existing entities)")


@cli.command("import")
@click.argument("file")
@click.argument("table")
@_MODE_OPTION
@click.option("--create-table", is_flag=True, help="Create TABLE first if it does not exist.")
@_REJECTS_OPTION
@_file_format_options
@_SKIP_EXISTING_OPTION
@click.option("--resume", is_flag=True,
              help="Continue an import that stopped: the entities it wrote (in FILE.tablesdk-import) are skipped.")
@click.option("--state-file", metavar="PATH",
              help="Keep the import's resume state at PATH (default: FILE.tablesdk-import; needed for '-').")
@click.option("--infer-types", is_flag=True,
              help="CSV: a column without @Edm.Type whose every value is a number, true/false, a date-time or a "
                   "GUID gets that type (see docs/cli.md).")
@_WORKERS_OPTION
@_OVERWRITE_REJECTS_OPTION
def import_command(file: str, table: str, mode: str, create_table: bool, rejects: str | None,
                   file_format: str | None, legacy_file_format: str | None, skip_existing: bool, resume: bool,
                   state_file: str | None, infer_types: bool, workers: int, overwrite: bool) -> int:
    """Write the entities of FILE (or stdin for '-') into TABLE, in batches."""
    from ._import import entity_lines, infer_types as inferred_types, open_state, record_estimate, resume_command
    from ._import import stopped
    from ._import_state import ImportSpec
    from ._parquet import parquet_lines
    from ._transfer import ImportSummary, import_entities

    settings = _settings()
    _check_skip_existing(skip_existing, mode)
    client = settings.client()
    file_format = _file_format(file, file_format, legacy_file_format)
    if infer_types and (file_format != "csv" or file == "-"):
        raise click.UsageError("--infer-types reads a CSV file twice (once for the types): not "
                               + ("'-'" if file == "-" else f"a {file_format} file, whose values carry their types"))
    spec = ImportSpec(table, client.table_endpoint, mode, file_format, infer_types)
    state = open_state(file, state_file, spec, resume, resume_command(_argv, settings))
    skip = state.written if state is not None else ()
    types = inferred_types(file) if infer_types else None
    lines = parquet_lines(file) if file_format == PARQUET else entity_lines(file, file_format, skip, types)
    total = record_estimate(file, file_format) if progress_wanted(settings.progress) else None
    summary = ImportSummary()
    try:
        with _open_rejects(rejects, overwrite) as rejects_file:  # refused (an existing file) before anything is done
            if create_table:
                client.create_table_if_not_exists(table)
            summary.rejects = rejects_file
            with settings.progress_for(f"importing into {table}", total) as progress:
                import_entities(client, table, lines, mode, progress, summary, workers=workers,
                                skip_existing=skip_existing, state=state)
    except BaseException:
        stopped(state, _argv, settings, summary.written)
        raise
    if state is not None:
        state.remove()
    return _summary_exit(summary, "imported", rejects)


@cli.command("copy")
@click.argument("source")
@click.argument("destination")
@click.option("--to-connection-string", metavar="CS", help="The destination account (default: the same account).")
@click.option("--to-format", type=click.Choice(["json", "atom"]),
              help="The destination's wire format (default: --wire-format).")
@_FILTER_OPTION
@_SELECT_OPTION
@_MODE_OPTION
@click.option("--create-table", is_flag=True, help="Create DESTINATION first if it does not exist.")
@_REJECTS_OPTION
@_SKIP_EXISTING_OPTION
@_WORKERS_OPTION
@_OVERWRITE_REJECTS_OPTION
def copy_command(source: str, destination: str, to_connection_string: str | None, to_format: str | None,
                 filter_: str | None, select: str | None, mode: str, create_table: bool, rejects: str | None,
                 skip_existing: bool, workers: int, overwrite: bool) -> int:
    """Copy the entities of table SOURCE (matching --filter) into table DESTINATION, streaming."""
    from ._transfer import ImportSummary, build_query, copy_entities, with_encryption_metadata

    settings = _settings()
    _check_skip_existing(skip_existing, mode)
    source_client = settings.client(encryption=False)  # a copy keeps ciphertext as it is stored
    target_account = None
    if to_connection_string:
        settings.other_connection_strings.append(to_connection_string)  # its secrets are redacted too
        target_account = CloudStorageAccount.parse(to_connection_string)
    target = settings.client(target_account, to_format)
    query = build_query(source_client, source, filter_, with_encryption_metadata(_select(select)))
    with _open_rejects(rejects, overwrite) as rejects_file:  # refused (an existing file) before anything is done
        if create_table:
            target.create_table_if_not_exists(destination)
        summary = ImportSummary(rejects=rejects_file)
        with settings.progress_for(f"copying {source} to {destination}") as progress:
            copy_entities(source_client, query, target, destination, mode, progress, summary, workers=workers,
                          skip_existing=skip_existing)
    return _summary_exit(summary, "copied", rejects)


@cli.command("delete-entities")
@click.argument("table")
@filter_options("Which entities to delete (an OData $filter; @NAME takes its --param).", required=True)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", is_flag=True, help="Only print how many entities match.")
def delete_entities_command(table: str, filter_: str, yes: bool, dry_run: bool) -> None:
    """Delete the entities of TABLE matching --filter, in batches per partition."""
    from ._filter_check import NumberFilterCheck
    from ._transfer import build_query, count_entities, delete_entities

    settings = _settings()
    client = settings.client()
    query = build_query(client, table, filter_)
    check = NumberFilterCheck(client, table, filter_)
    if dry_run:
        with settings.progress_for(f"counting {table}") as progress:
            counted = count_entities(client, query, progress)
        click.echo(counted)
        check.finish(counted)
        return
    _confirm(f"Delete every entity of {table!r} matching {filter_!r}?", yes)
    with settings.progress_for(f"deleting from {table}") as progress:
        deleted = delete_entities(client, query, progress)
    click.echo(deleted)
    check.finish(deleted)


# ---------------------------------------------------------------- serve


@cli.command("serve", cls=click.Command, context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                        "help_option_names": []})
@click.argument("devstore_args", nargs=-1, type=click.UNPROCESSED)
def serve_command(devstore_args: tuple[str, ...]) -> int:
    """Run the bundled emulator (options as `python -m tablesdk.devstore`; --help lists them)."""
    from ..devstore.__main__ import main as devstore_main

    return devstore_main(list(devstore_args), prog="tablesdk serve")


cli.add_command(reencrypt_command, "reencrypt")


def run(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    return int(cli.main(argv, prog_name="tablesdk", standalone_mode=False))
