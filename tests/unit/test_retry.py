"""Backoff, retry policies and failure classification: pure logic."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from pydantic import BaseModel, ValidationError

from jobframework.classification import Action, Reason, classify, is_transient
from jobframework.errors import ConfigurationError, PermanentError, RetryableError
from jobframework.jobs import JobRegistry, Priority, job
from jobframework.retry import (
    MAX_VISIBILITY_SECONDS,
    Jitter,
    RetryPolicy,
    compute_backoff,
    default_policy,
)


def test_backoff_doubles_from_the_base_and_stops_at_the_cap():
    delays = [compute_backoff(n, base_delay=1, max_delay=10, jitter=Jitter.NONE) for n in range(1, 7)]
    assert delays == [1, 2, 4, 8, 10, 10]


def test_proportional_jitter_stays_within_thirty_percent():
    rng = random.Random(1)
    for attempt in range(1, 8):
        exact = min(300, 2 ** (attempt - 1))
        for _ in range(200):
            d = compute_backoff(attempt, base_delay=1, max_delay=300, rand=rng.random)
            assert exact * 0.7 - 1e-9 <= d <= min(300, exact * 1.3) + 1e-9


def test_full_jitter_spreads_between_zero_and_the_exponential_value():
    rng = random.Random(2)
    values = [
        compute_backoff(5, base_delay=1, max_delay=300, jitter=Jitter.FULL, rand=rng.random)
        for _ in range(500)
    ]
    assert min(values) >= 0 and max(values) <= 16
    assert min(values) < 2 and max(values) > 14  # really spread, not clustered


def test_backoff_is_reproducible_with_an_injected_random_source():
    a = RetryPolicy(random=random.Random(42).random)
    b = RetryPolicy(random=random.Random(42).random)
    assert [a.delay(n) for n in range(1, 6)] == [b.delay(n) for n in range(1, 6)]


def test_huge_attempt_numbers_never_overflow_or_pass_the_visibility_limit():
    assert (
        compute_backoff(10_000, base_delay=5, max_delay=MAX_VISIBILITY_SECONDS, jitter=Jitter.NONE) == 43_200
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_attempts": 0}, "between 1 and 1000"),
        ({"max_delay": 50_000}, "12 hours"),
        ({"base_delay": 10, "max_delay": 5}, "above max_delay"),
        ({"jitter": "wild"}, "proportional, full, none"),
        ({"base_delay": -1}, ">= 0"),
        ({"jitter_ratio": 2}, "0..1"),
    ],
)
def test_bad_policies_are_refused_with_what_to_change(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        RetryPolicy(**kwargs)


def test_policy_is_frozen():
    policy = RetryPolicy()
    with pytest.raises(AttributeError):
        policy.max_attempts = 9  # type: ignore[misc]


def test_spanning_rides_out_the_window_even_with_the_shortest_jitter():
    policy = RetryPolicy.spanning(minutes=15)
    shortest_total = sum(policy.delay_range(n)[0] for n in range(1, policy.max_attempts))
    assert shortest_total >= 15 * 60
    one_less = sum(policy.delay_range(n)[0] for n in range(1, policy.max_attempts - 1))
    assert one_less < 15 * 60  # and no more attempts than needed
    assert RetryPolicy.spanning(timedelta(minutes=15)) == policy


def test_schedule_lists_each_retry_with_its_range():
    plan = RetryPolicy(max_attempts=3, base_delay=2, jitter="none").schedule()
    assert plan == [(1, 2.0, 2.0), (2, 4.0, 4.0)]


def test_priority_defaults_follow_the_design_table():
    assert default_policy(Priority.CRITICAL).max_attempts == 5
    assert default_policy(Priority.CRITICAL).max_delay <= 30
    assert default_policy(Priority.HIGH).max_attempts == 5
    assert default_policy(Priority.DEFAULT).max_attempts == 3
    assert default_policy(Priority.LOW).max_attempts == 3
    assert default_policy(Priority.LOW).base_delay == 1 and default_policy(Priority.LOW).max_delay == 300


class _M(BaseModel):
    n: int


def _validation_error() -> ValidationError:
    try:
        _M.model_validate({"n": "x"})
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


POLICY = RetryPolicy(max_attempts=3, jitter="none")


def test_permanent_failures_dead_letter_on_the_first_attempt():
    decision = classify(PermanentError("no"), attempt=1, policy=POLICY)
    assert decision.action is Action.DEAD_LETTER and decision.reason is Reason.PERMANENT


def test_a_validation_error_of_the_jobs_own_is_retried_as_any_failure():
    """Raised by the job's code (a downstream's reply it parsed): the job ran, so not invalid-payload,
    which says a payload never reached its job; the job's permanent= makes it one at once."""
    assert classify(_validation_error(), attempt=1, policy=POLICY).action is Action.RETRY
    final = classify(_validation_error(), attempt=3, policy=POLICY)
    assert final.action is Action.DEAD_LETTER and final.reason is Reason.EXHAUSTED
    declared = classify(_validation_error(), attempt=1, policy=POLICY, permanent=(ValidationError,))
    assert declared.action is Action.DEAD_LETTER and declared.reason is Reason.PERMANENT


