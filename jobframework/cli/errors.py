"""The ``jf`` exit codes and the one-line error for each failure (never a traceback)."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import typer
from typer import Abort as ClickAbort
from typer._click.exceptions import UsageError  # typer carries its own copy of click
from typer.core import TyperGroup

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_SUPPORTED = 4
EXIT_INTERRUPTED = 130


ROOT_OPTIONS = ("--endpoint-url", "--region", "--profile")
"""The options of ``jf`` itself (given before the command)."""


class CliError(Exception):
    """A failure to report as one line with an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def cannot_listen(what: str, host: str, port: int, exc: OSError, *, host_option: bool) -> CliError:
    """The error for ``what`` failing to bind ``host:port``. A taken port is a bad argument (exit 2) and
    says what to do; so is any other bind failure of a command with a ``--host`` (the host is not this
    machine's); otherwise the failure exits 1."""
    if exc.errno == errno.EADDRINUSE:
        why = f"port {port} is in use by another program (stop it, or pick another with --port)"
        return CliError(f"{what} on {host}:{port}: {why}", EXIT_USAGE)
    if host_option:
        why = f"{exc.strerror or exc} (pick another --host or --port)"
        return CliError(f"{what} on {host or '0.0.0.0'}:{port}: {why}", EXIT_USAGE)
    return CliError(f"{what} on {host}:{port}: {exc.strerror or exc}", EXIT_FAILED)


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"jf: error: {message}", err=True)
    sys.exit(code)


def connection_error(exc: BaseException) -> BaseException | None:
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, EndpointConnectionError | ConnectTimeoutError | BotoConnectionError):
            return seen
        if isinstance(seen, ReadTimeoutError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def _without_pydantic_prefix(message: str) -> str:
    """Typer checks a choice with pydantic, whose words start ``Value error, ``: not ours to show."""
    return message.replace(": Value error, ", ": ")


class JfGroup(TyperGroup):
    """Typer's group with one-line errors and stable exit codes instead of panels and tracebacks."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            code = super().main(
                args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra
            )
        except UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            name = getattr(exc, "option_name", None)
            if name in ROOT_OPTIONS and exc.ctx is not None and exc.ctx.parent is not None:
                command = exc.ctx.command_path.partition(" ")[2]
                hint = f"; {name} is an option of jf itself: put it first (jf {name} ... {command})"
            _fail(_without_pydantic_prefix(one_line(exc.format_message())) + hint, EXIT_USAGE)
        except ClickAbort:
            _fail("interrupted", EXIT_INTERRUPTED)
        except KeyboardInterrupt:
            _fail("interrupted", EXIT_INTERRUPTED)
        except CliError as exc:
            _fail(one_line(str(exc)), exc.code)
        except Exception as exc:
            _fail(*describe_failure(exc))
        sys.exit(code if isinstance(code, int) else 0)


def unreachable_hint(conn: BaseException) -> str:
    """What to do about an endpoint that does not answer: the local `jf dev` is the usual one."""
    endpoint = os.environ.get("JF_ENDPOINT_URL")
    if not endpoint and ".amazonaws.com" in str(conn):
        return " (for the local `jf dev`, paste the export lines it printed into this shell first)"
    if endpoint and endpoint in str(conn):
        return (
            f" (JF_ENDPOINT_URL={endpoint}: is `jf dev` running? Each start picks a new port unless "
            "given --port: paste the export lines it printed this time)"
        )
    return ""


MISSING_RESOURCE_CODES = frozenset(
    {
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "ResourceNotFoundException",
        "ParameterNotFound",
        "NoSuchBucket",
    }
)
"""Error codes of a queue, table, parameter or bucket that is not where the configuration points."""


def missing_resource_hint(exc: BaseException) -> str:
    """What to check when ``exc`` (or what it wraps) is AWS saying a configured resource is not there:
    usually export lines of an earlier `jf dev` (another --app, --stage or start), or another stage."""
    from botocore.exceptions import ClientError

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 5:  # (an EnqueueError wraps the ClientError)
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    codes = {e.response.get("Error", {}).get("Code") for e in chain if isinstance(e, ClientError)}
    if not codes & MISSING_RESOURCE_CODES:
        return ""
    keys = os.environ.get("JF_SIGNING_KEYS", "")
    if keys and keys.partition(":")[2] in " ".join(str(e) for e in chain):  # (the keys, not a resource)
        return (
            f" (JF_SIGNING_KEYS={keys} names keys that are not there yet: put the key ring there, "
            '{"current": "k1", "keys": {"k1": "<a secret of 16+ characters>"}}, as docs/effectively-once.md '
            "says under Signing)"
        )
    endpoint = os.environ.get("JF_ENDPOINT_URL")
    if endpoint:
        return (
            f" (JF_ENDPOINT_URL={endpoint} has no such resource: these JF_* variables may be from an earlier "
            "`jf dev` with another --app or --stage; paste the export lines it printed this time)"
        )
    return (
        " (check JF_TOPOLOGY_PARAMETER or the JF_QUEUE_URL_*/JF_STATE_TABLE variables, the region and the "
        "account: they name a resource that is not there)"
    )


def describe_failure(exc: Exception) -> tuple[str, int]:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    from jobframework.errors import EndpointNotSupportedError, JobFrameworkError

    conn = connection_error(exc)
    if conn is not None:
        return (
            f"cannot reach the AWS endpoint: {one_line(str(conn))}{unreachable_hint(conn)}",
            EXIT_UNREACHABLE,
        )
    if isinstance(exc, EndpointNotSupportedError):
        return one_line(str(exc)), EXIT_NOT_SUPPORTED
    if isinstance(exc, NoCredentialsError):
        return "no AWS credentials: set a profile (--profile/AWS_PROFILE) or run `jf dev`", EXIT_FAILED
    if isinstance(exc, NoRegionError):
        return "no AWS region: pass --region or set AWS_REGION", EXIT_FAILED
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        refused = f"AWS refused the request: {error.get('Code')}: {one_line(error.get('Message', ''))}"
        return refused + missing_resource_hint(exc), 1
    if isinstance(exc, JobFrameworkError | BotoCoreError | ValueError | OSError):
        return (one_line(str(exc)) or type(exc).__name__) + missing_resource_hint(exc), EXIT_FAILED
    return f"{type(exc).__name__}: {one_line(str(exc))}", EXIT_FAILED
