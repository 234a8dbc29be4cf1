"""Large payloads: stored in S3 and sent as a pointer (claim check), kept as long as anything needs them.

Over a configurable threshold (below SQS's 1 MiB) the client writes the payload to
the payload bucket (encrypted, TLS only, expiring by lifecycle rule) and sends the
envelope with an empty ``payload`` and a ``payload_ref`` (bucket, key, size,
SHA-256). The consumer fetches it transparently and checks the digest; a dead
letter keeps the pointer, and ``jf dlq peek`` shows it.

How long an object is kept: everything that can still need it, from the upload on, is

    delay + retries + a stay in the DLQ + a redrive's retries

where *retries* is the job's retry horizon (:func:`retry_horizon`: every attempt may hold the message
for up to 12 hours, SQS's visibility limit, plus each backoff delay) and a DLQ stay is SQS's longest
retention (14 days), whatever the DLQ is set to. The object's key starts with its retention class,
``keep-<days>d/`` (the smallest of :data:`RETENTION_CLASSES_DAYS` that covers the sum), and the
bucket's lifecycle has one expiration rule per class (``jobframework.cdk.payloads``). ``jf dlq
redrive`` copies a letter's object onto itself before sending it back (:func:`refresh`), which restarts
its class: the redriven job, its retries, another DLQ stay and one more redrive are covered again. SQS's
own redrive (``--native``) cannot refresh, so it is covered once. When an object is gone all the same,
the consumer dead-letters the job with reason ``payload-missing``, never ``exhausted``.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import TYPE_CHECKING, Any

from jobframework.envelope import PayloadRef
from jobframework.errors import PayloadMissingError, PayloadStoreError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from jobframework.retry import RetryPolicy

DEFAULT_THRESHOLD = 256 * 1024
"""Payloads whose message would be larger than this go to S3 (bytes)."""
DAY_SECONDS = 86_400
ATTEMPT_HOLD_SECONDS = 43_200
"""The longest one attempt can keep a message out of sight (SQS's visibility limit, 12 hours)."""
DLQ_STAY_SECONDS = 14 * DAY_SECONDS
"""The longest a dead letter can wait in its DLQ (SQS's maximum retention)."""
MARGIN_SECONDS = DAY_SECONDS
"""Added to every horizon (lifecycle rules act on whole days, late rather than early)."""
RETENTION_CLASSES_DAYS: tuple[int, ...] = tuple(7 << n for n in range(10))
"""Days an offloaded payload can be kept: 7, 14, 28, ..., 3584 (covers a year's delay plus the longest
retry policy twice over). Each class is a key prefix with its own lifecycle rule."""
LEGACY_PREFIX = "payloads/"
"""Where objects went before retention classes (expired by the bucket's base expiry)."""
_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})


def payload_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def retry_horizon(policy: RetryPolicy) -> float:
    """Seconds a job can spend between its first receive and its dead letter: every attempt held up to
    12 hours, plus the longest backoff before each retry.

    Example:
        >>> from jobframework.retry import RetryPolicy
        >>> retry_horizon(RetryPolicy(max_attempts=3, base_delay=10, max_delay=60, jitter="none")) / 3600
        36.00833333333333
    """
    delays = sum(high for _, _, high in policy.schedule())
    return policy.max_attempts * ATTEMPT_HOLD_SECONDS + delays


def retention_days(delay: float, policy: RetryPolicy | float) -> int:
    """The retention class (days) of a payload uploaded now for a job sent after ``delay`` seconds.

    ``policy`` is the job's retry policy, or its :func:`retry_horizon` in seconds (a producer that
    knows the job only from the catalog has the horizon).

    Raises:
        PayloadStoreError: no class is long enough (a delay over a year, or a retry policy longer
            than about four years).

    Example:
        >>> from jobframework.retry import RetryPolicy
        >>> retention_days(0, RetryPolicy()), retention_days(365 * 86400, RetryPolicy())
        (28, 448)
    """
    horizon = policy if isinstance(policy, int | float) else retry_horizon(policy)
    seconds = delay + 2 * horizon + DLQ_STAY_SECONDS + MARGIN_SECONDS
    days = math.ceil(seconds / DAY_SECONDS)
    for keep in RETENTION_CLASSES_DAYS:
        if keep >= days:
            return keep
    raise PayloadStoreError(
        f"a payload would have to be kept {days} days (delay {delay:g}s and the job's retries), more than "
        f"the longest retention class ({RETENTION_CLASSES_DAYS[-1]} days); shorten the delay or the retries"
    )


