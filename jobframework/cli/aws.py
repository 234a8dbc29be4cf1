"""How ``jf`` reaches AWS: the boto3 chain or an endpoint URL, and the topology's queue URLs."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from jobframework.cli.errors import EXIT_UNREACHABLE, CliError, connection_error, one_line, unreachable_hint

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

    from jobframework.aws_clients import AwsClients
    from jobframework.config import JobRoute
    from jobframework.state import StateStore
    from jobframework.topology import RuntimeConfig

DEFAULT_PARAMETER = "/jf/dev/topology"
CONNECT_TIMEOUT = 2
"""Seconds to wait for a TCP connection before calling an endpoint unreachable."""
POOL_CONNECTIONS = 64
"""HTTP connections a client keeps (botocore's 10 is too few for `jf worker`'s threads sharing one)."""


@dataclass
class Aws:
    """How this ``jf`` command reaches AWS. One boto3 session per region serves every client the
    command makes (a session per client loaded botocore's service data again for each: about 0.1 s a
    client)."""

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    _sessions: dict[str | None, boto3.Session] = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def session(self, region: str | None = None) -> boto3.Session:
        with self._lock:
            default = self._sessions.get(None)
            if default is None:
                default = self._sessions[None] = self._new_session(None)
            wanted = self.region or region
            if wanted is None or wanted == default.region_name:
                return default
            session = self._sessions.get(wanted)
            if session is None:
                session = self._sessions[wanted] = self._new_session(wanted)
            return session

    def _new_session(self, region: str | None) -> boto3.Session:
        import boto3

        try:
            session = boto3.Session(profile_name=self.profile, region_name=self.region or region)
        except Exception as exc:
            raise CliError(f"cannot use AWS profile {self.profile!r}: {exc}") from exc
        region_name: str | None = session.region_name
        if region_name is None and self.endpoint_url:
            session = boto3.Session(profile_name=self.profile, region_name="us-east-1")
        return session

    def client(self, service: str, *, config: RuntimeConfig | None = None, attempts: int = 2) -> Any:
        session = self.session(config.region if config else None)
        with self._lock:  # a boto3 session is not thread-safe: one client made at a time from this one
            return session.client(  # type: ignore[call-overload]
                service,
                endpoint_url=self._endpoint(config),
                config=_botocore_config(attempts),
            )

    def _endpoint(self, config: RuntimeConfig | None) -> str | None:
        return self.endpoint_url or (config.endpoint_url if config else None)

    def runtime_config(self) -> RuntimeConfig:
        """The topology's queue URLs: ``JF_*`` variables, else the SSM parameter."""
        from jobframework.errors import ConfigurationError, SettingError, TopologyParameterNotFound
        from jobframework.topology import ENV_TOPOLOGY_PARAMETER, RuntimeConfig

        env = dict(os.environ)
        if self.endpoint_url:
            env["JF_ENDPOINT_URL"] = self.endpoint_url
        if self.region:
            env["JF_REGION"] = self.region
        env.setdefault(ENV_TOPOLOGY_PARAMETER, DEFAULT_PARAMETER)
        try:
            config = RuntimeConfig.from_env(env, ssm_client=self._lazy_clients(None, attempts=2).lazy("ssm"))
        except ConfigurationError as exc:
            conn = connection_error(exc)
            if conn is not None:
                raise CliError(
                    f"cannot reach the AWS endpoint: {one_line(str(conn))}{unreachable_hint(conn)}",
                    EXIT_UNREACHABLE,
                ) from exc
            if isinstance(exc, TopologyParameterNotFound | SettingError):  # (it says what to set already)
                raise CliError(one_line(str(exc))) from exc
            raise CliError(
                f"{one_line(str(exc))} (set JF_QUEUE_URL_<PRIORITY>/JF_DLQ_URL_<PRIORITY>, or "
                "JF_TOPOLOGY_PARAMETER, or export what `jf dev` prints)"
            ) from exc
        updates: dict[str, Any] = {}
        if self.endpoint_url:
            updates["endpoint_url"] = self.endpoint_url
        if self.region:
            updates["region"] = self.region
        return config.model_copy(update=updates) if updates else config

    def sqs(self, config: RuntimeConfig, *, attempts: int = 2) -> Any:
        return self.client("sqs", config=config, attempts=attempts)

    def state_store(self, config: RuntimeConfig, what: str) -> StateStore:
        """The state table's store of ``config``, or a :class:`CliError` saying ``what`` needs it."""
        from jobframework.state import StateStore

        if not config.state_table:
            raise CliError(f"{what} needs the state table: set JF_STATE_TABLE (or JF_TOPOLOGY_PARAMETER)")
        return StateStore.of(config, self.client("dynamodb", config=config))

    def paused_lanes(self, config: RuntimeConfig) -> dict[str, str]:
        """The lanes ``jf queue pause`` paused and since when (none without a state table)."""
        if not config.state_table:
            return {}
        from jobframework.flow.pause import paused

        return paused(self.state_store(config, "the pause flag"))

    def note_if_paused(self, config: RuntimeConfig, lane: str, what: str) -> None:
        """Say on stderr that ``what`` (the job, the redriven jobs) waits in ``lane``'s paused queue;
        nothing when the flag cannot be read (the job is sent: a failed read must not fail the
        command, which a script would then run again)."""
        try:
            since = self.paused_lanes(config).get(lane, False)
        except Exception:  # (a role without dynamodb:Query, a throttle)
            return
        if since is not False:
            typer.echo(
                f"jf: note: the {lane} queue is paused (since {since or '?'}): {what} waits there until "
                f"`jf queue resume {lane}`{_just_paused(since if isinstance(since, str) else None)}",
                err=True,
            )

    def job_client(self, config: RuntimeConfig, registry: Any = None) -> Any:
        """A :class:`~jobframework.client.JobClient` of ``config`` on this command's clients (and the
        jobs of ``registry``, the default registry when ``None``)."""
        from jobframework.client import JobClient

        made = self._lazy_clients(config)
        clients = {name: made.lazy(name) for name in ("dynamodb", "ssm", "scheduler", "s3")}
        return JobClient(config, registry=registry, sqs_client=self.sqs(config), clients=clients)

    def _lazy_clients(self, config: RuntimeConfig | None, *, attempts: int = 2) -> AwsClients:
        """Clients made on first use (an enqueue that needs no DynamoDB or S3 makes neither client)."""
        from jobframework.aws_clients import AwsClients

        return AwsClients(
            session=self.session(config.region if config else None),
            botocore_config=_botocore_config(attempts),
            endpoint_url=self._endpoint(config),
        )


