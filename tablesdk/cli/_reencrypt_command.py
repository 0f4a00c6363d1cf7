"""The ``reencrypt`` command (its work is :mod:`tablesdk.cli._reencrypt`, loaded when it runs)."""

from __future__ import annotations

import os

import click

from ._options import Settings, TablesdkCommand

__all__ = ["reencrypt_command"]


@click.command("reencrypt", cls=TablesdkCommand)
@click.argument("table")
@click.option("--filter", "filter_", metavar="F", help="Only the entities this OData $filter matches.")
@click.option("--state-file", metavar="PATH",
              help="Keep the run's state in PATH (default: TABLE.tablesdk-reencrypt in this directory).")
@click.option("--resume", is_flag=True, help="Continue the run the state file describes.")
def reencrypt_command(table: str, filter_: str | None, state_file: str | None, resume: bool) -> None:
    """Encrypt TABLE's protocol 1.0 entities again under the authenticated protocol, in place.

    Needs --encryption-key-file (the key of the entities, and the key of the new writes). Each
    replace is conditional on the entity's ETag: a concurrent write is never lost (the entity is
    read again and re-encrypted). Resumable: run it again with --resume after a stop.
    """
    from ._reencrypt import STATE_SUFFIX, ReencryptState, reencrypt_table, summary

    settings = click.get_current_context().find_object(Settings)
    assert settings is not None
    policy = settings.encryption_policy()
    if policy is None or policy.key is None:
        raise click.UsageError("reencrypt needs --encryption-key-file: the key to decrypt and encrypt with")
    path = state_file or f"{table}{STATE_SUFFIX}"
    state = None
    if resume:
        if not os.path.exists(path):
            raise click.UsageError(f"--resume: there is no state file {path!r} to continue from")
        try:
            state = ReencryptState.load(path, table, filter_)
        except ValueError as error:
            raise click.UsageError(str(error)) from None
    elif os.path.exists(path):
        raise click.UsageError(f"the state file {path!r} exists: continue that run with --resume, or remove it")
    client = settings.client(encryption=False)  # entities as stored: the run decrypts each itself
    try:
        with settings.progress_for(f"re-encrypting {table}") as progress:
            state = reencrypt_table(client, table, policy, filter=filter_, state=state, state_path=path,
                                    progress=lambda now: progress.update(now.counts["scanned"]))
    except BaseException:
        if os.path.exists(path):
            click.echo(f"tablesdk: the re-encryption stopped; its place is in {path}: run the same command with "
                       "--resume to continue it", err=True)
        raise
    os.remove(path)
    click.echo(f"tablesdk: {summary(state)}", err=True)
