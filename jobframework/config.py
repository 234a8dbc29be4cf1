"""Where the queues and tables are at run time: :class:`RuntimeConfig`, read from ``JF_*`` variables.

Kept apart from :mod:`jobframework.topology` so that the Lambda consumer loads only
this small part (cold start).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer, field_validator

from jobframework.core import ConfigurationError, Priority
from jobframework.errors import SettingError, TopologyParameterNotFound

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient


class JobRoute(BaseModel):
    """How a producer that does not import a job sends it: the job's entry in the topology's catalog.

    The stack and ``jf dev`` write one per registered job into the topology parameter; see
    :mod:`jobframework.catalog` for how the client validates a payload against ``payload_schema``.
    """

    model_config = ConfigDict(frozen=True)

    priority: Priority
    lane: str
    """The queue: the priority, or ``<priority>-<profile>``."""
    fifo: bool = False
    """Whether the lane's queue is a FIFO queue (``.fifo``): sends then carry a message group."""
    version: int = Field(default=1, ge=1)
    """The payload schema version producers send (``payload_version``)."""
    dedup_window: float | None = None
    """The job's own ``dedup_window`` (seconds; ``0`` off), ``None`` when it has none."""
    retry_horizon: float = Field(default=0.0, ge=0)
    """Seconds the job can spend between its first receive and its dead letter
    (:func:`jobframework.payloads.retry_horizon`): how long an offloaded payload must outlive its send."""
    track: bool = False
    """Whether the job keeps a status record (``@job(track=True)``) unless an enqueue says otherwise."""
    retry_budget: str | None = None
    """The named retry budget the job counts in (``@job(retry_budget="crm")``), for ``jf queue ls``."""
    payload_schema: dict[str, Any]
    """The payload model's JSON Schema (pydantic's, without titles and descriptions)."""


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
NAMED_BY_APP = (
    "the parameter is /<app>/<stage>/topology of the stack or `jf dev` that wrote it (`jf dev --app "
    "webhooks` writes /webhooks/dev/topology; the default app and stage make /jf/dev/topology)"
)
"""Where a topology parameter's name comes from, for an error that found none."""
ENV_JOBS = "JF_JOBS"

OPTIONAL_SETTINGS: dict[str, str] = {
    "state_table": ENV_STATE_TABLE,
    "idempotency_table": ENV_IDEMPOTENCY_TABLE,
    "endpoint_url": ENV_ENDPOINT_URL,
    "region": ENV_REGION,
    "payload_bucket": "JF_PAYLOAD_BUCKET",
    "offload_threshold": "JF_OFFLOAD_THRESHOLD",
    "signing_keys": "JF_SIGNING_KEYS",
    "scheduler_role_arn": "JF_SCHEDULER_ROLE_ARN",
    "schedule_group": "JF_SCHEDULE_GROUP",
    "retry_budget": "JF_RETRY_BUDGET",
}
"""Each optional setting of :class:`RuntimeConfig` and the environment variable that carries it."""


def over_parameter(settings: Mapping[str, str]) -> dict[str, str]:
    """Of the settings the environment gives (by field), those that win over a topology parameter's:
    all but where AWS is (the endpoint and region, which reading the parameter itself takes)."""
    return {field: value for field, value in settings.items() if field not in ("endpoint_url", "region")}


SETTING_VALUES: dict[str, str] = {
    "offload_threshold": "it takes bytes from 1024 to 1048576 (SQS's 1 MiB); 262144 by default",
    "retry_budget": "it takes retries per first attempt, a fraction from 0 to 10 (0.2 is 20 %), or off",
}
"""What each numeric setting takes, for the error of a bad ``JF_*`` value."""


def bad_settings_message(exc: ValidationError, given: Mapping[str, str]) -> str:
    """Each bad ``JF_*`` value by its variable: what it was and what it takes (not pydantic's dump).

    Example:
        >>> try:
        ...     RuntimeConfig(queues={}, retry_budget="lots")
        ... except ValidationError as exc:
        ...     print(bad_settings_message(exc, {"retry_budget": "lots"}))
        JF_RETRY_BUDGET='lots' is not valid: it takes retries per first attempt, a fraction from 0 to 10 \
(0.2 is 20 %), or off
    """
    lines = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        name = OPTIONAL_SETTINGS.get(field, field)
        takes = SETTING_VALUES.get(field, str(error["msg"]))
        lines.append(f"{name}={given.get(field, error.get('input'))!r} is not valid: {takes}")
    return "; ".join(lines)


