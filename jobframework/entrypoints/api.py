"""The HTTP API of the 202 pattern: ``jobframework.entrypoints.api.lambda_handler`` behind an API
Gateway HTTP API.

Routes (payload format 2.0):

``POST /jobs/{type}``
    The body is the job's payload as a JSON object. Optional query parameters, kept apart from the
    payload: ``key`` (the dedup/idempotency key) and ``delay`` (seconds before the job runs; over 900
    it becomes a one-time schedule). Answers ``202 Accepted`` with ``Location: /jobs/{id}`` and
    ``{"id", "key", "type", "status", "duplicate"}`` (``status`` is ``queued``, or ``scheduled`` for a
    delay over 15 minutes; a duplicate key answers the first job's id with ``duplicate: true``).
    An unknown type, a body that is not a JSON object, or a payload that does not validate answers
    ``400`` with ``{"message", "errors": [{"loc": [...], "msg": "..."}]}``; a payload over the size limit
    ``413``; a queue that refuses the message ``503``.

``GET /jobs/{id}``
    ``200`` with the job's status (:class:`jobframework.state.JobStatus` as JSON), ``404`` for an id the
    state table does not know.

Configuration comes from the ``JF_*`` variables (:meth:`RuntimeConfig.from_env`) on the first request;
the job modules from ``JF_JOBS`` (comma-separated; required).
``tests/functional/test_api.py`` calls :func:`lambda_handler` with HTTP API events as examples.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobframework.client import MAX_DELAY_SECONDS, JobClient
from jobframework.config import RuntimeConfig
from jobframework.errors import (
    ConfigurationError,
    EnqueueError,
    PayloadTooLargeError,
    PayloadValidationError,
    StatusUnavailableError,
    UnknownJobError,
)
from jobframework.modules import configured_job_modules, import_job_modules
from jobframework.validation import fields_text

log = logging.getLogger(__name__)

MAX_ERRORS = 20
"""At most this many validation errors are returned in a 400."""
MAX_JOB_ID = 128

app = APIGatewayHttpResolver()
_client: JobClient | None = None


def job_client() -> JobClient:
    """The client of this process, made on first use from ``JF_*`` after importing the ``JF_JOBS`` modules.

    Raises:
        ConfigurationError: the ``JF_*`` variables are missing or wrong.
    """
    global _client
    if _client is None:
        import_job_modules(configured_job_modules())
        _client = JobClient(RuntimeConfig.from_env())
    return _client


def reset() -> None:
    """Forget the client (tests that change the ``JF_*`` variables call this)."""
    global _client
    _client = None


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, separators=(",", ":"), default=str),
        headers=headers,
    )


def _bad_request(message: str, errors: list[dict[str, Any]]) -> Response[str]:
    return _json(400, {"message": message, "errors": errors[:MAX_ERRORS]})


def _payload() -> dict[str, Any] | Response[str]:
    body = app.current_event.decoded_body
    if not body:
        return {}
    try:
        payload = json.loads(body)
    except ValueError as exc:
        return _bad_request("the body is not valid JSON", [{"loc": ["body"], "msg": str(exc)}])
    if not isinstance(payload, dict):
        return _bad_request(
            "the body must be a JSON object (the job's payload)",
            [{"loc": ["body"], "msg": f"expected an object, got {type(payload).__name__}"}],
        )
    return payload


def _delay() -> float | Response[str] | None:
    raw = app.current_event.get_query_string_value("delay")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        return _bad_request("bad delay", [{"loc": ["query", "delay"], "msg": "seconds, a number"}])


def _path(field: str) -> list[str | int]:
    """A field's dotted path as pydantic's ``loc`` (``lines.0.sku`` -> ``["lines", 0, "sku"]``)."""
    return [int(part) if part.isdigit() else part for part in field.split(".")] if field else []


@app.post("/jobs/<job_type>")
def enqueue(job_type: str) -> Response[str]:
    """Validate and enqueue; 202 with the job's id and where to ask for its status."""
    payload = _payload()
    if isinstance(payload, Response):
        return payload
    delay = _delay()
    if isinstance(delay, Response):
        return delay
    key = app.current_event.get_query_string_value("key")
    client = job_client()
    try:
        # The 202 answer points at GET /jobs/{id}: the job keeps a status record.
        result = client.enqueue(job_type, payload, key=key, delay=delay, track=True)
    except UnknownJobError as exc:
        # The caller learns the name is unknown; which jobs exist (and where the service looked) is
        # for the service's operators: logged, never answered.
        log.warning("enqueue of an unknown job type: %s", exc)
        message = f"no job named {job_type!r}"
        return _bad_request(message, [{"loc": ["path", "type"], "msg": message}])
    except PayloadValidationError as exc:
        # Field by field, by the job's model or the catalog's schema alike; str(exc) is for the
        # service's logs (it names the model, the SSM parameter, how to send an older version).
        errors = [{"loc": ["body", *_path(f["field"])], "msg": f["message"]} for f in exc.fields]
        said = fields_text((f["field"], f["message"]) for f in exc.fields)
        return _bad_request(f"the payload does not validate: {said}", errors)
    except PayloadTooLargeError as exc:
        return _json(413, {"message": str(exc)})
    except ConfigurationError as exc:  # a bad key or delay
        return _bad_request(str(exc), [{"loc": ["query"], "msg": str(exc)}])
    except EnqueueError as exc:
        log.warning("enqueue of %s failed: %s", job_type, exc)
        return _json(503, {"message": "the job could not be queued; try again"})
    if not result.ok:
        log.warning("enqueue of %s job %s failed: %s", job_type, result.id, result.error)
        return _json(503, {"message": "the job could not be queued; try again"})
    status = "scheduled" if delay is not None and delay > MAX_DELAY_SECONDS else "queued"
    return _json(
        202,
        {
            "id": result.id,
            "key": result.key,
            "type": result.job_type,
            "status": status,
            "duplicate": result.duplicate,
        },
        headers={"Location": f"/jobs/{result.id}"},
    )


@app.get("/jobs/<job_id>")
def status(job_id: str) -> Response[str]:
    """200 with the job's status, 404 when the id is unknown (or its record expired), 503 when the
    state table cannot be read now."""
    try:
        found = job_client().status(job_id) if 0 < len(job_id) <= MAX_JOB_ID else None
    except StatusUnavailableError as exc:
        log.warning("status of job %s unavailable: %s", job_id, exc)
        return _json(503, {"message": "the job's status could not be read; try again"})
    if found is None:
        return _json(404, {"message": f"no job {job_id}"})
    return _json(200, found.model_dump(mode="json"))


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point (API Gateway HTTP API, payload format 2.0)."""
    return app.resolve(event, context)
