"""Helpers for users' tests: SQS event factories, inline runs, and pytest fixtures.

Enable the fixtures in a ``conftest.py``::

    pytest_plugins = ["jobframework.testing"]

then take ``jf_aws`` (the embedded AWS, one per session) and ``jf_config`` (a fresh,
provisioned topology of the registered jobs for each test).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from pydantic import BaseModel

from jobframework.delivery import RecordOutcome
from jobframework.envelope import Envelope, parse_body
from jobframework.errors import ConfigurationError
from jobframework.inline import arun_inline, run_inline
from jobframework.jobs import Job, JobRegistry
from jobframework.polling import FakeLambdaContext, consume_once, drain, receive_all
from jobframework.recorder import EnqueueRecorder
from jobframework.settler import Settler
from jobframework.sqs_events import DEFAULT_QUEUE_ARN, sqs_event, sqs_record
from jobframework.stores.job_records_memory import InMemoryJobRecords
from jobframework.topology import RuntimeConfig, Topology, TopologySettings
from jobframework.verdict import Kind, Verdict

if TYPE_CHECKING:
    from jobframework.client import JobClient
    from jobframework.consumer import Consumer
    from jobframework.delivery import Batch
    from jobframework.local.aws import EmbeddedAWS
    from jobframework.saga import SagaRecord

NOWHERE = "http://127.0.0.1:9"
"""Where :func:`in_memory_consumer`'s clients point (the discard port; a hook refuses every request)."""


M = TypeVar("M", bound=BaseModel)
"""A job's payload model."""


def in_memory_consumer(
    registry: JobRegistry | None = None, **options: Any
) -> tuple[Consumer, InMemoryJobRecords]:
    """A handler whose job records (status, start claim, cancel marker) and dedup markers are in
    memory, and whose AWS clients refuse every request: tracked jobs, their statuses and cancels,
    tested with no embedded AWS. Returns the handler and the records (``get_status``,
    ``mark_cancelled``, ``set_status``).

    A job that fails is retried or dead-lettered through SQS, which this handler refuses, and there is
    no idempotency table (an idempotent job runs again for a duplicate); nor are the flow-control
    items in memory: a job with ``rate=`` or ``concurrency=``, a debounced enqueue or a paused queue
    needs the state table. Test those against the embedded AWS (``jf_config``). ``options`` go to
    :func:`~jobframework.consumer.consumer`.

    Example:
        >>> handler, records = in_memory_consumer(registry)                      # doctest: +SKIP
        >>> env = Envelope.new("reports.generate", {"report_id": "r-1"}, track=True)  # doctest: +SKIP
        >>> handler(sqs_event(env), FakeLambdaContext())                       # doctest: +SKIP
        {'batchItemFailures': []}
        >>> records.get_status(env.id).status                                  # doctest: +SKIP
        <JobState.SUCCEEDED: 'succeeded'>
    """
    import boto3

    from jobframework.consumer import consumer
    from jobframework.jobs import Priority
    from jobframework.state import StateStore
    from jobframework.stores.dedup import InMemoryDedupMarkers

    settler: _InMemorySettler | None = None

    def refuse(event_name: str, **_: Any) -> None:
        settling = settler.settling if settler is not None and ".sqs." in event_name else ""
        raise RuntimeError(
            f"in_memory_consumer makes no AWS request ({event_name}): "
            + (
                settling
                or "retries, dead letters, hand-backs, idempotency, rate=/concurrency= limits, debounce "
                "and pause need the embedded AWS; test this job with jf_config"
            )
        )

    region = "us-east-1"
    session = boto3.Session(aws_access_key_id="memory", aws_secret_access_key="memory", region_name=region)
    sqs: Any = session.client("sqs", endpoint_url=NOWHERE)
    dynamodb: Any = session.client("dynamodb", endpoint_url=NOWHERE)
    for client in (sqs, dynamodb):
        client.meta.events.register("before-send", refuse)
    url = f"https://sqs.{region}.amazonaws.com/{DEFAULT_QUEUE_ARN.split(':')[4]}/jf-dev-"
    queues = {p: {"url": url + p.value, "dlq_url": url + p.value + "-dlq"} for p in Priority}
    config = RuntimeConfig(queues=queues, state_table="jf-memory", retry_budget=None)
    records = InMemoryJobRecords()
    state = StateStore("jf-memory", dynamodb, jobs=records, dedup=InMemoryDedupMarkers(records))
    handler = consumer(registry, config=config, sqs_client=sqs, state=state, **options)
    handler.settler = settler = _InMemorySettler(handler)
    return handler, records