def queues_in_env(env: Mapping[str, str]) -> dict[str, QueueEndpoints]:
    """The lanes whose queue and DLQ the ``JF_QUEUE_URL_<LANE>``/``JF_DLQ_URL_<LANE>`` variables both
    name (none: the configuration comes from the topology parameter)."""
    queues = {}
    prefix = ENV_QUEUE_URL.format("")
    for name, url in env.items():
        if name.startswith(prefix) and url:
            lane = name[len(prefix) :].lower().replace("_", "-")
            dlq = env.get(_env_name(ENV_DLQ_URL, lane))
            if dlq:
                queues[lane] = QueueEndpoints(url=url, dlq_url=dlq)
    return queues


def _env_name(template: str, lane: str) -> str:
    """``JF_QUEUE_URL_{}`` and ``high-cpu`` -> ``JF_QUEUE_URL_HIGH_CPU``."""
    return template.format(lane.upper().replace("-", "_"))


class RuntimeConfig(BaseModel):
    """What the client, consumer and CLI need at run time: where the queues and tables are.

    Read it with :meth:`from_env`; the stack sets these variables on each function and writes the
    same JSON to an SSM parameter for services outside Lambda.
    """

    model_config = ConfigDict(frozen=True)

    queues: dict[str, QueueEndpoints]
    """Endpoints by lane: a priority (``high``), or a priority and worker profile (``high-cpu``)."""
    state_table: str | None = None
    """Job status, dedup markers, retry-budget counters, sagas (off when unset)."""
    idempotency_table: str | None = None
    """Powertools idempotency records (idempotent execution is off when unset)."""
    endpoint_url: str | None = None
    region: str | None = None
    payload_bucket: str | None = None
    """Where payloads over ``offload_threshold`` bytes go (refused as too large when unset)."""
    offload_threshold: int = Field(default=256 * 1024, ge=1024, le=1_048_576)
    signing_keys: str | None = None
    """``ssm:<parameter>`` or ``secretsmanager:<secret>`` with the HMAC keys (signing is off when unset)."""
    scheduler_role_arn: str | None = None
    """The role EventBridge Scheduler assumes to send delayed jobs (delays over 15 minutes)."""
    schedule_group: str = "default"
    retry_budget: float | None = Field(default=0.2, ge=0, le=10)
    """Retries allowed per first attempt in the window; ``None`` (``JF_RETRY_BUDGET=off``) disables it."""
    jobs: dict[str, JobRoute] = Field(default_factory=dict)
    """The job catalog: each job's route and payload schema, by name (in the topology parameter only:
    the ``JF_*`` variables point at the parameter instead, to stay within Lambda's 4 KB of variables)."""
    topology_parameter: str | None = None
    """The SSM parameter this configuration came from or points at (``JF_TOPOLOGY_PARAMETER``)."""

    @field_validator("retry_budget", mode="before")
    @classmethod
    def _budget_off(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() in ("off", "none", "") else value

    @field_validator("jobs", mode="before")
    @classmethod
    def _unpack_jobs(cls, value: object) -> object:
        if isinstance(value, str):
            import base64
            import zlib

            try:
                return json.loads(zlib.decompress(base64.b64decode(value)))
            except (ValueError, zlib.error) as exc:
                raise ValueError(f"the job catalog is not zlib+base64 JSON: {exc}") from None
        return value

    @field_serializer("jobs", when_used="json")
    def _pack_jobs(self, jobs: dict[str, JobRoute]) -> str | dict[str, Any]:
        """In JSON (the topology parameter) the catalog is zlib+base64 of its compact JSON: about 60
        bytes a job, so that dozens of jobs fit a standard (4 KB) parameter beside the queues."""
        if not jobs:
            return {}
        import base64
        import zlib

        data = {name: route.model_dump(mode="json", exclude_defaults=True) for name, route in jobs.items()}
        packed = zlib.compress(json.dumps(data, separators=(",", ":"), sort_keys=True).encode(), 9)
        return base64.b64encode(packed).decode("ascii")

    @field_validator("queues", mode="before")
    @classmethod
    def _lane_keys(cls, value: object) -> object:
        if isinstance(value, dict):
            return {str(getattr(k, "value", k)): v for k, v in value.items()}
        return value

    def endpoints(self, lane: Priority | str) -> QueueEndpoints:
        """The queue and DLQ of a lane (a priority, or ``<priority>-<profile>``)."""
        name = str(getattr(lane, "value", lane))
        try:
            return self.queues[name]
        except KeyError:
            known = ", ".join(self.queues) or "none"
            raise ConfigurationError(
                f"no {name} queue is configured (known: {known}); set {_env_name(ENV_QUEUE_URL, name)}"
            ) from None

    def by_queue_name(self, name: str) -> tuple[str, QueueEndpoints] | None:
        """The lane and endpoints of the queue (or DLQ) called ``name``."""
        for lane, ep in self.queues.items():
            if name in (ep.name, ep.dlq_name):
                return lane, ep
        return None

    def to_env(self) -> dict[str, str]:
        env = {}
        for lane, ep in self.queues.items():
            env[_env_name(ENV_QUEUE_URL, lane)] = ep.url
            env[_env_name(ENV_DLQ_URL, lane)] = ep.dlq_url
        for field, name in OPTIONAL_SETTINGS.items():
            value = getattr(self, field)
            if field == "retry_budget" and value is None:
                env[name] = "off"
            elif value is not None and value != RuntimeConfig.model_fields[field].default:
                env[name] = str(value)
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
        queues = queues_in_env(env)
        endpoint = env.get(ENV_ENDPOINT_URL) or None
        region = env.get(ENV_REGION) or None
        settings = {field: env[name] for field, name in OPTIONAL_SETTINGS.items() if env.get(name)}
        parameter = env.get(ENV_TOPOLOGY_PARAMETER) or None
        if queues:
            try:
                return cls(queues=queues, topology_parameter=parameter, **settings)
            except ValidationError as exc:
                raise SettingError(bad_settings_message(exc, settings)) from None
        if not parameter:
            raise ConfigurationError(
                "jobframework is not configured: set JF_QUEUE_URL_<PRIORITY> and JF_DLQ_URL_<PRIORITY>, "
                f"or {ENV_TOPOLOGY_PARAMETER} to the SSM parameter the stack wrote (e.g. /jf/dev/topology), "
                "or run `jf dev` and export what it prints"
            )
        config = cls.from_parameter(parameter, ssm_client=ssm_client, endpoint_url=endpoint, region=region)
        given = over_parameter(settings)
        if not given:
            return config
        try:  # (the environment's settings win over the parameter's: JF_SIGNING_KEYS on a worker)
            return cls.model_validate({**config.model_dump(), **given})
        except ValidationError as exc:
            raise SettingError(bad_settings_message(exc, given)) from None

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
            if (
                isinstance(exc, ClientError)
                and exc.response.get("Error", {}).get("Code") == "ParameterNotFound"
            ):
                raise TopologyParameterNotFound(
                    f"no topology parameter {name} here: {NAMED_BY_APP}; set {ENV_TOPOLOGY_PARAMETER} to "
                    "the one your stack or `jf dev` wrote (export the lines `jf dev` prints)"
                ) from exc
            raise ConfigurationError(f"cannot read the topology parameter {name}: {exc}") from exc
        try:
            config = cls.model_validate(json.loads(value))
        except (ValueError, ValidationError) as exc:
            raise ConfigurationError(
                f"the topology parameter {name} does not hold a RuntimeConfig: {exc}"
            ) from exc
        update: dict[str, Any] = {"topology_parameter": name}
        if endpoint_url and not config.endpoint_url:
            update["endpoint_url"] = endpoint_url
        return config.model_copy(update=update)
