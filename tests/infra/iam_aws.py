"""An embedded AWS that enforces IAM, in a process of its own, and a recorder of the API calls made
through it.

moto's switch (``INITIAL_NO_AUTH_ACTION_COUNT``, ``/moto-api/reset-auth``) and its backends are
process-wide: a moto server thread in the test process would share them with the session's embedded
AWS. This server runs as a subprocess on a port of its own and is set to enforce after the set-up
(queues, tables, roles) is made with the fake credentials; from then on every request must be signed
by the credentials of an assumed role, and is authorized against that role's policies.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import boto3

from jobframework.local.aws import FAKE_CREDENTIALS, REGION, free_port

ADMIN_POLICY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


@dataclass(frozen=True)
class Call:
    """One API call made with a role's credentials, and the HTTP status moto answered."""

    principal: str
    service: str
    operation: str
    params: dict[str, Any]
    status: int


@dataclass
class Recorder:
    """Records every API call of the sessions it is attached to (botocore events, thread-safe)."""

    calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, session: boto3.Session, principal: str) -> None:
        def keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["iam_test_params"] = dict(params)

        def record(http_response: Any, model: Any, context: dict[str, Any], **_: Any) -> None:
            call = Call(
                principal=principal,
                service=model.service_model.service_name,
                operation=model.name,
                params=context.get("iam_test_params", {}),
                status=http_response.status_code,
            )
            with self._lock:
                self.calls.append(call)

        session.events.register("provide-client-params", keep_params)
        session.events.register("after-call", record)

    def denied(self) -> list[Call]:
        return [c for c in self.calls if c.status == 403]

    def operations(self, principal: str) -> set[str]:
        return {f"{c.service}:{c.operation}" for c in self.calls if c.principal == principal}


class IamEnforcingAWS:
    """A moto server in a subprocess on 127.0.0.1 that enforces IAM once :meth:`enforce` is called.

    Example::

        with IamEnforcingAWS() as aws:
            admin = aws.fake_session()                     # before enforce(): anything goes
            ...                                            # provision, aws.role(...)
            aws.enforce()
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self.enforcing = False

    def __enter__(self) -> IamEnforcingAWS:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint_url}/moto-api/data.json", timeout=1).close()
                return self
            except (urllib.error.URLError, ConnectionError):
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(f"moto did not start on port {self.port}") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def fake_session(self) -> boto3.Session:
        """The fake credentials: good for anything before :meth:`enforce`, for nothing after."""
        assert not self.enforcing, "the fake credentials are refused once IAM is enforced"
        return boto3.Session(
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=REGION,
        )

    def role(self, name: str, policy: dict[str, Any]) -> boto3.Session:
        """A role with ``policy`` inline, assumed now (call before :meth:`enforce`); a session of it."""
        session = self.fake_session()
        iam = session.client("iam", endpoint_url=self.endpoint_url)
        trust = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
        }
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        iam.put_role_policy(
            RoleName=name, PolicyName="policy", PolicyDocument=json.dumps(policy, separators=(",", ":"))
        )
        sts = session.client("sts", endpoint_url=self.endpoint_url)
        credentials = sts.assume_role(RoleArn=arn, RoleSessionName=name)["Credentials"]
        return boto3.Session(
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
            region_name=REGION,
        )

    def enforce(self) -> None:
        """From now on every request is authenticated and authorized (moto's ``reset-auth`` to 0)."""
        request = urllib.request.Request(
            f"{self.endpoint_url}/moto-api/reset-auth",
            data=b"0",
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        urllib.request.urlopen(request, timeout=5).close()
        self.enforcing = True
