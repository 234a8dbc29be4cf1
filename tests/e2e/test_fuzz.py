"""Bad-input fuzzing of the real consumer on the embedded AWS (hypothesis).

Each example is one Lambda SQS event of healthy and bad records mixed, handed to the real
consumer; dead letters really go to the DLQs of the embedded AWS and are read back.

What can arrive from SQS shapes the cases: a body is a ``str`` of XML-legal characters (SQS
refuses anything else at send time), so invalid UTF-8 from a producer arrives as U+FFFD
replacement characters, never as bytes or lone surrogates; attribute values are non-empty.
Record shapes Lambda never produces (``messageAttributes`` that is not a map, attributes
without ``dataType``, a receive count that is not a number, no ``eventSourceARN``) are fuzzed
too, because the consumer promises to cope with any input.

The properties, per event:

* the handler returns ``{"batchItemFailures": [...]}`` naming only records of the event; it
  never raises;
* a healthy record succeeds: not in ``batchItemFailures``, its job ran exactly once;
* a bad record is dead-lettered: its body (``<empty body>`` for an empty one) is in its
  queue's DLQ with the expected ``jf-reason``, it is not in ``batchItemFailures``, and its job
  did not run (a job that raises ``PermanentError`` ran once, by design);
* two kinds of bad record are *transient by design* and are reported in ``batchItemFailures``
  instead (SQS brings them back): a record whose ``eventSourceARN`` names no queue of the
  configuration (its DLQ cannot be known), and an offloaded payload whose S3 object cannot be
  read (S3 may be briefly unavailable) before the job's last attempt.

A part runs against a consumer with signing on (the key ring in SSM), where healthy records
are signed and bad signatures are dead-lettered with reason ``signature``.

CI runs 150 examples; ``--run-slow`` runs a soak of ``JF_FUZZ_EXAMPLES`` (default 10,000).
"""

from __future__ import annotations

import dataclasses
import json
import os
import string
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from jobframework import JobContext, PermanentError, RetryPolicy, attempts, job
from jobframework.attempts import ATTR_NEWER
from jobframework.consumer import Consumer, consumer
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry
from jobframework.newer_payload import NEWER_WINDOW_SECONDS
from jobframework.signing import KeyRing
from jobframework.testing import FakeLambdaContext, provision_fresh, sqs_record
from jobframework.topology import RuntimeConfig

SOAK_EXAMPLES = int(os.environ.get("JF_FUZZ_EXAMPLES", "10000"))
MAX_ATTEMPTS = 3
registry = JobRegistry()
ran: Counter[str] = Counter()
stats: Counter[str] = Counter()
"""Examples and records checked, by kind and outcome (printed after each fuzz run)."""


class Echo(BaseModel):
    token: str
    count: int = 0
    mode: Literal["ok", "permanent"] = "ok"


def _from_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """Version 1 had ``legacy_count`` as a numeric string; it raises on anything else."""
    legacy = payload.pop("legacy_count")
    return {**payload, "count": int(legacy)}


@job(
    "fuzz.echo",
    registry=registry,
    version=2,
    upgrade={1: _from_v1},
    retry=RetryPolicy(max_attempts=MAX_ATTEMPTS, base_delay=1),
    timeout=5,
)
def echo(payload: Echo, ctx: JobContext) -> None:
    ran[payload.token] += 1
    if payload.mode == "permanent":
        raise PermanentError(f"{payload.token} asked to fail")


# -- the world the consumer runs in ----------------------------------------------------------------------


@dataclass
class World:
    config: RuntimeConfig
    sqs: Any
    s3: Any
    plain: Consumer
    signed: Consumer
    ring: KeyRing
    arns: dict[str, str]
    """Queue ARN by lane (default, high)."""
    dlqs: dict[str, str] = field(default_factory=dict)
    """DLQ URL by queue ARN."""


