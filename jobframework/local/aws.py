"""The embedded AWS: a moto server on 127.0.0.1, provisioned from the :class:`Topology`.

Everything is real HTTP with real boto3 clients; only the server is local. The
queues, DLQs, redrive policies and tables are made from the same topology that
the CDK stack deploys, so nothing about a queue is written twice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from jobframework.config import OPTIONAL_SETTINGS, bad_settings_message
from jobframework.errors import ConfigurationError, SettingError
from jobframework.local.long_poll import install as install_long_poll
from jobframework.local.receive_lock import install as install_receive_lock
from jobframework.scheduling import check_signed_schedules
from jobframework.topology import QueueEndpoints, RuntimeConfig, Topology

if TYPE_CHECKING:
    import boto3

log = logging.getLogger(__name__)

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
REGION = "us-east-1"
POOL_CONNECTIONS = 64
"""HTTP connections a client keeps to the embedded AWS (botocore's default of 10 is fewer than the
emulator's pollers, and every extra connection was dropped with a "Connection pool is full" warning)."""


def use_fake_credentials() -> None:
    """Point boto3 at fake credentials so nothing can reach a real AWS account."""
    for name, value in FAKE_CREDENTIALS.items():
        os.environ[name] = value


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _check_free(port: int) -> None:
    """Raise ``OSError`` saying so when ``port`` on 127.0.0.1 cannot be bound (another program has it)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does: TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            taken = OSError(f"port {port} on 127.0.0.1 is in use by another program")
            taken.errno = exc.errno  # EADDRINUSE: what jf dev tells apart
            raise taken from exc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedAWS:
    """A moto server on 127.0.0.1 over real HTTP.

    Example:
        >>> with EmbeddedAWS() as aws:                       # doctest: +SKIP
        ...     config = aws.provision(Topology.from_registry())
    """

    def __init__(self, port: int = 0, *, separate_process: bool = False) -> None:
        self.port = port or free_port()
        self.separate_process = separate_process
        """Run moto in its own process (benchmarks: it then shares no GIL with the workers)."""
        self._server: Any = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> EmbeddedAWS:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:
            raise ConfigurationError(
                "the embedded AWS needs moto: install jobframework with its local extra, e.g. "
                "pip install '/path/to/jobframework[local]' from a clone"
            ) from exc
        use_fake_credentials()
        _check_free(self.port)  # moto's server thread would wait forever for a port it cannot bind
        if self.separate_process:
            serve = (
                "from jobframework.local.receive_lock import install; install(); "
                "from jobframework.local.long_poll import install as wakes; wakes(); "
                f"from moto.server import main; main(['-H', '127.0.0.1', '-p', '{self.port}'])"
            )
            self._process = subprocess.Popen(
                [sys.executable, "-c", serve],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 30
            while not _listening(self.port):
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise ConfigurationError(f"the embedded AWS did not start on port {self.port}")
                time.sleep(0.05)
            return self
        server_log = logging.getLogger("werkzeug")
        server_log.setLevel(logging.ERROR)
        if not any(f is unimplemented_action for f in server_log.filters):
            server_log.addFilter(unimplemented_action)
        install_receive_lock()
        install_long_poll()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            # Its serve loop sees the shutdown at its next poll, up to half a second off: a connection
            # wakes it now (jf dev's Ctrl-C took 0.6 s where it takes 0.1).
            stopping = threading.Thread(target=self._server.stop, daemon=True)
            stopping.start()
            while stopping.is_alive():
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                stopping.join(0.05)
            self._server = None
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
            self._process = None

    def __enter__(self) -> EmbeddedAWS:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def session(self) -> boto3.Session:
        """A boto3 session whose clients keep :data:`POOL_CONNECTIONS` connections each."""
        import boto3

        return boto3.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name=REGION,
            botocore_session=pooled_botocore_session(),
        )

    def client(self, service: str) -> Any:
        return self.session().client(service, endpoint_url=self.endpoint_url)  # type: ignore[call-overload]

    def provision(self, topology: Topology) -> RuntimeConfig:
        """Create the topology's queues, DLQs and tables; write the SSM parameter; return the config."""
        return provision(topology, self.session(), self.endpoint_url)


def pooled_botocore_session(connections: int = POOL_CONNECTIONS) -> Any:
    """A botocore session whose clients keep up to ``connections`` HTTP connections.

    ``boto3.setup_default_session(botocore_session=pooled_botocore_session())`` sizes the pools of
    the clients that code makes with ``boto3.client(...)`` too (the consumer's DynamoDB and S3).
    """
    import botocore.config
    import botocore.session

    session = botocore.session.get_session()
    session.set_default_client_config(botocore.config.Config(max_pool_connections=connections))
    return session


def provision(topology: Topology, session: boto3.Session, endpoint_url: str | None) -> RuntimeConfig:
    """Create what the CDK stack would: queues with redrive policies, DLQs, tables, the payload bucket,
    the SSM parameter.

    Idempotent: existing queues and tables are reused.
    """
    sqs = session.client("sqs", endpoint_url=endpoint_url)
    queues = {}
    for spec in topology.queues:
        # An ordered lane's queue and DLQ are FIFO queues, deduplicated by the id each send carries.
        fifo: dict[Any, str] = (
            {"FifoQueue": "true", "ContentBasedDeduplication": "false"} if spec.fifo else {}
        )
        dlq_url = _queue(
            sqs,
            spec.dlq_name,
            {"MessageRetentionPeriod": str(spec.dlq_retention), "SqsManagedSseEnabled": "true", **fifo},
        )
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        url = _queue(
            sqs,
            spec.name,
            {
                "VisibilityTimeout": str(spec.visibility_timeout),
                "MessageRetentionPeriod": str(spec.retention),
                "SqsManagedSseEnabled": "true",
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": spec.max_receive_count}
                ),
                **fifo,
            },
        )
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sqs.set_queue_attributes(
            QueueUrl=dlq_url,
            Attributes={
                "RedriveAllowPolicy": json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": [arn]})
            },
        )
        queues[spec.lane] = QueueEndpoints(url=url, dlq_url=dlq_url)

    dynamodb = session.client("dynamodb", endpoint_url=endpoint_url)
    for name, keys, ttl in (
        (topology.state_table, (("pk", "HASH"), ("sk", "RANGE")), "expires_at"),
        (topology.idempotency_table, (("id", "HASH"),), "expiration"),
    ):
        try:
            dynamodb.create_table(
                TableName=name,
                KeySchema=[
                    {"AttributeName": k, "KeyType": "HASH" if t == "HASH" else "RANGE"} for k, t in keys
                ],
                AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k, _ in keys],
                BillingMode="PAY_PER_REQUEST",
            )
        except dynamodb.exceptions.ResourceInUseException:
            continue  # provisioned before: reuse it
        dynamodb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl}
        )

    bucket = f"{topology.app}-{topology.stage}-payloads"
    s3 = session.client("s3", endpoint_url=endpoint_url)
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
        s3.create_bucket(Bucket=bucket)
    behaviour = behaviour_from_env()
    if behaviour.get("signing_keys"):
        check_signed_schedules(topology.schedules)
    try:
        config = RuntimeConfig(
            queues=queues,
            state_table=topology.state_table,
            idempotency_table=topology.idempotency_table,
            endpoint_url=endpoint_url,
            region=session.region_name,
            payload_bucket=bucket,
            # The embedded Scheduler never assumes it; `jf dev` fires due delays itself.
            scheduler_role_arn=f"arn:aws:iam::123456789012:role/{topology.app}-{topology.stage}-scheduler",
            jobs=topology.catalog,
            topology_parameter=topology.topology_parameter,
            **behaviour,
        )
    except ValidationError as exc:
        raise SettingError(bad_settings_message(exc, behaviour)) from None
    ssm = session.client("ssm", endpoint_url=endpoint_url)
    ssm.put_parameter(
        Name=topology.topology_parameter,
        Value=config.model_dump_json(exclude={"endpoint_url"}),
        Type="String",
        Overwrite=True,
    )
    return config