def test_other_failures_retry_then_exhaust():
    assert classify(ValueError("x"), attempt=1, policy=POLICY).action is Action.RETRY
    assert classify(ValueError("x"), attempt=2, policy=POLICY).delay == 2
    final = classify(ValueError("x"), attempt=3, policy=POLICY)
    assert final.action is Action.DEAD_LETTER and final.reason is Reason.EXHAUSTED


def test_an_explicit_retry_delay_wins_over_the_policy_and_is_capped():
    assert classify(RetryableError("slow down", delay=42), attempt=1, policy=POLICY).delay == 42
    assert (
        classify(RetryableError("later", delay=10**6), attempt=1, policy=POLICY).delay
        == MAX_VISIBILITY_SECONDS
    )


@pytest.mark.parametrize(
    "exc",
    [
        TimeoutError(),
        ConnectionResetError(),
        EndpointConnectionError(endpoint_url="http://x"),
        ClientError({"Error": {"Code": "ThrottlingException"}}, "PutItem"),
        ClientError({"Error": {"Code": "X"}, "ResponseMetadata": {"HTTPStatusCode": 503}}, "PutItem"),  # type: ignore[typeddict-item]
    ],
)
def test_timeouts_connections_and_throttling_are_transient(exc):
    assert classify(exc, attempt=1, policy=POLICY).transient


