"""One maker of boto3 clients: lazy, thread-safe, one client per service.

Powertools' utilities take a boto3 client, or a session and a botocore config to make one; so does
:class:`AwsClients`, and every part of jobframework that talks to AWS (the client, the consumer, the
signing key source, the DLQ tools) gets its clients from one. A client given for a service is used
as is (tests hand in clients with event hooks); the others are made on first use from the session
(boto3's default when none) with the endpoint and region in force then, under a lock, because
boto3's default session is not thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

Setting = str | None | Callable[[], str | None]
"""A value, or a function giving it when a client is made (the consumer learns its endpoint late)."""


class AwsClients:
    """boto3 clients by service name, made once each.

    Args:
        session: the boto3 session to make clients from (boto3's default session when ``None``, as
            ``boto3.client()`` would: ``boto3.setup_default_session(...)`` configures it).
        botocore_config: retries, timeouts and pool size for the clients it makes.
        endpoint_url: the endpoint (the embedded AWS locally; ``None`` on AWS), or a function of none.
        region: the region (the session's when ``None``), or a function of none.
        clients: clients to use as they are, by service name (``sqs``, ``dynamodb``, ...).

    Example:
        >>> fake = object()
        >>> AwsClients(clients={"sqs": fake}).client("sqs") is fake
        True
    """

    def __init__(
        self,
        *,
        session: boto3.Session | None = None,
        botocore_config: Config | None = None,
        endpoint_url: Setting = None,
        region: Setting = None,
        clients: Mapping[str, Any] | None = None,
    ) -> None:
        self.session = session
        self.botocore_config = botocore_config
        self._endpoint_url = endpoint_url
        self._region = region
        self._clients: dict[str, Any] = {k: v for k, v in (clients or {}).items() if v is not None}
        self._lock = threading.Lock()

    def client(self, service: str) -> Any:
        """The client of ``service`` (``"sqs"``, ``"dynamodb"``, ...), made on first use."""
        client = self._clients.get(service)
        if client is not None:
            return client
        with self._lock:
            client = self._clients.get(service)
            if client is None:
                client = self._make(service)
                self._clients[service] = client
        return client

    def lazy(self, service: str) -> Any:
        """A stand-in for the client of ``service`` that makes it on first use (a store built at the
        first invocation, but used only by some jobs, makes no client, and loads no boto3, for a batch
        that needs none).

        Example:
            >>> clients = AwsClients(clients={"dynamodb": {"made": True}})
            >>> clients.lazy("dynamodb").get("made")
            True
        """
        return LazyClient(self, service)

    def given(self, service: str) -> bool:
        """Whether a client of ``service`` exists already (given, or made)."""
        return service in self._clients

    def _make(self, service: str) -> Any:
        session = self.session
        if session is None:  # boto3's default session, as boto3.client() uses (jf dev sizes its pools)
            import boto3

            if boto3.DEFAULT_SESSION is None:
                boto3.setup_default_session()
            session = boto3.DEFAULT_SESSION
            assert session is not None
        options: dict[str, Any] = {
            "endpoint_url": _resolve(self._endpoint_url),
            "region_name": _resolve(self._region),
        }
        if self.botocore_config is not None:
            options["config"] = self.botocore_config
        return session.client(service, **options)  # type: ignore[call-overload]


def _resolve(setting: Setting) -> str | None:
    value = setting() if callable(setting) else setting
    return value or None


class LazyClient:
    """One service's client, made through its :class:`AwsClients` at the first attribute asked of it."""

    __slots__ = ("_clients", "_service")

    def __init__(self, clients: AwsClients, service: str) -> None:
        self._clients = clients
        self._service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(self._clients.client(self._service), name)

    def __repr__(self) -> str:
        return f"<LazyClient {self._service} made={self._clients.given(self._service)}>"