class _InMemorySettler(Settler):
    """The settler of :func:`in_memory_consumer`: says, while it settles, why a record needs SQS (the
    refusal's message), so that a record handed back for lack of time is not taken for a failure."""

    settling = ""

    def settle(self, verdicts: list[Verdict], batch: Batch) -> list[str]:
        self.settling = "; ".join(_needs_sqs(v, self.consumer) for v in verdicts if v.kind in _SQS_KINDS)
        try:
            return super().settle(verdicts, batch)
        finally:
            self.settling = ""


_SQS_KINDS = (Kind.RELEASE, Kind.RETRY, Kind.DEAD_LETTER)


def _needs_sqs(v: Verdict, handler: Consumer) -> str:
    """Why settling ``v`` takes an SQS request, and what a test does about it."""
    from jobframework.gates import RELEASE_MARGIN_SECONDS

    d = v.delivery
    env = d.envelope
    what = f"record {d.message_id}" + (f" (job {env.type} {env.id})" if env is not None else "")
    reason = v.outcome.reason if v.outcome is not None else None
    error = v.error or (v.outcome.error if v.outcome is not None else None) or "-"
    if v.kind is Kind.RELEASE and reason is None:  # the time-left gate's: the only release without one
        job = handler.registry.find(env.type) if env is not None else None
        needs = f"FakeLambdaContext({job.timeout + RELEASE_MARGIN_SECONDS + 1:g})" if job else "a longer one"
        return (
            f"{what} was released unstarted, not run and not failed: the Lambda context had less time left "
            f"than the job's timeout plus {RELEASE_MARGIN_SECONDS:g} s, and handing it back needs SQS; "
            f"give the handler {needs} or more (FakeLambdaContext() has 900 s, enough for any job)"
        )
    if v.kind is Kind.RELEASE:
        return (
            f"{what} was handed back unrun ({reason}), not failed, and handing it back needs SQS; limits, "
            "debounce, FIFO order and pause need the embedded AWS: test this job with jf_config"
        )
    if v.kind is Kind.RETRY:
        return (
            f"{what} failed ({error}) and is retried in {v.delay} s through SQS; test "
            "retries with jf_config, or run_inline(job, payload) to see the exception"
        )
    return (
        f"{what} is dead-lettered ({reason or '-'}: {error}) through SQS; test dead letters with "
        "jf_config, or run_inline(job, payload) to see the exception"
    )


def provision_fresh(
    endpoint_url: str, registry: JobRegistry | None = None, settings: TopologySettings | None = None
) -> tuple[Topology, RuntimeConfig]:
    """A topology of the registry under a fresh stage name, provisioned on ``endpoint_url``."""
    import boto3

    from jobframework.local.aws import REGION

    base = settings or TopologySettings()
    stage = f"t{uuid.uuid4().hex[:10]}"
    topology = Topology.from_registry(registry, base.model_copy(update={"stage": stage}))
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    from jobframework.local.aws import provision

    return topology, provision(topology, session, endpoint_url)