@pytest.fixture(scope="module")
def world(jf_aws: Any) -> World:
    _topology, config = provision_fresh(jf_aws.endpoint_url, registry)
    # No status writes (not under test here); a payload bucket that is not there, so that a pointer to
    # it (the consumer reads only its own bucket) finds the payload store unavailable: retried.
    config = config.model_copy(update={"state_table": None, "payload_bucket": MISSING_BUCKET})
    sqs = jf_aws.client("sqs")
    ring_doc = {"current": "k2", "keys": {"k1": "old-secret-0123456789", "k2": "new-secret-0123456789"}}
    parameter = f"/jf/{config.endpoints('default').name}/signing-keys"
    jf_aws.client("ssm").put_parameter(
        Name=parameter, Value=json.dumps(ring_doc), Type="SecureString", Overwrite=True
    )
    signed_config = config.model_copy(update={"signing_keys": f"ssm:{parameter}"})
    arns, dlqs = {}, {}
    for lane in ("default", "high"):
        ep = config.endpoints(lane)
        arn = sqs.get_queue_attributes(QueueUrl=ep.url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        arns[lane], dlqs[arn] = arn, ep.dlq_url
    return World(
        config=config,
        sqs=sqs,
        s3=jf_aws.client("s3"),
        plain=consumer(registry, config=config, sqs_client=sqs),
        signed=consumer(registry, config=signed_config, sqs_client=sqs),
        ring=KeyRing.from_json(json.dumps(ring_doc)),
        arns=arns,
        dlqs=dlqs,
    )


# -- cases -----------------------------------------------------------------------------------------------

HEALTHY = "healthy"
RETRIED = "retried"
"""Transient by design: reported in batchItemFailures, not dead-lettered."""
MISSING_BUCKET = "jf-fuzz-missing"
"""The world's payload bucket, which does not exist."""

# Characters SQS accepts in a body (XML 1.0), U+FFFD included: what invalid UTF-8 turns into.
sqs_text = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00\ufffe\uffff"
    ).filter(lambda c: c in "\t\n\r" or c >= " "),
    max_size=60,
)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | sqs_text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(sqs_text, inner, max_size=4),
    max_leaves=12,
)


@dataclass(repr=False)
class Case:
    """One record to build: its body, how it ends, and whether its job may run."""

    kind: str
    body: str
    expect: str
    """``healthy``, ``retried`` or the ``jf-reason`` of its dead letter."""
    token: str | None = None
    runs: int = 0
    envelope: Envelope | None = None
    """Signed by the signed consumer's ring (unless the case is about the signature)."""
    alternatives: frozenset[str] = frozenset()
    """Other reasons that are right too (e.g. nesting deep enough to defeat the JSON parser)."""
    attributes: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Case({self.kind}, expect={self.expect}, {len(self.body)} chars: {self.body[:160]!r})"


def _token() -> str:
    return f"t-{uuid.uuid4().hex}"


def _envelope(job_type: str, payload: dict[str, Any], payload_version: int = 2, **fields: Any) -> Envelope:
    return Envelope.new(job_type, payload, payload_version=payload_version, **fields)


def _raw(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False)


def _base_dict(payload: Any, job_type: str = "fuzz.echo", version: int = 2) -> dict[str, Any]:
    return {
        "v": 1,
        "id": str(uuid.uuid4()),
        "type": job_type,
        "payload": payload,
        "payload_version": version,
        "key": f"k-{uuid.uuid4().hex}",
        "enqueued_at": datetime.now(UTC).isoformat(),
    }