def class_prefix(days: int) -> str:
    """The key prefix of a retention class: ``keep-28d/``."""
    return f"keep-{days}d/"


class PayloadStore:
    """Puts offloaded payloads.

    Args:
        bucket: the payload bucket.
        client: a boto3 S3 client.
        prefix: key prefix of the objects, after the retention class.
    """

    def __init__(self, bucket: str, client: S3Client, prefix: str = "payloads/") -> None:
        self.bucket = bucket
        self.client = client
        self.prefix = prefix

    def put(
        self,
        job_type: str,
        job_id: str,
        payload: dict[str, Any],
        *,
        keep_days: int = RETENTION_CLASSES_DAYS[2],
    ) -> PayloadRef:
        """Store ``payload`` under ``keep-<keep_days>d/<prefix><type>/<id>.json`` (see
        :func:`retention_days`).

        Raises:
            PayloadStoreError: S3 refused it, or ``keep_days`` is not a retention class.
        """
        if keep_days not in RETENTION_CLASSES_DAYS:
            raise PayloadStoreError(f"keep_days must be one of {RETENTION_CLASSES_DAYS}, got {keep_days}")
        data = payload_bytes(payload)
        key = f"{class_prefix(keep_days)}{self.prefix}{job_type}/{job_id}.json"
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType="application/json")
        except Exception as exc:
            raise PayloadStoreError(
                f"storing the payload of job {job_id} in s3://{self.bucket}/{key} failed"
            ) from exc
        return PayloadRef(
            bucket=self.bucket, key=key, size=len(data), sha256=hashlib.sha256(data).hexdigest()
        )


def _missing(exc: Exception) -> bool:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    code = str(response.get("Error", {}).get("Code", ""))
    return code in _MISSING_CODES


def fetch(ref: PayloadRef, client: S3Client) -> dict[str, Any]:
    """The payload a pointer names, checked against its digest.

    Raises:
        PayloadMissingError: the object is gone (expired or deleted): the job cannot run.
        PayloadStoreError: it cannot be read now (retried: S3 may be briefly unavailable).
        ValueError: it is not the payload that was sent (digest mismatch, not a JSON object).
    """
    try:
        data = client.get_object(Bucket=ref.bucket, Key=ref.key)["Body"].read()
    except Exception as exc:
        if _missing(exc):
            raise PayloadMissingError(
                f"the payload s3://{ref.bucket}/{ref.key} is gone (expired or deleted)"
            ) from exc
        raise PayloadStoreError(f"fetching the payload s3://{ref.bucket}/{ref.key} failed: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ValueError(f"the payload at s3://{ref.bucket}/{ref.key} does not match its SHA-256")
    payload = json.loads(data)
    if not isinstance(payload, dict):
        raise ValueError(f"the payload at s3://{ref.bucket}/{ref.key} is not a JSON object")
    return payload


def refresh(ref: PayloadRef, client: S3Client) -> None:
    """Restart the object's retention: copy it onto itself (same key, body and content type; S3 dates
    the copy now, and lifecycle rules count from that date). Needs s3:GetObject and s3:PutObject.

    Raises:
        PayloadMissingError: the object is gone.
        PayloadStoreError: S3 refused the copy.
    """
    try:
        client.copy_object(
            Bucket=ref.bucket,
            Key=ref.key,
            CopySource={"Bucket": ref.bucket, "Key": ref.key},
            MetadataDirective="REPLACE",
            ContentType="application/json",
        )
    except Exception as exc:
        if _missing(exc):
            raise PayloadMissingError(
                f"the payload s3://{ref.bucket}/{ref.key} is gone (expired or deleted)"
            ) from exc
        raise PayloadStoreError(f"refreshing the payload s3://{ref.bucket}/{ref.key} failed: {exc}") from exc
