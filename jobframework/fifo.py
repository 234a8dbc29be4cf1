"""The consumer on a FIFO lane: the records of a message group run in order, and a failure holds back
only its own group.

A batch from a FIFO queue (an ordered job's lane, ``@job(ordered_by=...)``) is split by
``MessageGroupId``, keeping the order SQS delivered:

* the records of one group run one after another, never at once; different groups run concurrently,
  within the lane's bound (:mod:`jobframework.concurrency`);
* when a record of a group does not finish (a retry, a release over a limit, a record the consumer
  could not settle), every later record of that group in the batch is handed back unrun: reported in
  ``batchItemFailures`` with its visibility set to 0, not dead-lettered and not an attempt. This is
  Powertools' ``SqsFifoPartialProcessor`` with ``skip_group_on_error``. The other groups' records
  run as usual. A dead-lettered record does not hold its group (as SQS's own redrive policy moves a
  message on): the next one runs;
* nothing is handed back as a fresh copy (a copy would join the end of its group and overtake
  nothing it should): a retry changes the record's visibility in place to its backoff delay, and SQS
  FIFO delivers no later message of the group while that one is in flight, so retries keep order.

Hand-backs in place raise SQS's receive count. So that they are not attempts, each FIFO hand-back is
counted in the state table (one ``ADD`` per record handed back, kept 14 days) and subtracted from
the receive count when the record comes back (one ``BatchGetItem`` per batch of redelivered records)::

    attempt = ApproximateReceiveCount - hand-backs counted

Without a state table (or when a count cannot be written) a hand-back counts as an attempt. The
queue's ``maxReceiveCount`` leaves room for hand-backs
(:func:`jobframework.attempts.fifo_receive_limit`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jobframework.attempts import receive_count
from jobframework.concurrency import run_all
from jobframework.delivery import Delivery, Outcome
from jobframework.envelope import parse_body
from jobframework.verdict import Kind, Verdict, returned

if TYPE_CHECKING:
    from jobframework.state import StateStore

log = logging.getLogger(__name__)

HANDBACKS_TTL_SECONDS = 14 * 24 * 3600
"""How long a record's hand-back count is kept: SQS's longest retention."""
HELD_BACK = "held back behind its group"
"""The ``reason`` of a held-back record's outcome (what the listeners hear)."""
_HOLDS_GROUP = (Kind.RETRY, Kind.RELEASE, Kind.RETURN)
"""Verdicts after which the record comes back: the records of its group behind it must wait."""


def is_fifo_batch(records: list[dict[str, Any]]) -> bool:
    """Whether the batch comes from a FIFO queue (its source ARN ends ``.fifo``)."""
    return bool(records) and str(records[0].get("eventSourceARN", "")).endswith(".fifo")


def group_of(record: Mapping[str, Any]) -> str:
    """The record's ``MessageGroupId`` (``""`` when it has none: it is then a group of its own)."""
    attributes = record.get("attributes")
    group = attributes.get("MessageGroupId") if isinstance(attributes, Mapping) else None
    return group if isinstance(group, str) else ""


def fifo_verdicts(
    records: list[dict[str, Any]],
    process: Callable[[dict[str, Any]], Verdict],
    limit: int,
    *,
    lane: str | None,
    state: StateStore | None,
) -> dict[str, Verdict]:
    """The verdict of each record of a FIFO batch, by message id (see the module docstring).

    ``process`` is the consumer's per-record pipeline; ``limit`` bounds how many groups run at once.
    """
    counted = _handbacks(state, records)
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        ran = _with_attempts(record, counted.get(str(record.get("messageId", "")), 0))
        groups.setdefault(group_of(record) or f"-{record.get('messageId')}", []).append(ran)

    def run_group(group: list[dict[str, Any]]) -> list[Verdict]:
        verdicts: list[Verdict] = []
        holding: Verdict | None = None
        for record in group:
            if holding is not None:
                verdicts.append(_held_back(record, holding))
                continue
            verdict = _in_place(process(record))
            if verdict.kind in _HOLDS_GROUP:
                holding = verdict
            verdicts.append(verdict)
        return verdicts

    done: dict[str, Verdict] = {}
    ordered = list(groups.values())
    for group, verdicts in zip(ordered, run_all(ordered, run_group, limit, lane=lane), strict=True):
        for record, verdict in zip(group, verdicts or [], strict=False):
            done[str(record["messageId"])] = verdict
        for record in group[len(verdicts or []) :]:  # run_all lost the group: it comes back whole
            done[str(record["messageId"])] = returned(Delivery.of(record), "not processed")
    _count_handbacks(state, [v for v in done.values() if v.kind is Kind.RELEASE])
    return done


def _in_place(verdict: Verdict) -> Verdict:
    """A FIFO record is never handed back as a copy: it keeps its place in its group."""
    verdict.copy = False
    return verdict


def _held_back(record: dict[str, Any], holding: Verdict) -> Verdict:
    """Hand a record back unrun because an earlier record of its group comes back."""
    d = Delivery.of(record)
    body = record.get("body")
    if isinstance(body, str):
        try:
            d.envelope = parse_body(body)
        except Exception:
            d.envelope = None  # unread: the outcome names no job
    d.priority, d.lane = holding.delivery.priority, holding.delivery.lane
    log.info(
        "record %s held back: %s of its group %s comes back first",
        d.message_id,
        holding.delivery.message_id,
        group_of(record) or "-",
    )
    return Verdict(d, Kind.RELEASE, delay=0, outcome=d.outcome(Outcome.RELEASED, reason=HELD_BACK))


def _with_attempts(record: dict[str, Any], handbacks: int) -> dict[str, Any]:
    """The record as the pipeline reads it: its receive count less its counted hand-backs (a copy)."""
    count = receive_count(record)
    if not handbacks or count is None:
        return record
    attributes = dict(record["attributes"])
    attributes["ApproximateReceiveCount"] = str(max(1, count - handbacks))
    return {**record, "attributes": attributes}


def _key(message_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"fifo-handbacks#{message_id}"}, "sk": {"S": "-"}}


def _handbacks(state: StateStore | None, records: list[dict[str, Any]]) -> dict[str, int]:
    """The counted hand-backs of the records that were received before (one ``BatchGetItem``)."""
    ids = [str(r.get("messageId", "")) for r in records if (receive_count(r) or 1) > 1]
    if state is None or not ids:
        return {}
    try:
        response = state.client.batch_get_item(
            RequestItems={state.table: {"Keys": [_key(i) for i in ids], "ConsistentRead": True}}
        )
    except Exception:
        log.warning("reading the hand-backs of %d FIFO records failed; they count as attempts", len(ids))
        return {}
    counts: dict[str, int] = {}
    for item in response.get("Responses", {}).get(state.table, []):
        message_id = str(item["pk"]["S"]).split("#", 1)[1]
        counts[message_id] = int(item.get("handbacks", {}).get("N", "0"))
    return counts


def _count_handbacks(state: StateStore | None, released: list[Verdict]) -> None:
    """Count one hand-back for each released record (a failed write is logged: it counts as an attempt)."""
    if state is None:
        return
    expires = str(int(time.time()) + HANDBACKS_TTL_SECONDS)
    for v in released:
        try:
            state.client.update_item(
                TableName=state.table,
                Key=_key(v.delivery.message_id),
                UpdateExpression="ADD handbacks :one SET expires_at = :exp",
                ExpressionAttributeValues={":one": {"N": "1"}, ":exp": {"N": expires}},
            )
        except Exception:
            log.warning(
                "counting the hand-back of %s failed; it counts as an attempt",
                v.delivery.message_id,
                exc_info=True,
            )
