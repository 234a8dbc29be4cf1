"""What the console's pages read and change: one topology's queues, DLQs, state table and jobs.

:class:`Console` holds the clients (made once, by ``jf ui``, from the same AWS resolution as every
``jf`` command) and the library objects the pages call: :class:`~jobframework.dlq.DeadLetters`,
:class:`~jobframework.state.StateStore`, :class:`~jobframework.client.JobClient`. It never holds or
shows a credential: the clients carry them, and no page renders a client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobframework.dlq import DeadLetters
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry, Priority, lane_sort_key
from jobframework.state import StateStore
from jobframework.topology import RuntimeConfig, ScheduleSpec, Topology
from jobframework.topology_settings import settings_of_parameter

if TYPE_CHECKING:
    from jobframework.client import JobClient


NO_STATE_TABLE = (
    "this topology has no state table (JF_STATE_TABLE): job status, schedules' runs and sagas live there"
)


@dataclass
class Console:
    """The console's view of one deployment.

    Args:
        config: the topology's runtime part (queue URLs, tables, endpoint).
        sqs: an SQS client.
        dynamodb: a DynamoDB client (job status and sagas; ``None`` when there is no state table).
        cloudwatch: a CloudWatch client for the queues' age of oldest message (real AWS only).
        lambda_client: a Lambda client: pausing a queue also disables its event source mappings.
        registry: the loaded job modules' jobs (schedules and retry plans need them; ``None``: not loaded).
        read_only: hide and refuse every action.
        stage: the stage whose topology settings apply (schedule names).
    """

    config: RuntimeConfig
    sqs: Any
    dynamodb: Any = None
    cloudwatch: Any = None
    lambda_client: Any = None
    registry: JobRegistry | None = None
    read_only: bool = False
    stage: str = "dev"
    job_modules: list[str] = field(default_factory=list)
    _client: JobClient | None = field(default=None, init=False, repr=False)

    @property
    def letters(self) -> DeadLetters:
        wait = 0 if self.config.endpoint_url else 1
        return DeadLetters(self.config, self.sqs, dynamodb_client=self.dynamodb, wait_time_seconds=wait)

    @property
    def store(self) -> StateStore | None:
        if not self.config.state_table or self.dynamodb is None:
            return None
        return StateStore.of(self.config, self.dynamodb)

    def require_store(self) -> StateStore:
        store = self.store
        if store is None:
            raise ConfigurationError(NO_STATE_TABLE)
        return store

    @property
    def client(self) -> JobClient:
        """The job client the actions enqueue with (the loaded registry; status in the state table)."""
        if self._client is None:
            from jobframework.client import JobClient

            clients = {"dynamodb": self.dynamodb} if self.dynamodb is not None else {}
            self._client = JobClient(
                self.config, registry=self.registry or JobRegistry(), sqs_client=self.sqs, clients=clients
            )
        return self._client

    @property
    def lanes(self) -> list[str]:
        """The topology's lanes, critical first."""
        return sorted(self.config.queues, key=lane_sort_key)

    def lane(self, name: str) -> str:
        """``name`` if it is a lane of this topology.

        Raises:
            LookupError: no such lane (the page answers 404).
        """
        if name not in self.config.queues:
            raise LookupError(f"no {name!r} queue in this topology (known: {', '.join(self.lanes)})")
        return name

    @property
    def jobs_loaded(self) -> bool:
        return self.registry is not None and len(self.registry) > 0

    def schedules(self) -> tuple[ScheduleSpec, ...]:
        """The loaded jobs' schedules (``@job(schedule=...)``), as the topology derives them."""
        if not self.jobs_loaded:
            return ()
        # The app and stage of the topology parameter jf dev or the stack wrote, when the config has it.
        settings = settings_of_parameter(self.config.topology_parameter, self.stage)
        topology = Topology.from_registry(self.registry, settings)
        return topology.schedules

    def max_attempts(self, job_type: str | None) -> int | None:
        job = self.registry.find(job_type) if self.registry is not None and job_type else None
        return job.retry.max_attempts if job is not None else None

    def priority_of(self, job_type: str) -> Priority | None:
        job = self.registry.find(job_type) if self.registry is not None else None
        return job.priority if job is not None else None
