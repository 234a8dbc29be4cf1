"""Where the queues and tables are at run time: :class:`RuntimeConfig`, read from ``JF_*`` variables.

Kept apart from :mod:`jobframework.topology` so that the Lambda consumer loads only
this small part (cold start).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from jobframework.errors import ConfigurationError
from jobframework.jobs import Priority

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient


class QueueEndpoints(BaseModel):
    model_config = ConfigDict(frozen=True)

    url: str
    dlq_url: str

    @property
    def name(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    @property
    def dlq_name(self) -> str:
        return self.dlq_url.rstrip("/").rsplit("/", 1)[-1]


ENV_QUEUE_URL = "JF_QUEUE_URL_{}"
ENV_DLQ_URL = "JF_DLQ_URL_{}"
ENV_STATE_TABLE = "JF_STATE_TABLE"
ENV_IDEMPOTENCY_TABLE = "JF_IDEMPOTENCY_TABLE"
ENV_ENDPOINT_URL = "JF_ENDPOINT_URL"
ENV_REGION = "JF_REGION"
ENV_TOPOLOGY_PARAMETER = "JF_TOPOLOGY_PARAMETER"
ENV_JOBS = "JF_JOBS"


class RuntimeConfig(BaseModel):
    """What the client, consumer and CLI need at run time: where the queues and tables are.

    Read it with :meth:`from_env`; the stack sets these variables on each function and writes the
    same JSON to an SSM parameter for services outside Lambda.
    """

    model_config = ConfigDict(frozen=True)

    queues: dict[Priority, QueueEndpoints]
    state_table: str | None = None
    idempotency_table: str | None = None
    endpoint_url: str | None = None
    region: str | None = None

    def endpoints(self, priority: Priority | str) -> QueueEndpoints:
        prio = Priority(priority)
        try:
            return self.queues[prio]
        except KeyError:
            raise ConfigurationError(
                f"no {prio.value} queue is configured; set {ENV_QUEUE_URL.format(prio.value.upper())}"
            ) from None

    def by_queue_name(self, name: str) -> tuple[Priority, QueueEndpoints] | None:
        """The priority and endpoints of the queue (or DLQ) called ``name``."""
        for prio, ep in self.queues.items():
            if name in (ep.name, ep.dlq_name):
                return prio, ep
        return None

    def to_env(self) -> dict[str, str]:
        env = {}
        for prio, ep in self.queues.items():
            env[ENV_QUEUE_URL.format(prio.value.upper())] = ep.url
            env[ENV_DLQ_URL.format(prio.value.upper())] = ep.dlq_url
        for name, value in (
            (ENV_STATE_TABLE, self.state_table),
            (ENV_IDEMPOTENCY_TABLE, self.idempotency_table),
            (ENV_ENDPOINT_URL, self.endpoint_url),
            (ENV_REGION, self.region),
        ):
            if value:
                env[name] = value
        return env

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, ssm_client: SSMClient | None = None
    ) -> RuntimeConfig:
        """Read ``JF_QUEUE_URL_<PRIORITY>``, ``JF_DLQ_URL_<PRIORITY>``, ``JF_STATE_TABLE``, ... or, when
        no queue variable is set, the JSON in the SSM parameter named by ``JF_TOPOLOGY_PARAMETER``.

        Raises:
            ConfigurationError: nothing is configured, or the parameter cannot be read.
        """
        env = os.environ if environ is None else environ
        queues = {}
        for prio in Priority:
            url = env.get(ENV_QUEUE_URL.format(prio.value.upper()))
            dlq = env.get(ENV_DLQ_URL.format(prio.value.upper()))
            if url and dlq:
                queues[prio] = QueueEndpoints(url=url, dlq_url=dlq)
        endpoint = env.get(ENV_ENDPOINT_URL) or None
        region = env.get(ENV_REGION) or None
        if queues:
            return cls(
                queues=queues,
                state_table=env.get(ENV_STATE_TABLE) or None,
                idempotency_table=env.get(ENV_IDEMPOTENCY_TABLE) or None,
                endpoint_url=endpoint,
                region=region,
            )
        parameter = env.get(ENV_TOPOLOGY_PARAMETER)
        if not parameter:
            raise ConfigurationError(
                "jobframework is not configured: set JF_QUEUE_URL_<PRIORITY> and JF_DLQ_URL_<PRIORITY>, "
                f"or {ENV_TOPOLOGY_PARAMETER} to the SSM parameter the stack wrote (e.g. /jf/dev/topology), "
                "or run `jf dev` and export what it prints"
            )
        return cls.from_parameter(parameter, ssm_client=ssm_client, endpoint_url=endpoint, region=region)

    @classmethod
    def from_parameter(
        cls,
        name: str,
        *,
        ssm_client: SSMClient | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> RuntimeConfig:
        from botocore.exceptions import BotoCoreError, ClientError

        if ssm_client is None:
            import boto3

            ssm_client = boto3.client("ssm", endpoint_url=endpoint_url, region_name=region)
        try:
            value = ssm_client.get_parameter(Name=name)["Parameter"]["Value"]
        except (ClientError, BotoCoreError) as exc:
            raise ConfigurationError(f"cannot read the topology parameter {name}: {exc}") from exc
        try:
            config = cls.model_validate(json.loads(value))
        except (ValueError, ValidationError) as exc:
            raise ConfigurationError(
                f"the topology parameter {name} does not hold a RuntimeConfig: {exc}"
            ) from exc
        if endpoint_url and not config.endpoint_url:
            config = config.model_copy(update={"endpoint_url": endpoint_url})
        return config