def test_a_client_error_that_is_not_throttling_is_not_transient():
    exc = ClientError(
        {"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "GetItem"
    )
    assert not classify(exc, attempt=1, policy=POLICY).transient


def test_job_declared_types_override_the_defaults():
    class Declined(PermanentError):
        pass

    class Flaky(Exception):
        pass

    retried = classify(Declined(), attempt=1, policy=POLICY, transient=(Declined,))
    assert retried.action is Action.RETRY and retried.transient
    dead = classify(KeyError("k"), attempt=1, policy=POLICY, permanent=(KeyError,))
    assert dead.reason is Reason.PERMANENT
    assert classify(Flaky(), attempt=1, policy=POLICY, transient=(Flaky,)).transient


def test_retryable_error_refuses_a_negative_delay():
    with pytest.raises(ValueError, match=">= 0"):
        RetryableError("x", delay=-1)
    assert RetryableError("x", delay=timedelta(minutes=1)).delay == 60


def test_spanning_with_full_jitter_counts_the_expected_delay():
    policy = RetryPolicy.spanning(minutes=10, jitter="full")
    expected_total = sum(policy.delay_range(n)[1] / 2 for n in range(1, policy.max_attempts))
    assert expected_total >= 600
    assert policy.max_attempts > RetryPolicy.spanning(minutes=10).max_attempts  # more tries: shorter waits


def test_retryable_error_refuses_a_delay_that_is_not_a_finite_number():
    with pytest.raises(ValueError, match="finite"):
        RetryableError("x", delay=float("nan"))
    with pytest.raises(ValueError, match="finite"):
        RetryableError("x", delay=float("inf"))
    # A string (from a config file, a header) is refused saying so, with the job's own message: raised
    # in a job, this error is what its status and log show (a trial's said "'<=' not supported").
    with pytest.raises(TypeError, match=r"RetryableError\('busy'\) delay must be .* got '30'"):
        RetryableError("busy", delay="30")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got True"):
        RetryableError("busy", delay=True)


def test_a_forged_non_ascii_signature_is_rejected_not_a_crash():
    from jobframework.envelope import Envelope
    from jobframework.errors import SignatureError
    from jobframework.signing import KeyRing

    ring = KeyRing.from_json('{"current": "k1", "keys": {"k1": "0123456789abcdef0123"}}')
    env = Envelope.new("a.b", {"x": 1})
    kid, mac = ring.sign(env)
    ring.verify(env, kid, mac)
    with pytest.raises(SignatureError, match="does not match"):
        ring.verify(env, kid, "é" * 64)


@pytest.mark.parametrize(
    "change",
    [
        {"track": True},
        {"deadline": "2030-01-01T00:00:00Z"},
        {"debounce": {"key": "k", "window": "w1"}},
    ],
)
def test_the_signature_covers_the_flow_fields_when_present(change):
    """Adding a flow field to a signed message, or removing or changing one, breaks its MAC; a message
    that carries none verifies as it did before these fields were covered."""
    import json

    from jobframework.envelope import Envelope, parse_body
    from jobframework.errors import SignatureError
    from jobframework.signing import KeyRing

    ring = KeyRing.from_json('{"current": "k1", "keys": {"k1": "0123456789abcdef0123"}}')
    plain = Envelope.new("a.b", {"x": 1})
    kid, mac = ring.sign(plain)
    body = json.loads(plain.to_body())
    with pytest.raises(SignatureError, match="does not match"):
        ring.verify(parse_body(json.dumps({**body, **change})), kid, mac)  # added
    flowing = parse_body(json.dumps({**body, **change}))
    kid, mac = ring.sign(flowing)
    ring.verify(parse_body(flowing.to_body()), kid, mac)  # through the wire and back
    with pytest.raises(SignatureError, match="does not match"):
        ring.verify(parse_body(json.dumps(body)), kid, mac)  # removed


def test_spanning_a_window_too_long_for_its_max_delay_suggests_one_that_spans_it():
    with pytest.raises(ConfigurationError, match=r"raise max_delay \(max_delay=600 spans it\)"):
        RetryPolicy.spanning(timedelta(days=3))
    assert RetryPolicy.spanning(timedelta(days=3), max_delay=600).max_attempts <= 1000  # as it said
    with pytest.raises(ConfigurationError, match=r"up to SQS's 43,200 s does: shorten the window"):
        RetryPolicy.spanning(timedelta(days=400))


@pytest.mark.parametrize("window", [{"minutes": 0}, {"window": timedelta(0)}, {"window": 0}])
def test_spanning_no_window_is_refused_saying_how_to_retry_not_at_all(window):
    with pytest.raises(
        ConfigurationError, match=r"needs a window longer than 0 .*RetryPolicy\(max_attempts=1\)"
    ):
        RetryPolicy.spanning(**window)  # (it gave max_attempts=1 without a word)


def test_the_nearer_of_permanent_and_transient_decides_an_error_of_both():
    """Celery's autoretry_for as a trial wrote it: permanent=(Exception,), transient=(ConnectionError,)
    dead-lettered the first ConnectionError `permanent`."""
    only_connections = {"permanent": (Exception,), "transient": (ConnectionError,)}
    retried = classify(ConnectionResetError("reset"), attempt=1, policy=POLICY, **only_connections)
    assert retried.action is Action.RETRY and retried.transient
    assert (
        classify(ValueError("bad"), attempt=1, policy=POLICY, **only_connections).reason is Reason.PERMANENT
    )
    # The other way round: a narrower permanent type inside a broad transient one is still permanent.
    narrow = classify(KeyError("k"), attempt=1, policy=POLICY, permanent=(KeyError,), transient=(Exception,))
    assert narrow.reason is Reason.PERMANENT


def test_a_delay_to_a_time_in_a_zone_counts_real_seconds_across_a_daylight_saving_change():
    """The review's case: America/New_York 01:00 to 12:00 on a spring-forward day is 10 hours, not 11."""
    from zoneinfo import ZoneInfo

    from jobframework.outgoing import delay_seconds

    zone = ZoneInfo("America/New_York")
    now = datetime.now(zone)
    days = next(d for d in range(100, 300) if (now + timedelta(days=d)).utcoffset() != now.utcoffset())
    at = (datetime.now(UTC) + timedelta(days=days)).astimezone(zone)  # an instant whose offset differs
    assert abs(delay_seconds(at) - days * 86_400) <= 2


def test_the_classification_names_stay_importable_from_retry_where_they_were():
    """Teams' listeners imported Reason from jobframework.retry before classification had its module."""
    from jobframework import classification, retry

    for name in ("Action", "Decision", "Reason", "classify", "is_transient"):
        assert getattr(retry, name) is getattr(classification, name)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"max_retries": 3},
            r"^RetryPolicy takes no option max_retries=: write max_attempts=4 \(attempts: the first",
        ),
        ({"max_attempt": 3}, r"^RetryPolicy takes no option max_attempt=: did you mean max_attempts=\?$"),
        ({"colour": 1}, r"colour=: it takes max_attempts=, base_delay=, .*, random=$"),
    ],
)
def test_an_option_retry_policy_does_not_take_says_what_to_write(options, said):
    """A trial's RetryPolicy(max_attempt=3) was a bare TypeError, where @job's options all say what to
    write; it is a TypeError still."""
    with pytest.raises(TypeError, match=said):
        RetryPolicy(**options)
    assert RetryPolicy(max_attempts=4, base_delay=2, jitter="none").delay(2) == 4.0  # (the rest as before)


