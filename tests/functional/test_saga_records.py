"""One contract, two implementations of saga records: the state table on the embedded AWS and the
in-memory twin. Whatever passes here behaves the same in both."""

from __future__ import annotations

import pytest

from jobframework.saga import SagaRecord, SagaStatus
from jobframework.stores.sagas import DynamoSagaRecords, InMemorySagaRecords, SagaRecords
from tests.functional.conftest_local import state_table


@pytest.fixture(params=["dynamodb", "in-memory"])
def sagas(request: pytest.FixtureRequest) -> SagaRecords:
    if request.param == "in-memory":
        return InMemorySagaRecords()
    table, dynamodb = state_table(request.getfixturevalue("jf_aws"))
    return DynamoSagaRecords(table, dynamodb)


def _record(
    saga_id: str, name: str = "checkout", created: str = "2026-12-04T00:00:00.000+00:00"
) -> SagaRecord:
    return SagaRecord(
        id=saga_id, name=name, payload={"order": saga_id}, created_at=created, updated_at=created
    )


def test_a_created_record_reads_back_whole(sagas):
    assert sagas.get("s1") is None
    assert sagas.create(_record("s1"))
    got = sagas.get("s1")
    assert got is not None and got.model_dump() == _record("s1").model_dump()


def test_an_id_is_created_once(sagas):
    assert sagas.create(_record("s1"))
    assert not sagas.create(_record("s1", name="other"))
    got = sagas.get("s1")
    assert got is not None and got.name == "checkout"


def test_a_write_goes_over_the_version_it_read_only(sagas):
    sagas.create(_record("s1"))
    first = _record("s1").model_copy(update={"version": 2, "status": SagaStatus.COMPENSATING})
    assert sagas.replace(first, expected_version=1)
    stale = _record("s1").model_copy(update={"version": 2, "status": SagaStatus.SUCCEEDED})
    assert not sagas.replace(stale, expected_version=1)  # another consumer wrote version 2 first
    got = sagas.get("s1")
    assert got is not None and (got.version, got.status) == (2, SagaStatus.COMPENSATING)
    assert not sagas.replace(_record("nope"), expected_version=1)  # no record to write over


def test_the_listing_filters_and_puts_the_newest_first(sagas):
    sagas.create(_record("a", created="2026-12-04T00:00:01.000+00:00"))
    sagas.create(_record("b", created="2026-12-04T00:00:03.000+00:00"))
    sagas.create(_record("c", name="refund", created="2026-12-04T00:00:02.000+00:00"))
    done = _record("a", created="2026-12-04T00:00:01.000+00:00").model_copy(
        update={"version": 2, "status": SagaStatus.SUCCEEDED}
    )
    assert sagas.replace(done, expected_version=1)
    assert [r.id for r in sagas.find()] == ["b", "c", "a"]
    assert [r.id for r in sagas.find(name="checkout")] == ["b", "a"]
    assert [r.id for r in sagas.find(status="succeeded")] == ["a"]
    assert [r.id for r in sagas.find(limit=1)] == ["b"]
