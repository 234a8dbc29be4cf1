""":class:`~jobframework.stores.job_records.JobRecords` in memory: a dict and a lock, with the state
table's rules, for tests of the pipeline without the embedded AWS (``tests/functional/
test_job_records.py`` runs the one contract against this and the state table's)."""

from __future__ import annotations

import threading
import time
from typing import Any

from jobframework.status import FINAL_STATES, STATUS_TTL_SECONDS, JobState, JobStatus, now_iso
from jobframework.stores.job_records import (
    CLAIM_FIELDS,
    EARLY_STATES,
    STATUS_FIELDS,
    StartCheck,
    StartClaim,
    kept_until,
    merged_status,
    replaces_claim,
)
from jobframework.stores.key_records import KeyHolder


class InMemoryJobRecords:
    """:class:`JobRecords` in a dict (the status and flow items of each job by id, as plain values)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        """``(job_id, "status" | "flow")`` to the item's attributes."""
        self._lock = threading.Lock()

    def set_status(
        self,
        job_id: str,
        state: JobState,
        *,
        job_type: str | None = None,
        attempts: int | None = None,
        key: str | None = None,
        enqueued_at: str | None = None,
        error: str | None = None,
        reason: str | None = None,
        result: str | None = None,
        trace_id: str | None = None,
        run_at: str | None = None,
        ttl: int = STATUS_TTL_SECONDS,
    ) -> None:
        now = now_iso()
        given = {
            "job_type": job_type,
            "attempts": attempts,
            "job_key": key,
            "enqueued_at": enqueued_at,
            "error": error,
            "reason": reason,
            "job_result": result,
            "trace_id": trace_id,
            "run_at": run_at,
        }
        with self._lock:
            item = self.items.get((job_id, "status"))
            if state in EARLY_STATES and item is not None and JobState(item["status"]) not in EARLY_STATES:
                return  # the consumer got there first: a late "queued" does not move it back
            item = dict(item or {})
            item.update({k: v for k, v in given.items() if v is not None})
            item.update(status=state.value, updated_at=now, expires_at=int(time.time()) + ttl)
            if state is JobState.RUNNING:
                item.setdefault("started_at", now)
            if state in FINAL_STATES:
                item["finished_at"] = now
            if state is JobState.SUCCEEDED:
                item.pop("error", None)
            self.items[(job_id, "status")] = item

    def put_statuses(self, statuses: list[dict[str, Any]], ttl: int = STATUS_TTL_SECONDS) -> None:
        now, expires = now_iso(), int(time.time()) + ttl
        with self._lock:
            for st in statuses:
                item = {"status": JobState(st["status"]).value, "updated_at": now, "expires_at": expires}
                for field, attribute in STATUS_FIELDS.items():
                    if st.get(field) is not None:
                        item[attribute] = st[field]
                item["updated_at"] = item.get("finished_at") or now  # a finish is the last change
                self.items[(str(st["id"]), "status")] = item

    def get_status(self, job_id: str) -> JobStatus | None:
        with self._lock:
            status = self.items.get((job_id, "status"))
            flow = dict(self.items.get((job_id, "flow"), {}))
        return merged_status(job_id, status, flow, time.time())

    def claims(self, job_ids: list[str]) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {i: dict(self.items[(i, "flow")]) for i in job_ids if (i, "flow") in self.items}

    def lapse_claim(self, job_id: str, *, died_at: str) -> None:
        with self._lock:
            flow = self.items.get((job_id, "flow"), {})
            if float(flow.get("runs_until") or 0) > 0 and str(flow.get("started_at", "")) < died_at:
                flow["runs_until"] = 0

    def set_progress(self, job_id: str, percent: float, note: str | None) -> bool:
        with self._lock:
            item = self.items.get((job_id, "status"))
            if item is None:
                return False
            item.update(progress=percent, progress_note=note, progress_at=now_iso())
            return True

    def requeue(self, job_id: str, reason: str) -> bool:
        with self._lock:
            item = self.items.get((job_id, "status"))
            if item is None or item.get("status") != JobState.DEAD.value:
                return False
            for name in ("finished_at", "next_attempt_at"):
                item.pop(name, None)
            item.update(status=JobState.QUEUED.value, reason=reason, updated_at=now_iso())
            item["redrives"] = int(item.get("redrives") or 0) + 1
            item["expires_at"] = int(time.time()) + STATUS_TTL_SECONDS
            return True

    def claim_start(
        self, job_id: str, *, attempt: int, runs_until: float, now: float, claimant: str = ""
    ) -> bool:
        with self._lock:
            flow = self.items.setdefault((job_id, "flow"), {})
            if "cancelled_at" in flow:
                return False
            if not replaces_claim(flow, attempt, now, claimant):
                return True  # another delivery's live claim of this attempt stands
            flow.update(
                started_at=now_iso(),
                runs_until=runs_until,
                started_attempt=attempt,
                claimed_by=claimant,
                expires_at=int(now) + STATUS_TTL_SECONDS,
            )
        return True

    def unclaim_start(self, job_id: str, *, claimant: str) -> None:
        with self._lock:
            flow = self.items.get((job_id, "flow"), {})
            if "runs_until" in flow and flow.get("claimed_by") == claimant:
                for name in CLAIM_FIELDS:
                    flow.pop(name, None)

    def cancel_marked(self, job_id: str) -> bool:
        with self._lock:
            return "cancelled_at" in self.items.get((job_id, "flow"), {})

    def start_check(self, job_id: str) -> StartCheck:
        with self._lock:
            flow = self.items.get((job_id, "flow"), {})
            return StartCheck("cancelled_at" in flow, (job_id, "status") in self.items)

    def mark_cancelled(self, job_id: str, now: float, *, keep_until: float = 0) -> StartClaim:
        with self._lock:
            flow = self.items.setdefault((job_id, "flow"), {})
            flow.setdefault("cancelled_at", now_iso())
            flow["expires_at"] = kept_until(now, keep_until)
            return StartClaim(float(flow.get("runs_until", 0)), int(flow.get("started_attempt", 0)))

    def key_holder(self, job_id: str, job_type: str) -> KeyHolder | None:
        return None  # no idempotency records in memory: every run claims its start here

    def finish_cancelled(self, job_id: str, reason: str, *, keep_until: float = 0) -> None:
        with self._lock:
            item = self.items.get((job_id, "status"))
            if item is not None and JobState(item["status"]) in FINAL_STATES:  # (cancelled too: as it was)
                return
            now = now_iso()
            self.items[(job_id, "status")] = {
                **(item or {}),
                "status": JobState.CANCELLED.value,
                "reason": reason,
                "updated_at": now,
                "finished_at": now,
                "expires_at": kept_until(time.time(), keep_until),
            }