class _Payload(BaseModel):
    n: int = 0


class _Status(Exception):
    """An HTTP client's one error type for every status (httpx's HTTPStatusError, requests' HTTPError)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def test_a_permanent_function_dead_letters_the_errors_it_answers_true_for():
    """An API-sync trial's client raised one error type for a 400 and a 503: permanent= took types only,
    so the 400s were retried five times. A function of the error decides, and wins over transient=."""

    def client_error(e: BaseException) -> bool:
        return isinstance(e, _Status) and 400 <= e.status < 500 and e.status != 429

    rules = {"permanent": (client_error,), "transient": (_Status,)}
    assert classify(_Status(404), attempt=1, policy=POLICY, **rules).reason is Reason.PERMANENT
    for retried in (_Status(503), _Status(429), ConnectionError("reset")):
        assert classify(retried, attempt=1, policy=POLICY, **rules).action is Action.RETRY
    mixed = (KeyError, client_error)  # types and functions together
    assert classify(KeyError("k"), attempt=1, policy=POLICY, permanent=mixed).reason is Reason.PERMANENT
    assert classify(_Status(400), attempt=1, policy=POLICY, permanent=mixed).reason is Reason.PERMANENT


def test_a_permanent_function_that_raises_is_logged_and_the_failure_retried(caplog):
    def broken(e: BaseException) -> bool:
        return bool(e.status == 400)  # type: ignore[attr-defined]  # (not every error has one)

    with caplog.at_level(logging.ERROR, logger="jobframework"):
        decision = classify(ConnectionError("reset"), attempt=1, policy=POLICY, permanent=(broken,))
    assert decision.action is Action.RETRY
    [line] = caplog.records
    assert "permanent= function" in line.getMessage() and "broken" in line.getMessage()
    assert "ConnectionError" in line.getMessage() and line.exc_info is not None


@pytest.mark.parametrize(
    ("permanent", "said"),
    [
        ("400", r"permanent= takes exception classes or functions of the exception \(e\.g\. lambda e: "),
        (int, r"permanent= takes exception classes or functions of the exception, got the class int"),
        (RetryableError, r"permanent= lists RetryableError, a RetryableError, which is always retried: "),
    ],
)
def test_a_permanent_that_is_neither_an_exception_type_nor_a_function_says_what_it_takes(permanent, said):
    with pytest.raises(ConfigurationError, match=said):

        @job("t.bad-permanent", registry=JobRegistry(), permanent=permanent)
        def bad(_: _Payload) -> None: ...


def test_a_retryable_error_is_retried_whatever_permanent_takes():
    """A Celery port wrote autoretry_for as the guide says (permanent=(Exception,), transient=(...)) and
    self.retry(countdown=30) as RetryableError(delay=30): the RetryableError was dead-lettered
    `permanent`, being an Exception."""
    rules = {"permanent": (Exception, lambda e: True), "transient": (ConnectionError,)}
    decision = classify(RetryableError("pdf not rendered yet", delay=30), attempt=1, policy=POLICY, **rules)
    assert (decision.action, decision.delay, decision.transient) == (Action.RETRY, 30, True)
    last = classify(
        RetryableError("still not", delay=30), attempt=POLICY.max_attempts, policy=POLICY, **rules
    )
    assert last.reason is Reason.EXHAUSTED  # (within max_attempts, as any retry)
    assert classify(KeyError("k"), attempt=1, policy=POLICY, **rules).reason is Reason.PERMANENT


def _refused(call: Callable[[], object]) -> BaseException:
    """What ``call`` raises connecting to a closed local port (the discard port: nothing listens)."""
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("the connection was not refused")


def test_an_http_clients_refused_connection_is_transient_however_it_is_wrapped():
    """A webhook trial's refused connection through urllib (URLError, an OSError) was logged at ERROR
    with its traceback, where the README promised one WARNING line as for a dropped connection."""
    import urllib.error
    import urllib.request

    import requests

    by_urllib = _refused(lambda: urllib.request.urlopen("http://127.0.0.1:9/", timeout=2))
    by_requests = _refused(lambda: requests.get("http://127.0.0.1:9/", timeout=2))
    assert isinstance(by_urllib, urllib.error.URLError) and not isinstance(by_urllib, ConnectionError)
    assert not isinstance(by_requests, ConnectionError)  # (requests' own ConnectionError: an OSError)
    assert is_transient(by_urllib) and is_transient(by_requests)
    assert not is_transient(FileNotFoundError("no such file"))  # (an OSError, not a connection's)
    assert not is_transient(ValueError("bad"))
    wrapped = RuntimeError("the upload failed")
    wrapped.__cause__ = ConnectionResetError("reset by peer")
    assert is_transient(wrapped)  # (its cause is the connection's: raise ... from)
    fallback_bug = KeyError("x")  # raised while handling one, without `from`: a bug, not the network's
    fallback_bug.__context__ = ConnectionResetError("reset by peer")
    assert not is_transient(fallback_bug)
    assert not is_transient(requests.exceptions.SSLError("certificate verify failed"))  # (no wait mends)


def test_a_throttle_reads_retry_after_in_seconds_or_as_an_http_date():
    """A trial's README-copied `float(headers["Retry-After"])` failed on the date form, which retried
    as an attempt instead of a throttle."""
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    from jobframework.errors import Throttled

    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    assert 85 <= (Throttled.after(soon).delay or 0) <= 90
    assert Throttled.after(" 2.5 ").delay == 2.5
    assert Throttled.after("soon", default=4).delay == 4.0  # unreadable: the default
    assert Throttled.after("-3").delay == 1.0
    with pytest.raises(ValueError, match=r"^Throttled\('x'\) delay must be"):
        Throttled("x", delay=-5)