def _botocore_config(attempts: int) -> Config:
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=30,
        retries={"max_attempts": attempts, "mode": "standard"},
        max_pool_connections=POOL_CONNECTIONS,
    )


def aws_of(ctx: typer.Context) -> Aws:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Aws) else Aws(endpoint_url=os.environ.get("JF_ENDPOINT_URL") or None)


def check_reachable(sqs: Any, url: str) -> None:
    """Fail fast (exit 3) when the endpoint does not answer."""
    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])


def catalog_of(aws: Aws, config: RuntimeConfig) -> dict[str, JobRoute]:
    """The topology's job catalog: the configuration's, else its parameter's (the ``JF_*`` exports of
    ``jf dev`` name the parameter and carry no catalog); empty when there is none to read."""
    if config.jobs or not config.topology_parameter:
        return dict(config.jobs)
    from jobframework.config import RuntimeConfig
    from jobframework.errors import ConfigurationError

    try:
        read = RuntimeConfig.from_parameter(
            config.topology_parameter,
            ssm_client=aws.client("ssm", config=config),
            endpoint_url=config.endpoint_url,
            region=config.region,
        )
    except ConfigurationError:  # (no parameter to compare with: nothing to warn of)
        return {}
    return dict(read.jobs)


def _just_paused(since: str | None) -> str:
    """What to add when the pause is seconds old: a receive under way may still take the job (an
    operator's trial saw a job the note said would wait dead-lettered 0.1 s later)."""
    from datetime import UTC, datetime

    from jobframework.flow.pause import SETTLE_SECONDS

    try:
        age = (datetime.now(UTC) - datetime.fromisoformat(since or "")).total_seconds()
    except (ValueError, TypeError):  # (not a time, or one without its zone: no note, the job is sent)
        return ""
    if age >= SETTLE_SECONDS:
        return ""
    return (
        f" (paused {max(0, round(age))} s ago: a consumer's receive under way then may still take it, "
        f"for about {SETTLE_SECONDS} s after the pause locally; on AWS, a few seconds and the lane's "
        "batching window)"
    )
