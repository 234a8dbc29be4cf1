"""What the rate gate learns of a record (``jobframework.gates.rate_inputs``): whether its hand-back can
carry a reserved turn, and the turn it carries."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from jobframework import job
from jobframework.delivery import Delivery
from jobframework.envelope import ATTR_RATE_SLOT, Envelope
from jobframework.gates import Admitted, rate_inputs
from jobframework.jobs import JobRegistry
from jobframework.testing import FakeLambdaContext, sqs_record

registry = JobRegistry()


class Item(BaseModel):
    name: str


@job("u.rated", registry=registry, idempotent=False, rate="10/minute")
def rated(item: Item) -> None: ...


def _inputs(arn: str, receives: int, turn: str | None = None) -> Any:
    env = Envelope.new("u.rated", {"name": "a"}, payload_version=1)
    attributes = {ATTR_RATE_SLOT: turn} if turn else {}
    record = sqs_record(env, queue_arn=arn, receive_count=receives, message_attributes=attributes)
    d = Delivery.of(record)
    d.envelope = env
    return rate_inputs(Admitted(d, rated, Item(name="a"), FakeLambdaContext(900)))


STANDARD = "arn:aws:sqs:us-east-1:123456789012:jf-dev-default"


def test_a_first_delivery_on_a_standard_queue_can_carry_its_turn():
    got = _inputs(STANDARD, 1)
    assert got.can_carry and got.reserved is None and got.may_wait > 800


def test_a_fifo_record_or_one_handed_back_in_place_cannot():
    """A FIFO lane hands back in place, and a record received again was handed back in place (its copy's
    send failed): a turn reserved for either would be lost, and reserved again further off each time."""
    assert not _inputs("arn:aws:sqs:us-east-1:123456789012:jf-dev-default-fifo.fifo", 1).can_carry
    assert not _inputs(STANDARD, 2).can_carry


def test_the_turn_a_copy_carries_for_this_attempt():
    assert _inputs(STANDARD, 1, "1700000000.500:1").reserved == 1700000000.5
    assert _inputs(STANDARD, 1, "1700000000.500:2").reserved is None  # another attempt's
