"""Where a consumer's queues are: source and DLQ URLs, from the configuration or else from SQS.

Records name their source queue by ARN; the URLs come from the ``JF_*`` configuration when it names
the queue, else from ``GetQueueUrl`` and the queue's redrive policy (cached per process).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from jobframework.config import RuntimeConfig
from jobframework.delivery import arn_queue_name
from jobframework.jobs import lane_priority

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger(__name__)


class QueueDirectory:
    """Source and DLQ URLs by queue name.

    Args:
        config: gives the runtime configuration, or ``None`` when there is none.
        sqs: gives the SQS client.
    """

    def __init__(self, config: Callable[[], RuntimeConfig | None], sqs: Callable[[], SQSClient]) -> None:
        self._config = config
        self._sqs = sqs
        self._queue_urls: dict[str, str] = {}
        self._dlq_urls: dict[str, str] = {}
        self._sources: dict[str, tuple[str | None, str | None]] = {}

    def priority_of(self, queue_name: str) -> str | None:
        """The priority of a queue the configuration names, else ``None``."""
        return self.source_of(queue_name)[0]

    def source_of(self, queue_name: str) -> tuple[str | None, str | None]:
        """The priority and the lane (``default-fifo``, ``high-cpu``) of a queue the configuration
        names, else ``(None, None)`` (cached per process, as the URLs are)."""
        source = self._sources.get(queue_name)
        if source is None:
            config = self._config()
            found = config.by_queue_name(queue_name) if config else None
            source = (lane_priority(found[0]).value, str(found[0])) if found else (None, None)
            self._sources[queue_name] = source
        return source

    def queue_url(self, queue_name: str) -> str:
        """The URL of a source queue named in a record's ARN (from the config, else GetQueueUrl)."""
        url = self._queue_urls.get(queue_name)
        if url is None:
            config = self._config()
            found = config.by_queue_name(queue_name) if config else None
            if found and found[1].name == queue_name:
                url = found[1].url
            else:
                url = self._sqs().get_queue_url(QueueName=queue_name)["QueueUrl"]
            self._queue_urls[queue_name] = url
        return url

    def dlq_url(self, queue_name: str) -> str:
        """The DLQ of a source queue: from the config, else from the queue's redrive policy."""
        url = self._dlq_urls.get(queue_name)
        if url is None:
            config = self._config()
            found = config.by_queue_name(queue_name) if config else None
            if found and found[1].name == queue_name:
                url = found[1].dlq_url
            else:
                attrs = self._sqs().get_queue_attributes(
                    QueueUrl=self.queue_url(queue_name), AttributeNames=["RedrivePolicy"]
                )["Attributes"]
                policy = attrs.get("RedrivePolicy")
                if not policy:
                    raise RuntimeError(
                        f"queue {queue_name} has no DLQ (no RedrivePolicy); cannot dead-letter"
                    )
                url = self._sqs().get_queue_url(
                    QueueName=arn_queue_name(json.loads(policy)["deadLetterTargetArn"])
                )["QueueUrl"]
            self._dlq_urls[queue_name] = url
        return url


_env_config: RuntimeConfig | None = None
_env_config_read = False


def env_config() -> RuntimeConfig | None:
    """The ``JF_*`` configuration of this process, read once; ``None`` when there is none."""
    global _env_config, _env_config_read
    if not _env_config_read:
        _env_config_read = True
        try:
            _env_config = RuntimeConfig.from_env()
        except Exception:
            log.info("no JF_* configuration; queues are resolved from each record's ARN")
            _env_config = None
    return _env_config