@st.composite
def healthy_cases(draw: st.DrawFn) -> Case:
    token = _token() + draw(st.sampled_from(["", "\ufffd", "ü€𝄞", "\t<x>&"]))
    extra = draw(st.dictionaries(st.sampled_from(["note", "meta", "x"]), json_values, max_size=2))
    if draw(st.booleans()):
        env = _envelope("fuzz.echo", {**extra, "token": token, "count": draw(st.integers(0, 10**6))})
    else:  # an old producer: version 1, upgraded before validation
        env = _envelope(
            "fuzz.echo", {"token": token, "legacy_count": str(draw(st.integers(0, 99)))}, payload_version=1
        )
    if draw(st.integers(0, 20)) == 0:  # near SQS's limit: a large healthy payload
        env = _envelope(
            "fuzz.echo", {"token": token, "note": "x" * draw(st.sampled_from([300_000, 1_000_000]))}
        )
    return Case("healthy", env.to_body(), HEALTHY, token=token, runs=1, envelope=env)


@st.composite
def malformed_cases(draw: st.DrawFn) -> Case:
    shape = draw(st.sampled_from(["empty", "text", "utf8", "json", "envelope", "deep", "huge", "v2"]))
    if shape == "empty":
        return Case("empty", "", "malformed")
    if shape == "utf8":  # a producer's invalid UTF-8, decoded with errors="replace" before the send
        raw = draw(st.binary(min_size=1, max_size=80))
        text = "".join(c for c in raw.decode("utf-8", "replace") if c in "\t\n\r" or c >= " ")
        return Case("invalid-utf8", text + "\ufffd", "malformed")
    if shape == "text":
        text = draw(sqs_text.filter(lambda t: not _is_json_object(t)))
        return Case("not-json", text, "malformed")
    if shape == "json":
        value: Any = draw(
            json_values.filter(lambda v: not isinstance(v, dict)) | st.dictionaries(sqs_text, json_values)
        )
        return Case("not-an-object", json.dumps(value, ensure_ascii=draw(st.booleans())), "malformed")
    if shape == "deep":
        depth = draw(st.sampled_from([10, 900, 5_000, 150_000]))  # at most ~900 kB: it must fit in SQS
        body = draw(st.sampled_from(["[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth]))
        return Case("deep-body", body, "malformed")
    if shape == "huge":
        return Case("huge-not-json", "{" + "x" * draw(st.sampled_from([500_000, 1_040_000])), "malformed")
    if shape == "v2":
        return Case("envelope-v2", _raw({**_base_dict({"token": _token()}), "v": 2}), "malformed")
    data = _base_dict({"token": _token()})
    name = draw(st.sampled_from(["id", "type", "payload", "key", "enqueued_at", "payload_version", "saga"]))
    bad = {
        "id": st.sampled_from(["", 7, None, [], {}]),
        "type": st.sampled_from(["", 7, None, "x" * 300]),
        "payload": st.sampled_from([[], "x", 1, None, True]),
        "key": st.sampled_from(["", 7, None, "k" * 2000]),
        "enqueued_at": st.sampled_from(["yesterday", [], {}, None, "2024-13-45T99:00:00"]),
        "payload_version": st.sampled_from([0, -1, "two", 1.5, None]),
        "saga": st.sampled_from(["x", {"id": 1}, {"id": "s"}, []]),
    }[name]
    value = draw(bad)
    if value is None and draw(st.booleans()):
        del data[name]
    else:
        data[name] = value
    return Case(f"bad-{name}", _raw(data), "malformed")


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


@st.composite
def rejected_cases(draw: st.DrawFn) -> Case:
    """Well-formed envelopes that must not run: unknown type, bad payload or version, or a failing job."""
    shape = draw(st.sampled_from(["unknown", "payload", "deep-payload", "newer", "upgrade", "permanent"]))
    token = _token()
    if shape == "unknown":
        name = draw(
            st.sampled_from(["Fuzz.Echo", "fuzz.echo ", "fuzz"]) | sqs_text.filter(lambda t: len(t) > 0)
        )
        env = _envelope(name[:256], {"token": token})
        return Case("unknown-type", env.to_body(), "unknown-type", envelope=env)
    if shape == "payload":
        payload: dict[str, Any] = draw(
            st.sampled_from(
                [{}, {"token": 5}, {"token": None}, {"token": "x", "count": "many"}, {"mode": "odd"}]
            )
        )
        env = _envelope("fuzz.echo", payload)
        return Case("invalid-payload", env.to_body(), "invalid-payload", envelope=env)
    if shape == "deep-payload":
        depth = draw(st.sampled_from([10, 500, 50_000]))
        data = _base_dict({"token": token})
        body = _raw(data).replace(
            f'"token": "{token}"', f'"token": "{token}", "count": ' + "[" * depth + "]" * depth
        )
        # unsigned (it is built as text): the signing consumer stops it at the signature
        return Case(
            "deep-payload", body, "invalid-payload", alternatives=frozenset({"malformed", "signature"})
        )
    if shape == "newer":
        # (handed back for a consumer that reads it for longer than the window: dead-lettered now)
        env = _envelope("fuzz.echo", {"token": token}, payload_version=draw(st.integers(3, 2**31)))
        waited = {ATTR_NEWER: f"{time.time() - NEWER_WINDOW_SECONDS - 60:.0f}"}
        return Case("newer-version", env.to_body(), "version", envelope=env, attributes=waited)
    if shape == "upgrade":
        payload = draw(st.sampled_from([{"token": token}, {"token": token, "legacy_count": "many"}]))
        env = _envelope("fuzz.echo", payload, payload_version=1)
        return Case("failed-upgrade", env.to_body(), "version", envelope=env)
    env = _envelope("fuzz.echo", {"token": token, "mode": "permanent"})
    return Case("permanent", env.to_body(), "permanent", token=token, runs=1, envelope=env)


def _offloaded() -> Case:
    """A payload pointer into a bucket that cannot be read: retried (S3 may be briefly unavailable)."""
    ref = {"bucket": MISSING_BUCKET, "key": f"p/{uuid.uuid4().hex}", "size": 10, "sha256": "0" * 64}
    env = Envelope.model_validate({**_base_dict({}), "payload_ref": ref})
    return Case("missing-offloaded-payload", env.to_body(), RETRIED, envelope=env)


@st.composite
def signature_cases(draw: st.DrawFn, ring: KeyRing) -> Case:
    """For the signed consumer: a healthy envelope with a missing, wrong or foreign signature."""
    token = _token()
    env = _envelope("fuzz.echo", {"token": token})
    kid, mac = ring.sign(env)
    shape = draw(st.sampled_from(["none", "mac", "kid", "tampered", "only-kid", "field", "huge-kid"]))
    attributes = {
        "none": {},
        "mac": {"jf-kid": kid, "jf-sig": draw(st.text(string.hexdigits, min_size=1, max_size=64))},
        "kid": {"jf-kid": "k9", "jf-sig": mac},
        "tampered": {"jf-kid": kid, "jf-sig": mac},
        "only-kid": {"jf-kid": kid},
        "field": {},
        "huge-kid": {"jf-kid": "k" * 100_000, "jf-sig": mac},
    }[shape]
    body = env.to_body()
    if shape == "tampered":
        body = body.replace(token, token + "-evil")
    if shape == "field":
        body = env.model_copy(
            update={"sig": draw(st.sampled_from(["nocolon", "k2:", ":abc", "k1:" + mac]))}
        ).to_body()
    return Case(f"signature-{shape}", body, "signature", attributes=attributes)


system_garbage = st.fixed_dictionaries(
    {},
    optional={
        "ApproximateReceiveCount": st.sampled_from(
            ["abc", "", "-1", "0", "1e3", "99999999999999999999", "2"]
        ),
        "SentTimestamp": st.sampled_from(["x", "-5", "1e400", ""]),
        "AWSTraceHeader": st.sampled_from(
            ["Root=garbage", "x" * 2000, "Root=1-5759e988-bd862e3fe1be46a994272793"]
        ),
    },
)
attribute_values = st.one_of(
    st.fixed_dictionaries({"dataType": st.just("String"), "stringValue": sqs_text.filter(bool)}),
    st.fixed_dictionaries({"dataType": st.just("String"), "stringValue": st.just("v" * 200_000)}),
    st.fixed_dictionaries({"dataType": st.just("Binary"), "binaryValue": st.just("AAEC")}),
    st.fixed_dictionaries({"stringValue": st.just("no data type")}),
    st.fixed_dictionaries({"dataType": st.just("Number"), "stringValue": st.integers().map(str)}),
    st.fixed_dictionaries({"dataType": st.just("String"), "stringValue": st.integers()}),
    st.just("not a map"),
)
attribute_names = st.sampled_from(["traceparent", "tracestate", "jf-type", "x-custom", "AWSTraceHeader"])


CASE_ATTRIBUTES = frozenset({"jf-sig", "jf-kid", ATTR_NEWER})
"""The attributes a case is made of (its signature, a newer payload's time handed back): kept."""


@st.composite
def garbled(draw: st.DrawFn, record: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The record with attribute garbage; ``True`` when its source queue is no longer known."""
    if draw(st.booleans()):
        record["attributes"] = {**record["attributes"], **draw(system_garbage)}
    if draw(st.integers(0, 9)) == 0:
        record["attributes"] = draw(st.sampled_from([None, [], "x"]))
    choice = draw(st.integers(0, 9))
    if choice < 3:
        extra = draw(st.dictionaries(attribute_names, attribute_values, max_size=3))
        kept = {k: v for k, v in record["messageAttributes"].items() if k in CASE_ATTRIBUTES}
        record["messageAttributes"] = {**extra, **kept}
    elif choice == 3 and not CASE_ATTRIBUTES & set(record["messageAttributes"]):
        record["messageAttributes"] = draw(st.sampled_from([None, [], "x", {"a": None}]))
    unknown_source = False
    if draw(st.integers(0, 14)) == 0:
        unknown_source = True
        if draw(st.booleans()):
            del record["eventSourceARN"]
        else:
            record["eventSourceARN"] = draw(
                st.sampled_from(["", "arn:aws:sqs:us-east-1:123456789012:nope", "::"])
            )
    return record, unknown_source


# -- running one event and checking it -------------------------------------------------------------------


def _dead_letters(world: World, expected: int) -> list[tuple[str, str]]:
    """Read (and delete) every dead letter of the fuzzed queues: ``(body, jf-reason)``."""
    found: list[tuple[str, str]] = []
    for url in set(world.dlqs.values()):
        empty = 0
        while empty < (2 if len(found) < expected else 1):
            messages = world.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, MessageAttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                empty += 1
                continue
            for m in messages:
                reason = m.get("MessageAttributes", {}).get("jf-reason", {}).get("StringValue", "<none>")
                found.append((m["Body"], reason))
            world.sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
            )
    return found


def check_event(world: World, handler: Consumer, cases: list[Case], draw: Any, signed: bool) -> None:
    records, unknown_source = [], []
    for case in cases:
        attributes = dict(case.attributes)
        if signed and case.envelope is not None and not attributes.keys() & {"jf-kid", "jf-sig"}:
            kid, mac = world.ring.sign(case.envelope)
            attributes = {**attributes, "jf-kid": kid, "jf-sig": mac}
        lane = draw(st.sampled_from(["default", "high"]))
        receive_count = draw(st.integers(1, MAX_ATTEMPTS - 1))
        record = sqs_record(case.body, queue_arn=world.arns[lane], receive_count=receive_count)
        record["messageAttributes"] = {
            k: {"stringValue": v, "stringListValues": [], "binaryListValues": [], "dataType": "String"}
            for k, v in attributes.items()
        }
        record, lost_source = draw(garbled(record))
        records.append(record)
        unknown_source.append(lost_source)
    # A retried case whose garbled receive count says "last attempt" is exhausted instead.
    cases = [
        dataclasses.replace(case, expect="exhausted")
        if case.expect == RETRIED and _attempt(record) >= MAX_ATTEMPTS
        else case
        for case, record in zip(cases, records, strict=True)
    ]
    ran.clear()
    expected_dead: Counter[tuple[str, str]] = Counter()
    loose: list[tuple[str, frozenset[str]]] = []
    for case, lost_source in zip(cases, unknown_source, strict=True):
        if case.expect not in (HEALTHY, RETRIED) and not lost_source:
            body = case.body or "<empty body>"
            if case.alternatives:
                loose.append((body, frozenset({case.expect, *case.alternatives})))
            else:
                expected_dead[(body, case.expect)] += 1

    try:
        response = handler({"Records": records}, FakeLambdaContext(30))
    finally:  # the DLQs are read and emptied whatever happens, so that no example leaks into the next
        dead = Counter(_dead_letters(world, sum(expected_dead.values()) + len(loose)))

    assert set(response) == {"batchItemFailures"}
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    ids = [r["messageId"] for r in records]
    assert set(failed) <= set(ids) and len(failed) == len(set(failed))
    for case, record, lost_source in zip(cases, records, unknown_source, strict=True):
        where = f"{case.kind} record {record['messageId']}"
        if case.token is not None:
            assert ran[case.token] == case.runs, f"{where} ran {ran[case.token]} times"
        if case.expect == HEALTHY:
            assert record["messageId"] not in failed, f"healthy {where} was not acknowledged"
        elif case.expect == RETRIED and not lost_source and attempts.receive_count(record) is None:
            # No receive count to grow: the retry is a copy carrying the execution, the original acked.
            assert record["messageId"] not in failed, f"{where} was retried as a copy and must be acked"
        elif case.expect == RETRIED or lost_source:
            assert record["messageId"] in failed, f"{where} should come back (batchItemFailures)"
        else:
            assert record["messageId"] not in failed, f"{where} should be dead-lettered and acknowledged"
    assert sum(ran.values()) == sum(c.runs for c in cases), "a job ran that should not have"
    stats["examples"] += 1
    for case, lost_source in zip(cases, unknown_source, strict=True):
        stats["records"] += 1
        outcome = RETRIED if lost_source and case.expect != HEALTHY else case.expect
        stats[f"{case.kind} -> {outcome}"] += 1
    for body, reasons in loose:
        match = next(((b, r) for (b, r) in dead if b == body and r in reasons and dead[(b, r)]), None)
        assert match is not None, (
            f"no dead letter with a reason in {set(reasons)} for a {len(body)}-char body"
        )
        dead[match] -= 1
    dead = +dead
    assert dead == expected_dead, _diff(dead, expected_dead)


def _attempt(record: dict[str, Any]) -> int:
    """The attempt number the consumer reads from a (possibly garbled) record."""
    attributes = record.get("attributes")
    count = attributes.get("ApproximateReceiveCount", "1") if isinstance(attributes, dict) else "1"
    try:
        return max(1, int(count))
    except (TypeError, ValueError):
        return 1


def _diff(got: Counter[tuple[str, str]], want: Counter[tuple[str, str]]) -> str:
    def short(c: Counter[tuple[str, str]]) -> list[tuple[str, str, int]]:
        return sorted((b[:80], r, n) for (b, r), n in c.items())

    return f"dead letters differ:\n extra {short(got - want)}\n missing {short(want - got)}"


def plain_events(world: World) -> st.SearchStrategy[list[Case]]:
    bad = malformed_cases() | rejected_cases() | st.builds(_offloaded)
    return st.lists(healthy_cases() | bad, min_size=1, max_size=8)


def signed_events(world: World) -> st.SearchStrategy[list[Case]]:
    bad = malformed_cases() | rejected_cases() | signature_cases(world.ring)
    return st.lists(healthy_cases() | bad, min_size=1, max_size=8)


def fuzz(world: World, examples: int, *, signed: bool, derandomize: bool) -> None:
    handler = world.signed if signed else world.plain
    events = signed_events(world) if signed else plain_events(world)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=derandomize,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(cases=events, data=st.data())
    def run(cases: list[Case], data: st.DataObject) -> None:
        check_event(world, handler, cases, data.draw, signed)

    stats.clear()
    run()
    print(f"\nfuzz ({'signing' if signed else 'plain'} consumer):", dict(sorted(stats.items())))


def test_fuzz_the_consumer_with_bad_records_among_healthy_ones(world):
    fuzz(world, 100, signed=False, derandomize=True)


def test_fuzz_the_signing_consumer_with_bad_signatures_among_signed_records(world):
    fuzz(world, 50, signed=True, derandomize=True)


@pytest.mark.slow
def test_fuzz_soak(world):
    fuzz(world, SOAK_EXAMPLES * 2 // 3, signed=False, derandomize=False)
    fuzz(world, SOAK_EXAMPLES - SOAK_EXAMPLES * 2 // 3, signed=True, derandomize=False)


def test_an_unreadable_offloaded_payload_is_dead_lettered_on_its_last_attempt(world):
    case = _offloaded()
    record = sqs_record(case.body, queue_arn=world.arns["default"], receive_count=MAX_ATTEMPTS + 5)
    response = world.plain({"Records": [record]}, FakeLambdaContext(30))
    dead = _dead_letters(world, 1)
    assert response == {"batchItemFailures": []}
    assert dead == [(case.body, "exhausted")]


# -- whole odd events --------------------------------------------------------------------------------------


@st.composite
def odd_records(draw: st.DrawFn, arn: str) -> Any:
    """An entry of ``Records`` that is not a well-formed SQS record: any JSON value, or a record with
    fields missing, of the wrong type, or a body that is not text."""
    base = sqs_record(_envelope("fuzz.echo", {"token": _token()}).to_body(), queue_arn=arn)
    kind = draw(st.sampled_from(["value", "drop", "retype", "body"]))
    if kind == "value":
        return draw(json_values)
    record = dict(base)
    if kind == "drop":
        for name in draw(st.lists(st.sampled_from(sorted(base)), min_size=1, max_size=4, unique=True)):
            record.pop(name, None)
    elif kind == "retype":
        name = draw(st.sampled_from(["attributes", "messageAttributes", "receiptHandle", "eventSourceARN"]))
        record[name] = draw(json_values)
    else:
        record["body"] = draw(json_values.filter(lambda v: not isinstance(v, str)))
    return record


def test_fuzz_whole_odd_events_never_fail_their_healthy_records(world):
    arn = world.arns["high"]

    @settings(max_examples=40, deadline=None, database=None, derandomize=True)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        event_kind = data.draw(st.sampled_from(["records", "records", "not-a-list", "no-records", "value"]))
        token = _token()
        healthy = sqs_record(_envelope("fuzz.echo", {"token": token, "count": 1}).to_body(), queue_arn=arn)
        odd = data.draw(st.lists(odd_records(arn), max_size=5))
        if event_kind != "records":
            event: Any = (
                {"Records": data.draw(json_values.filter(lambda v: not isinstance(v, list)))}
                if event_kind == "not-a-list"
                else {"other": data.draw(json_values)}
                if event_kind == "no-records"
                else data.draw(json_values.filter(lambda v: not isinstance(v, dict)))
            )
            with pytest.raises(ValueError, match="not an SQS event"):
                world.plain(event, FakeLambdaContext(30))
            return
        records = [*odd[: len(odd) // 2], healthy, *odd[len(odd) // 2 :]]
        response = world.plain({"Records": records}, FakeLambdaContext(30))
        ids = {r["messageId"] for r in records if isinstance(r, dict) and isinstance(r.get("messageId"), str)}
        failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
        assert set(failed) <= ids and healthy["messageId"] not in failed
        for queue in world.dlqs.values():  # keep the DLQs shallow
            got = world.sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
            if got:
                entries = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(got)]
                world.sqs.delete_message_batch(QueueUrl=queue, Entries=entries)

    run()