def pytest_configure(config: pytest.Config) -> None:
    """The plugin imports the job modules of the project's ``pyproject.toml`` (``[tool.jobframework]
    jobs = [...]``), so a conftest need not.

    A test's ``my_job.enqueue(...)`` with no client (none given, no ``jf_config``, no
    ``set_default_client``) raises ``ConfigurationError`` saying what to take: it went where the
    shell's ``JF_*`` variables pointed.

    It turns the consumer's EMF metrics off for the session (each handler call would print
    a JSON document among the test's output), unless the environment says otherwise:
    ``JF_METRICS_DISABLED=false pytest`` prints them. A job's own Powertools metrics are untouched.

    It shows the framework's own log records from ``WARNING`` up (``JF_LOG_LEVEL=WARNING``, not its
    ``INFO`` lines such as ``job ... was cancelled; acknowledged unrun``), unless the environment says
    otherwise: ``JF_LOG_LEVEL=INFO pytest`` shows them. A job's own ``ctx.logger`` lines are untouched.
    """
    from jobframework.telemetry import LOG_LEVEL_ENV, METRICS_DISABLED_ENV

    os.environ.setdefault(METRICS_DISABLED_ENV, "true")
    os.environ.setdefault(LOG_LEVEL_ENV, "WARNING")
    _import_project_jobs(config.rootpath)
    from jobframework.default_client import refuse_env_client

    refuse_env_client(NO_TEST_CLIENT)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The refusal of an enqueue with no client ends with the session (``pytest.main`` in a process
    that goes on)."""
    from jobframework.default_client import refuse_env_client

    refuse_env_client(None)


NO_TEST_CLIENT = (
    "a job was enqueued with no client in a test, and the jobframework.testing plugin does not send "
    "where the shell's JF_* variables point (a running jf dev's queues, a deployed stage's): take the "
    "jf_config fixture (the embedded AWS), or jf_inline (each enqueue runs its job inline, as Celery's "
    "task_always_eager), or set_default_client(EnqueueRecorder()) (recorded, not sent); to send to "
    "JF_* on purpose, set_default_client(JobClient())"
)


def _import_project_jobs(root: Path) -> None:
    """Import the job modules the project's ``pyproject.toml`` names (``[tool.jobframework] jobs``),
    with its directory importable: every test sees the jobs registered, run alone or not (a job no
    test imported would be dead-lettered ``unknown-type``). A module that fails to import stops the
    session with its message, as ``jf`` does."""
    from jobframework.modules import import_job_modules
    from jobframework.project_file import project_jobs

    try:
        found = project_jobs(root)
        if found is not None:
            found.importable()
            import_job_modules(found.modules)
    except ConfigurationError as exc:
        raise pytest.UsageError(f"jobframework.testing: {exc}") from exc


@pytest.fixture(scope="session")
def jf_aws() -> Iterator[Any]:
    """The embedded AWS (moto server on 127.0.0.1), one per test session."""
    from jobframework.local.aws import EmbeddedAWS

    with EmbeddedAWS() as aws:
        yield aws


@pytest.fixture
def jf_config(jf_aws: Any) -> Iterator[RuntimeConfig]:
    """A freshly provisioned topology of the default registry's jobs; queues are empty.

    For the test's length it is the default client's topology: ``my_job.enqueue(...)`` without
    ``client=`` sends to it, from any thread, whatever default an earlier test or the app's import
    set (put back after; a ``set_default_client`` in the test itself wins until the test ends). It
    went where the shell's ``JF_*`` pointed, a running ``jf dev``'s queues or a deployed stage's.
    """
    from jobframework.client import JobClient, set_default_client

    config = provision_fresh(jf_aws.endpoint_url)[1]
    previous = set_default_client(JobClient(config, sqs_client=jf_aws.client("sqs")))
    try:
        yield config
    finally:
        set_default_client(previous)


@pytest.fixture
def jf_inline() -> Iterator[EnqueueRecorder]:
    """Every enqueue of the test runs its job at once, in-process (Celery's ``task_always_eager``):
    an :class:`EnqueueRecorder` with ``run=True`` as the default client for the test's length (put
    back after). ``jf_inline.requests`` has what was enqueued, ``jf_inline.results`` what each job
    returned; a job's exception propagates to its enqueue (``jf_inline.propagate = False``: kept in
    ``jf_inline.errors``, its status ``dead``). ``default_client().status(id)`` reads ``succeeded``
    or ``dead`` (a 202 API's GET). No AWS: no queue, no retry."""
    from jobframework.client import set_default_client

    recorder = EnqueueRecorder(run=True)
    previous = set_default_client(recorder)
    try:
        yield recorder
    finally:
        set_default_client(previous)


def queued_payloads(job: Job[M, Any], config: RuntimeConfig, sqs: Any) -> list[M]:
    """The payloads of ``job`` waiting in its queue on the embedded AWS (its visible messages), as
    models, in the order received: what a job or a service enqueued, as ``jf_inline.payloads(job)``
    gives it inline. The messages stay: each is made visible again after it is read.

    Raises:
        ValueError: a payload is offloaded to S3 (over the offload threshold): read it with the consumer.
    """
    url = config.endpoints(job.lane).url
    messages = receive_all(sqs, url)
    try:
        found = []
        for message in messages:
            env = parse_body(message["Body"])
            if env.type != job.name:
                continue
            if env.payload_ref is not None:
                raise ValueError(
                    f"job {env.id}'s payload is offloaded to S3 ({env.payload_ref.key}): not read here"
                )
            found.append(job.validate(job.upgrade(env.payload, env.payload_version)))
        return found
    finally:
        for message in messages:
            sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )


