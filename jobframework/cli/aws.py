"""How ``jf`` reaches AWS: the boto3 chain or an endpoint URL, and the topology's queue URLs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from jobframework.cli.errors import EXIT_UNREACHABLE, CliError, connection_error, one_line

if TYPE_CHECKING:
    import boto3

    from jobframework.topology import RuntimeConfig

DEFAULT_PARAMETER = "/jf/dev/topology"
CONNECT_TIMEOUT = 2
"""Seconds to wait for a TCP connection before calling an endpoint unreachable."""
POOL_CONNECTIONS = 64
"""HTTP connections a client keeps (botocore's 10 is too few for `jf worker`'s threads sharing one)."""


@dataclass
class Aws:
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None

    def session(self, region: str | None = None) -> boto3.Session:
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
        from botocore.config import Config

        session = self.session(config.region if config else None)
        return session.client(  # type: ignore[call-overload]
            service,
            endpoint_url=self.endpoint_url or (config.endpoint_url if config else None),
            config=Config(
                connect_timeout=CONNECT_TIMEOUT,
                read_timeout=30,
                retries={"max_attempts": attempts, "mode": "standard"},
                max_pool_connections=POOL_CONNECTIONS,
            ),
        )

    def runtime_config(self) -> RuntimeConfig:
        """The topology's queue URLs: ``JF_*`` variables, else the SSM parameter."""
        from jobframework.errors import ConfigurationError
        from jobframework.topology import ENV_TOPOLOGY_PARAMETER, RuntimeConfig

        env = dict(os.environ)
        if self.endpoint_url:
            env["JF_ENDPOINT_URL"] = self.endpoint_url
        if self.region:
            env["JF_REGION"] = self.region
        env.setdefault(ENV_TOPOLOGY_PARAMETER, DEFAULT_PARAMETER)
        try:
            config = RuntimeConfig.from_env(env, ssm_client=self.client("ssm"))
        except ConfigurationError as exc:
            conn = connection_error(exc)
            if conn is not None:
                raise CliError(
                    f"cannot reach the AWS endpoint: {one_line(str(conn))}", EXIT_UNREACHABLE
                ) from exc
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

    def job_client(self, config: RuntimeConfig, registry: Any = None) -> Any:
        """A :class:`~jobframework.client.JobClient` of ``config`` on this command's clients (and the
        jobs of ``registry``, the default registry when ``None``)."""
        from jobframework.client import JobClient

        clients = {name: self.client(name, config=config) for name in ("dynamodb", "ssm", "scheduler", "s3")}
        return JobClient(config, registry=registry, sqs_client=self.sqs(config), clients=clients)


def aws_of(ctx: typer.Context) -> Aws:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Aws) else Aws(endpoint_url=os.environ.get("JF_ENDPOINT_URL") or None)


def check_reachable(sqs: Any, url: str) -> None:
    """Fail fast (exit 3) when the endpoint does not answer."""
    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