def _queue(sqs: Any, name: str, attributes: dict[Any, str]) -> str:
    """The URL of the queue ``name``, made with ``attributes``, or given them when it was made with
    others before (``jf dev --reload`` after a job's ``timeout=`` changed: a deploy updates it too)."""
    try:
        url: str = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    except sqs.exceptions.QueueNameExists:
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        changeable = {
            k: v for k, v in attributes.items() if k not in ("FifoQueue", "ContentBasedDeduplication")
        }
        sqs.set_queue_attributes(QueueUrl=url, Attributes=changeable)
    return url


LOCAL_SETTINGS_FROM_ENV = ("retry_budget", "offload_threshold", "signing_keys")
"""The settings of the local topology taken from the environment as a deployed consumer's are
(``JF_RETRY_BUDGET=off``, ``JF_OFFLOAD_THRESHOLD``, ``JF_SIGNING_KEYS``: ``jf dev`` then verifies
signatures, and its topology parameter and exports carry the setting to producers); the resources'
names are the topology's own."""


def behaviour_from_env() -> dict[str, str]:
    """:data:`LOCAL_SETTINGS_FROM_ENV` that the environment sets, by field."""
    found = {field: os.environ.get(OPTIONAL_SETTINGS[field], "") for field in LOCAL_SETTINGS_FROM_ENV}
    return {field: value for field, value in found.items() if value}


def unimplemented_action(record: logging.LogRecord) -> bool:
    """A filter for the embedded AWS's server log: leaves out an action moto does not implement (its
    ``NotImplementedError``, some 45 lines of traceback); the caller already got the error and says it
    (``jf dlq redrive --native`` on ``jf dev``: StartMessageMoveTask)."""
    # werkzeug formats the traceback into the message ("Error on request:\n<traceback>").
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, NotImplementedError) and "\nNotImplementedError" not in record.getMessage()


def missing_keys_note(config: RuntimeConfig, session: boto3.Session) -> str | None:
    """What to do when ``jf dev`` verifies signatures (``JF_SIGNING_KEYS``) but the embedded AWS has no
    keys there yet (it starts empty): until they are put there, every signed job waits, retried."""
    if not config.signing_keys:
        return None
    from jobframework.signing import KeySource

    try:
        KeySource(config.signing_keys, session=session, endpoint_url=config.endpoint_url).ring()
    except Exception as exc:  # (not there yet, or not a key ring)
        kind, _, name = config.signing_keys.partition(":")
        where = (
            "aws ssm put-parameter --type SecureString"
            if kind == "ssm"
            else "aws secretsmanager create-secret"
        )
        return (
            f"jf dev: note: signatures are verified (JF_SIGNING_KEYS={config.signing_keys}), but the keys "
            f"cannot be read from the embedded AWS ({type(exc).__name__}): put the key ring at {name} "
            f'({where} --endpoint-url {config.endpoint_url} ..., value {{"current": "k1", "keys": '
            '{"k1": "<16+ characters>"}}) before enqueuing'
        )
    return None