def run_saga(
    client: JobClient,
    saga_id: str,
    handler: Any,
    sqs: Any,
    *,
    until: Callable[[SagaRecord], bool] | None = None,
    timeout: float = 30.0,
) -> SagaRecord:
    """Run a saga's jobs on the embedded AWS until its record is final (``succeeded``, ``compensated``,
    ``failed``), or until ``until(record)`` holds (at a wait: ``lambda r: any(s.state == "waiting" for s
    in r.steps)``): each
    round takes one batch of every queue of ``client``'s topology with :func:`consume_once` (steps,
    compensations and deadline checks may each be on a lane of their own). Returns the record.

    Raises:
        TimeoutError: ``timeout`` seconds passed first (the message has the record's status and steps).
    """
    import time

    deadline = time.monotonic() + timeout
    urls = [ep.url for ep in client.config.queues.values()]
    while True:
        record = client.saga_status(saga_id)
        if record is None:
            raise LookupError(f"no saga {saga_id} (started with this client's topology?)")
        if until(record) if until is not None else record.status.terminal:
            return record
        if time.monotonic() > deadline:
            steps = ", ".join(f"{s.name}: {s.state.value}" for s in record.steps)
            raise TimeoutError(f"saga {saga_id} is {record.status.value} after {timeout:g} s ({steps})")
        if not any([consume_once(handler, sqs, url)[0] for url in urls]):
            time.sleep(0.05)  # (a delayed deadline check or a retry's backoff: nothing visible yet)


__all__ = [
    "DEFAULT_QUEUE_ARN",
    "NOWHERE",
    "EmbeddedAWS",  # (jf_aws's type; from jobframework.local.aws)
    "EnqueueRecorder",  # (from jobframework.recorder)
    "Envelope",  # (a message as a producer sends it, for sqs_record; from jobframework.envelope)
    "FakeLambdaContext",  # (from jobframework.polling, as consume_once, drain and receive_all)
    "RecordOutcome",  # (what a listener hears; from jobframework.delivery)
    "RuntimeConfig",  # (jf_config's type; from jobframework.topology)
    "arun_inline",  # (from jobframework.inline)
    "consume_once",
    "drain",
    "in_memory_consumer",
    "jf_aws",
    "jf_config",
    "provision_fresh",
    "queued_payloads",
    "receive_all",
    "run_inline",  # (from jobframework.inline)
    "run_saga",
    "sqs_event",
    "sqs_record",
]


def __getattr__(name: str) -> Any:
    """``EmbeddedAWS`` (``jf_aws``'s type, to annotate a test), imported when asked for."""
    if name == "EmbeddedAWS":
        from jobframework.local.aws import EmbeddedAWS

        return EmbeddedAWS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
