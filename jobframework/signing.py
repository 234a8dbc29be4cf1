"""Message signing: HMAC-SHA256 over a job's content, under a key id, with rotation.

The producer signs; the consumer rejects an unsigned message, a tampered one, or
one signed under a key id it does not hold, to the DLQ with reason ``signature``,
before anything runs. The MAC covers what runs and what decides whether it runs —
``id``, ``key``, ``type``, ``payload`` (or the offloaded payload's pointer and
checksum), ``payload_version`` and ``saga`` (a captured message replayed under a fresh
key would otherwise escape idempotency), and the flow fields when present: ``deadline``
(expiry), ``debounce`` (which enqueue of a key wins) and ``track`` (whether a status is
kept, and so whether a cancel can stop it) — not per-delivery attributes. A flow field is
covered only when the message carries it, so a message signed before these fields were
covered verifies as before, and adding or removing one breaks the MAC. It travels
in the ``jf-sig`` and ``jf-kid`` attributes, or, for messages that EventBridge
Scheduler sends (which cannot carry attributes), in the envelope's ``sig`` field as
``<kid>:<mac>``.

Keys are a JSON document ``{"current": "k2", "keys": {"k1": "<secret>", "k2": "<secret>"}}``
kept in an SSM SecureString (``ssm:/jf/prod/signing-keys``) or a Secrets Manager
secret (``secretsmanager:jf/prod/signing-keys``), read once and cached for five
minutes. Rotation: add the new key, make it ``current``, and drop the old one once
no message signed under it can still be in flight (the DLQ retention).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobframework.aws_clients import AwsClients
from jobframework.errors import ConfigurationError, SignatureError

if TYPE_CHECKING:
    import boto3

    from jobframework.envelope import Envelope

ATTR_SIG = "jf-sig"
ATTR_KID = "jf-kid"
CACHE_SECONDS = 300.0
RECHECK_SECONDS = 10.0
"""An unknown key id reads the keys again, at most this often (a forger's ids cost a read each 10 s)."""


def canonical(envelope: Envelope) -> bytes:
    """The bytes the MAC covers: the job's content, canonical JSON."""
    content: dict[str, Any] = {
        "id": envelope.id,
        "key": envelope.key,
        "type": envelope.type,
        "payload": envelope.payload,
        "payload_version": envelope.payload_version,
        "saga": envelope.saga.model_dump() if envelope.saga else None,
        "payload_ref": envelope.payload_ref.model_dump() if envelope.payload_ref else None,
    }
    flow = envelope.model_dump(mode="json", include={"deadline", "debounce", "track"}, exclude_none=True)
    content.update(flow)  # only the flow fields present: see the module's docstring
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class KeyRing:
    """The signing keys: ``current`` signs, every key in ``keys`` verifies."""

    current: str
    keys: dict[str, bytes]

    @classmethod
    def from_json(cls, text: str) -> KeyRing:
        try:
            doc = json.loads(text)
            keys = {str(k): str(v).encode() for k, v in doc["keys"].items()}
            current = str(doc["current"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigurationError(
                'signing keys must be JSON {"current": "<kid>", "keys": {"<kid>": "<secret>", ...}}'
            ) from exc
        if current not in keys:
            raise ConfigurationError(f"signing key id {current!r} is current but not among the keys")
        if any(len(v) < 16 for v in keys.values()):
            raise ConfigurationError("every signing key must be at least 16 characters long")
        return cls(current, keys)

    def sign(self, envelope: Envelope) -> tuple[str, str]:
        """``(kid, hex MAC)`` under the current key."""
        return self.current, hmac.new(
            self.keys[self.current], canonical(envelope), hashlib.sha256
        ).hexdigest()

    def verify(self, envelope: Envelope, kid: str | None, mac: str | None) -> None:
        """Raises :class:`SignatureError` unless ``mac`` is the MAC of ``envelope`` under ``kid``."""
        if not kid or not mac:
            raise SignatureError(
                "the message is not signed: its producer has no signing keys; give it the "
                "consumer's (JF_SIGNING_KEYS, or JF_TOPOLOGY_PARAMETER alone, whose parameter "
                "names them) and enqueue the job again"
            )
        key = self.keys.get(kid)
        if key is None:
            raise SignatureError(f"unknown signing key id {kid[:64]!r}")
        expected = hmac.new(key, canonical(envelope), hashlib.sha256).hexdigest()
        # Bytes, not str: compare_digest refuses non-ASCII str, and a forged MAC may be anything.
        if not hmac.compare_digest(expected.encode(), mac.encode("utf-8", "replace")):
            raise SignatureError("the signature does not match the message (tampered or wrong key)")


class KeySource:
    """Reads the key ring from SSM or Secrets Manager and caches it for ``ttl`` seconds.

    Args:
        source: ``ssm:<parameter name>`` or ``secretsmanager:<secret id>``.
        session: the boto3 session to read with.
        endpoint_url: an endpoint to use instead of AWS's (the embedded AWS).
    """

    def __init__(
        self,
        source: str,
        session: boto3.Session | None = None,
        endpoint_url: str | None = None,
        ttl: float = CACHE_SECONDS,
    ) -> None:
        kind, _, name = source.partition(":")
        if kind not in ("ssm", "secretsmanager") or not name:
            raise ConfigurationError(
                f"signing keys source {source!r} must be 'ssm:<parameter>' or 'secretsmanager:<secret id>'"
            )
        self.kind, self.name = kind, name
        self._aws = AwsClients(session=session, endpoint_url=endpoint_url)
        self.ttl = ttl
        self._ring: KeyRing | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    def ring(self, *, older_than: float | None = None) -> KeyRing:
        """The cached ring, read again once ``ttl`` passed, or, given ``older_than``, once it is that
        many seconds old (a key id the ring does not know may have been added since: a rotation made
        in one step)."""
        with self._lock:
            age = time.monotonic() - self._read_at
            if self._ring is None or age > self.ttl or (older_than is not None and age > older_than):
                self._ring = KeyRing.from_json(self._read())
                self._read_at = time.monotonic()
            return self._ring

    def _read(self) -> str:
        if self.kind == "ssm":
            ssm = self._aws.client("ssm")
            return str(ssm.get_parameter(Name=self.name, WithDecryption=True)["Parameter"]["Value"])
        secrets = self._aws.client("secretsmanager")
        return str(secrets.get_secret_value(SecretId=self.name)["SecretString"])
