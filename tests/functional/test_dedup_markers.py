"""One contract, two implementations of the enqueue dedup markers: the state table on the embedded AWS
and the in-memory twin. Whatever passes here behaves the same in both."""

from __future__ import annotations

import time

import pytest

from jobframework.errors import EnqueueError
from jobframework.status import JobState
from jobframework.stores.dedup import DedupMarkers, DynamoDedupMarkers, InMemoryDedupMarkers
from jobframework.stores.job_records import JobRecords
from jobframework.stores.job_records_dynamodb import DynamoJobRecords
from jobframework.stores.job_records_memory import InMemoryJobRecords
from tests.functional.conftest_local import state_table

LAPSE = 0.15
"""A lease or window short enough to pass within a test (seconds)."""


@pytest.fixture(params=["dynamodb", "in-memory"])
def stores(request: pytest.FixtureRequest) -> tuple[DedupMarkers, JobRecords]:
    markers: DedupMarkers
    records: JobRecords
    if request.param == "in-memory":
        records = InMemoryJobRecords()
        markers = InMemoryDedupMarkers(records)
    else:
        table, dynamodb = state_table(request.getfixturevalue("jf_aws"))
        records, markers = DynamoJobRecords(table, dynamodb), DynamoDedupMarkers(table, dynamodb)
    markers.pending_wait = 0.3  # how long a duplicate waits for an unconfirmed send
    return markers, records


def test_the_first_claim_is_ours_and_a_duplicate_gets_the_confirmed_holder(stores):
    markers, _ = stores
    assert markers.claim("k", "job-a", 3600) is None
    markers.confirm("k", "job-a")
    assert markers.claim("k", "job-b", 3600) == "job-a"


def test_a_duplicate_of_an_unconfirmed_send_waits_then_says_to_try_again(stores):
    markers, _ = stores
    assert markers.claim("k", "job-a", 3600) is None
    with pytest.raises(EnqueueError, match="still being sent by another enqueue; try again"):
        markers.claim("k", "job-b", 3600)


def test_a_released_claim_is_free_again(stores):
    markers, _ = stores
    assert markers.claim("k", "job-a", 3600) is None
    markers.release("k", "job-b")  # not its claim: nothing changes
    markers.release("k", "job-a")
    assert markers.claim("k", "job-b", 3600) is None


def test_a_key_is_free_once_its_window_ends(stores):
    markers, _ = stores
    assert markers.claim("k", "job-a", LAPSE) is None
    markers.confirm("k", "job-a")
    time.sleep(LAPSE + 0.05)
    assert markers.claim("k", "job-b", 3600) is None


def test_an_unconfirmed_untracked_claim_past_its_lease_is_taken_over(stores):
    markers, _ = stores
    assert markers.claim("k", "job-a", 3600, lease=LAPSE) is None
    time.sleep(LAPSE + 0.05)
    assert markers.claim("k", "job-b", 3600) is None
    markers.confirm("k", "job-b")
    assert markers.claim("k", "job-c", 3600) == "job-b"


def test_a_tracked_claim_is_confirmed_by_its_jobs_status(stores):
    markers, records = stores
    assert markers.claim("sent", "job-a", 3600, lease=LAPSE, tracked=True) is None
    records.set_status("job-a", JobState.QUEUED, job_type="t.a", attempts=0)  # what the sender writes
    assert markers.claim("ghost", "ghost", 3600, lease=LAPSE, tracked=True) is None  # never sent
    time.sleep(LAPSE + 0.05)
    assert markers.claim("sent", "job-b", 3600, tracked=True) == "job-a"
    assert markers.claim("ghost", "job-c", 3600, tracked=True) is None  # no status: taken over


def test_only_the_holder_confirms(stores):
    markers, _ = stores
    assert markers.claim("k", "job-a", 3600) is None
    with pytest.raises(Exception):  # noqa: B017, PT011 (a ClientError or an EnqueueError: not ours)
        markers.confirm("k", "job-b")
