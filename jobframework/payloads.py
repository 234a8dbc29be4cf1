"""Large payloads: stored in S3 and sent as a pointer (claim check).

Over a configurable threshold (below SQS's 1 MiB) the client writes the payload to
the payload bucket (encrypted, TLS only, expiring by lifecycle rule) and sends the
envelope with an empty ``payload`` and a ``payload_ref`` (bucket, key, size,
SHA-256). The consumer fetches it transparently and checks the digest; a dead
letter keeps the pointer, and ``jf dlq peek`` shows it.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from jobframework.envelope import PayloadRef
from jobframework.errors import PayloadStoreError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

DEFAULT_THRESHOLD = 256 * 1024
"""Payloads whose message would be larger than this go to S3 (bytes)."""


def payload_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


class PayloadStore:
    """Puts and gets offloaded payloads.

    Args:
        bucket: the payload bucket.
        client: a boto3 S3 client.
        prefix: key prefix of the objects.
    """

    def __init__(self, bucket: str, client: S3Client, prefix: str = "payloads/") -> None:
        self.bucket = bucket
        self.client = client
        self.prefix = prefix

    def put(self, job_type: str, job_id: str, payload: dict[str, Any]) -> PayloadRef:
        data = payload_bytes(payload)
        key = f"{self.prefix}{job_type}/{job_id}.json"
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType="application/json")
        except Exception as exc:
            raise PayloadStoreError(
                f"storing the payload of job {job_id} in s3://{self.bucket}/{key} failed"
            ) from exc
        return PayloadRef(
            bucket=self.bucket, key=key, size=len(data), sha256=hashlib.sha256(data).hexdigest()
        )


def fetch(ref: PayloadRef, client: S3Client) -> dict[str, Any]:
    """The payload a pointer names, checked against its digest.

    Raises:
        PayloadStoreError: it cannot be read (retried: S3 may be briefly unavailable).
        ValueError: it is not the payload that was sent (digest mismatch, not a JSON object).
    """
    try:
        data = client.get_object(Bucket=ref.bucket, Key=ref.key)["Body"].read()
    except Exception as exc:
        raise PayloadStoreError(f"fetching the payload s3://{ref.bucket}/{ref.key} failed: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ValueError(f"the payload at s3://{ref.bucket}/{ref.key} does not match its SHA-256")
    payload = json.loads(data)
    if not isinstance(payload, dict):
        raise ValueError(f"the payload at s3://{ref.bucket}/{ref.key} is not a JSON object")
    return payload
