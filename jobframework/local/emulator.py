"""The event-source-mapping emulator: polls the priority queues and invokes the real consumer.

It does locally (and, as ``jf worker``, against any endpoint) what Lambda's SQS event
source mapping does in AWS:

- receives batches of up to ``batch_size`` records, waiting up to ``batching_window``
  seconds to fill a batch;
- calls the handler with an event of the exact Lambda shape
  (:func:`jobframework.envelope.lambda_record`) and a context whose remaining time counts
  down from the consumer function's timeout;
- applies the partial batch response as AWS does: the records not in
  ``batchItemFailures`` are deleted (``DeleteMessageBatch``); the reported ones are left
  alone and come back when their visibility (as the consumer set it) runs out. A handler
  that raises, or a response that names an unknown record, fails the whole batch;
- runs at most ``max_concurrency`` batches of a queue at once (one thread a batch);
- serves a queue's message groups (``MessageGroupId``: tenants) round-robin within a look-ahead
  when ``fair_lookahead`` is set (:mod:`jobframework.local.fair`), as SQS fair queues do;
- skips the lanes ``jf queue pause`` paused (``paused``);
- shares its worker threads between the queues with weighted fairness (``POLL_WEIGHT``,
  6:3:2:1): a free worker takes the next queue of a smooth weighted round robin that has
  work and spare concurrency, so critical work never waits behind a burst of low work and
  low work still progresses.

:meth:`Emulator.stop` stops polling and waits (at most ``drain_timeout`` seconds) for the
batches in flight. A batch cut off by the drain time is not lost: its records stay in the
queue and reappear when their visibility runs out.

Example:
    >>> emulator = Emulator(config, topology, handler=consumer(config=config))  # doctest: +SKIP
    >>> emulator.start(); ...; emulator.stop(drain_timeout=10)                    # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobframework.envelope import lambda_record
from jobframework.local.batch_response import delete_settled, failed_ids
from jobframework.local.context import LocalLambdaContext as EmulatorContext
from jobframework.local.fair import FairBuffer
from jobframework.local.pollers import (
    BatchStats,
    QueuePoller,
    WeightedPicker,
    pollers_for,
    queue_arn_from_url,
    worker_processes,
)
from jobframework.local.signals import until_signal

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger(__name__)

__all__ = [  # the pollers live in jobframework.local.pollers; these names stay importable from here
    "BatchStats",
    "Emulator",
    "EmulatorContext",
    "QueuePoller",
    "WeightedPicker",
    "pollers_for",
    "queue_arn_from_url",
    "worker_processes",
]

Handler = Callable[[dict[str, Any], Any], Any]
SQS_MAX_RECEIVE = 10


@dataclass(slots=True)
class _QueueState:
    poller: QueuePoller
    in_flight: int = 0
    idle_until: float = 0.0


class Emulator:
    """Lambda's SQS event source mapping, in threads.

    Args:
        pollers: the queues to poll (see :func:`pollers_for`).
        handler: the Lambda handler, called as ``handler(event, context)``.
        sqs_client: a boto3 SQS client (thread-safe; shared by the workers).
        workers: worker threads shared by all queues (default: the sum of the queues' max
            concurrency, capped at 32).
        wait_time_seconds: ``WaitTimeSeconds`` of each receive (up to 20). With long polling (above
            0) an idle queue costs one receive every that many seconds and a message sent to it is
            received at once (the embedded AWS wakes a waiting receive too); ``jf dev`` uses it. 0
            polls and backs off instead (the demo and tests, which want a stop to be immediate).
        idle_seconds: with short polling, how long a queue found empty is left alone before the next
            poll (it grows up to ``max_idle_seconds`` while the queue stays empty).
        paused: the lanes not to poll now (``jf queue pause``: :class:`jobframework.flow.pause.PauseWatch`);
            asked before each claim, so it must be cheap (cache its reads).
        fair_lookahead: above 0, serve each queue's message groups (tenants) round-robin within this
            many received messages (:mod:`jobframework.local.fair`); 0 takes batches as received.

    A queue found empty is polled by one worker at a time until it has work again; then every
    worker may take it, up to its maximum concurrency.
    """

    def __init__(
        self,
        pollers: Iterable[QueuePoller],
        handler: Handler,
        sqs_client: SQSClient,
        *,
        workers: int | None = None,
        wait_time_seconds: int = 0,
        idle_seconds: float = 0.05,
        max_idle_seconds: float = 1.0,
        region: str = "us-east-1",
        paused: Callable[[], Collection[str]] | None = None,
        fair_lookahead: int = 0,
    ) -> None:
        self.pollers = list(pollers)
        if not self.pollers:
            raise ValueError("the emulator needs at least one queue to poll")
        self.handler = handler
        self.sqs = sqs_client
        self.region = region
        self.wait_time_seconds = wait_time_seconds
        self.idle_seconds = idle_seconds
        self.max_idle_seconds = max_idle_seconds
        total = sum(p.max_concurrency for p in self.pollers)
        self.workers = workers or min(32, max(1, total))
        self.stats = BatchStats()
        self._paused = paused
        # A FIFO queue keeps its groups' order itself: its batches are taken as received.
        self._fair = {
            p.name: FairBuffer(fair_lookahead)
            for p in self.pollers
            if fair_lookahead > 0 and not p.url.endswith(".fifo")
        }
        self._states = {p.name: _QueueState(p) for p in self.pollers}
        self._picker = WeightedPicker({p.name: p.weight for p in self.pollers})
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._batches = 0  # received and being run (what a stop waits for)
        self._running: dict[int, tuple[str, list[dict[str, Any]]]] = {}  # those batches, by thread
        self._stopped = False  # stop() returned: a batch received from now on is handed back
        self._threads: list[threading.Thread] = []
        # Empty polls in a row, per queue; a queue starts as idle (one poller) until it has work.
        self._idle_streak: dict[str, int] = dict.fromkeys(self._states, 1)

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> Emulator:
        for n in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"jf-poller-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info(
            "emulator polling %s with %d workers",
            ", ".join(
                f"{p.name} (weight {p.weight}, {p.max_concurrency} batches at most)" for p in self.pollers
            ),
            self.workers,
        )
        return self

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def in_flight(self) -> int:
        with self._lock:
            return sum(s.in_flight for s in self._states.values())

    def stop(
        self, drain_timeout: float = 30.0, *, wait_for_receives: bool = True, release_unfinished: bool = False
    ) -> bool:
        """Stop polling and wait up to ``drain_timeout`` seconds for the batches in flight.

        ``wait_for_receives=False`` waits for the batches being run only, not for the receives still
        waiting for messages (a long poll lasts up to ``wait_time_seconds``): for queues that go with
        the process (``jf dev``'s embedded AWS). What such a receive returns later is handed back
        (visible again at once), not run. ``release_unfinished``: the records of batches the drain
        time cut off are made visible again at once (``jf dev --reload``, whose queues outlive it: the
        next workers run them), not after their visibility timeout.

        Returns:
            True when every batch finished; False when the drain time ran out (those batches'
            records stay in their queue and reappear after their visibility timeout).
        """
        self._stopping.set()
        with self._lock:
            self._lock.notify_all()
        deadline = time.monotonic() + max(0.0, drain_timeout)
        if wait_for_receives:
            for thread in self._threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            drained = not self.running
        else:
            with self._lock:
                left = max(0.0, deadline - time.monotonic())
                drained = self._lock.wait_for(lambda: not self._batches, left)
                self._stopped = True
        self._return_held()
        if not drained and release_unfinished:
            with self._lock:
                cut_off = list(self._running.values())
            for url, messages in cut_off:
                self._hand_back(url, messages)
        if not drained:
            log.warning(
                "drain time of %gs ran out with %d batch(es) in flight; their records reappear "
                "in the queue after the visibility timeout",
                drain_timeout,
                self.in_flight(),
            )
        return drained

    def run_until_signal(
        self,
        drain_timeout: float = 30.0,
        on_stop: Callable[[], None] | None = None,
        *,
        wait_for_receives: bool = True,
        release_unfinished: bool = False,
        why: str | None = None,
    ) -> bool:
        """Run until SIGTERM or SIGINT (main thread only), then drain; returns :meth:`stop`'s result
        (``why``: what the signal means, for the log line)."""

        def drain() -> bool:
            if on_stop is not None:
                on_stop()
            return self.stop(
                drain_timeout, wait_for_receives=wait_for_receives, release_unfinished=release_unfinished
            )

        return until_signal(drain, first=None if self._threads else self.start, why=why)

    # -- a worker --------------------------------------------------------------------------------------

    def _claim(self, paused: Collection[str] = ()) -> _QueueState | None:
        """The next queue to poll (weighted, with spare concurrency, not idle, not paused), or None."""
        now = time.monotonic()
        eligible = [
            name
            for name, s in self._states.items()
            if name not in paused
            and s.in_flight < s.poller.max_concurrency
            and s.idle_until <= now
            # A queue found empty gets one poller (waiting in its receive) until it has work again.
            and not (self._idle_streak[name] and s.in_flight)
        ]
        name = self._picker.pick(eligible)
        if name is None:
            return None
        state = self._states[name]
        state.in_flight += 1
        return state

    def _work(self) -> None:
        while not self._stopping.is_set():
            paused = self._paused() if self._paused is not None else ()
            with self._lock:
                state = self._claim(paused)
                if state is None:
                    now = time.monotonic()
                    waits = [s.idle_until - now for s in self._states.values() if s.idle_until > now]
                    # Until a queue's pause ends, or a poll ends and notifies.
                    self._lock.wait(min(waits) if waits else self.max_idle_seconds)
                    continue
            try:
                got = self._poll_once(state.poller)
            except BaseException:  # a poller never dies from a job (signals go to the main thread)
                log.warning("polling %s failed", state.poller.name, exc_info=True)
                got = 0
            finally:
                with self._lock:
                    state.in_flight -= 1
                    self._lock.notify_all()
            with self._lock:
                name = state.poller.name
                if got:
                    self._idle_streak[name] = 0
                else:
                    streak = self._idle_streak[name] = self._idle_streak[name] + 1
                    # A long poll (wait_time_seconds) has waited already; a short one backs off.
                    pause = min(self.max_idle_seconds, self.idle_seconds * (2 ** min(streak - 1, 6)))
                    pause = 0.0 if self.wait_time_seconds else pause
                    state.idle_until = max(state.idle_until, time.monotonic() + pause)

    def _receive(self, poller: QueuePoller, count: int, wait: int) -> list[dict[str, Any]]:
        response: Any = self.sqs.receive_message(
            QueueUrl=poller.url,
            MaxNumberOfMessages=max(1, min(SQS_MAX_RECEIVE, count)),
            WaitTimeSeconds=wait,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    def _collect_fair(self, poller: QueuePoller, buffer: FairBuffer) -> list[dict[str, Any]]:
        """One batch taken round-robin over the groups of the look-ahead, topped up first."""
        wait = self.wait_time_seconds
        while (room := buffer.room()) > 0 and not self._stopping.is_set():
            got = self._receive(poller, room, wait)
            if not got:
                break
            buffer.add(got)
            wait = 0
        return buffer.take(poller.batch_size)

    def _return_held(self) -> None:
        """Make the messages the look-ahead still holds visible again (after a stop)."""
        for name, buffer in self._fair.items():
            self._hand_back(self._states[name].poller.url, buffer.drain())

    def _hand_back(self, url: str, messages: list[dict[str, Any]]) -> None:
        """Make received messages that did not run visible again at once."""
        for start in range(0, len(messages), SQS_MAX_RECEIVE):
            chunk = messages[start : start + SQS_MAX_RECEIVE]
            try:
                self.sqs.change_message_visibility_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                        for i, m in enumerate(chunk)
                    ],
                )
            except Exception:
                log.warning("returning %d held messages to %s failed", len(chunk), url, exc_info=True)

    def _collect(self, poller: QueuePoller) -> list[dict[str, Any]]:
        """One batch: up to ``batch_size`` messages, waiting at most the batching window to fill it."""
        buffer = self._fair.get(poller.name)
        if buffer is not None:
            return self._collect_fair(poller, buffer)
        messages = self._receive(poller, poller.batch_size, self.wait_time_seconds)
        if not messages or poller.batching_window <= 0:
            return messages
        deadline = time.monotonic() + poller.batching_window
        while len(messages) < poller.batch_size and not self._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            more = self._receive(poller, poller.batch_size - len(messages), 0)
            if more:
                messages.extend(more)
            else:
                self._stopping.wait(min(left, max(self.idle_seconds, 0.05)))
        return messages

    def _poll_once(self, poller: QueuePoller) -> int:
        messages = self._collect(poller)
        if not messages:
            return 0
        with self._lock:  # it has work: let the other workers take it too while this batch runs
            late = self._stopped
            self._batches += 0 if late else 1
            self._idle_streak[poller.name] = 0
            self._lock.notify_all()
        if late:  # received after stop() returned (it did not wait for this receive): not run
            self._hand_back(poller.url, messages)
            return 0
        me = threading.get_ident()
        with self._lock:
            self._running[me] = (poller.url, messages)
        try:
            self.invoke(poller, messages)
        finally:
            with self._lock:
                self._running.pop(me, None)
                self._batches -= 1
                self._lock.notify_all()
        return len(messages)

    def invoke(self, poller: QueuePoller, messages: list[dict[str, Any]]) -> list[str]:
        """Call the handler with one batch and apply its partial batch response.

        Returns the ids of the records deleted.
        """
        records = [lambda_record(m, queue_arn=poller.arn, region=self.region) for m in messages]
        event = {"Records": records}
        context = EmulatorContext(poller.timeout, function_name=poller.function_name)
        by_id = {m["MessageId"]: m for m in messages}
        try:
            response = self.handler(event, context)
            failed = failed_ids(response, set(by_id))
        except BaseException:
            log.error(
                "%s invocation failed; the whole batch of %d returns after its visibility timeout",
                poller.function_name,
                len(messages),
                exc_info=True,
            )
            with self._lock:
                self.stats.invocation_errors += 1
            failed = set(by_id)
        if context.get_remaining_time_in_millis() <= 0:
            log.warning(
                "%s ran past its %gs timeout (Lambda would have cut it off)",
                poller.function_name,
                poller.timeout,
            )
        done = [mid for mid in by_id if mid not in failed]
        deleted = delete_settled(self.sqs, poller.url, [by_id[mid] for mid in done])
        with self._lock:
            self.stats.batches += 1
            self.stats.records += len(messages)
            self.stats.deleted += len(deleted)
            self.stats.failed += len(failed)
            key = poller.name
            self.stats.by_priority[key] = self.stats.by_priority.get(key, 0) + len(messages)
        return deleted
