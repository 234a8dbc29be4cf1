"""The payload an enqueue sends: validated against the job's model (or its catalog schema), upgraded
from an older payload version, as JSON data that SQS can carry, with the key the job's ``key=``
function gives. :mod:`jobframework.preparing` builds the message around it."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from jobframework.errors import EnqueueOptionError, PayloadValidationError, PayloadVersionError
from jobframework.errortext import shown
from jobframework.flow.options import check_limit_keys
from jobframework.jobs import UPGRADE_FIX_SENT, Job
from jobframework.validation import validate_data, validation_fields, validation_problems

if TYPE_CHECKING:
    from jobframework.catalog import RoutedJob
    from jobframework.outgoing import EnqueueRequest


def payload_data(
    job: Job[Any] | RoutedJob, payload: BaseModel | dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """The payload as JSON data and the key the job's ``key=`` function gives (validated first).

    Raises:
        PayloadValidationError: it does not match the job's model (or its catalog schema).
    """
    if not isinstance(job, Job):
        return _sendable(job.name, lambda: job.validate(payload)), None
    try:
        model = job.validate(payload)
    except ValidationError as exc:
        wanted, problems, fields = (
            job.payload_model.__name__,
            validation_problems(exc),
            validation_fields(exc),
        )
        if isinstance(payload, BaseModel):  # another model (another job's, most likely): say so first
            message = f"payload for {job.name} is a {type(payload).__name__}; it takes {wanted}: {problems}"
        elif job.batch is not None and isinstance(cast(object, payload), list | tuple):  # (a list's items)
            message = (
                f"{job.name} is a batched job: enqueue one {wanted} at a time (enqueue_many for several); "
                "the consumer gathers them into the list its function takes"
            )
        else:
            message = f"payload for {job.name} does not match {wanted}: {problems}"
        raise PayloadValidationError(message, fields) from exc
    try:
        check_limit_keys(job, model)  # (a consumer would dead-letter it: no limit could hold it)
    except ValueError as exc:
        raise PayloadValidationError(f"payload for {job.name} fits no limit: {exc}") from exc
    data = _sendable(job.name, lambda: model.model_dump(mode="json", warnings=False))
    if model is payload:  # an instance is taken as made: one made unvalidated is read as the consumer will
        try:
            validate_data(job.payload_model, data)
        except ValidationError as exc:
            raise PayloadValidationError(
                f"payload for {job.name} is a {job.payload_model.__name__} whose values do not validate "
                f"(made with model_construct, or changed after it was made?): {validation_problems(exc)}",
                validation_fields(exc),
            ) from exc
    return data, job.key_for(model)


def checked_payload(
    job: Job[Any] | RoutedJob, request: EnqueueRequest
) -> tuple[int, dict[str, Any], dict[str, Any], str | None]:
    """What an enqueue sends of its payload, checked: its version, its JSON data, the data at the job's
    version (what the consumer validates, and the job's tenant or group function reads), and the key
    the job's ``key=`` function gives.

    Raises:
        EnqueueOptionError: a bad ``payload_version``.
        PayloadValidationError: the payload does not match (an older one: once upgraded).
    """
    version = _payload_version(job, request.payload_version)
    if version == job.version:
        data, key = _current_payload_data(job, request.payload)
        return version, data, data, key
    data, current, key = _older_payload_data(job, request.payload, version)  # sent as it is
    return version, data, current, key


def _current_payload_data(
    job: Job[Any] | RoutedJob, payload: BaseModel | dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """:func:`payload_data` at the job's version; a refusal of a job past version 1 says how a producer
    still sending an older version's shape says so."""
    try:
        return payload_data(job, payload)
    except PayloadValidationError as exc:
        if job.version == 1 or isinstance(payload, BaseModel) or not _shape_changed(exc):
            raise
        raise PayloadValidationError(
            f"{exc} ({job.name} takes payload version {job.version}: a payload of an older version is "
            "sent with payload_version=N, jf enqueue --payload-version N)",
            [(f["field"], f["message"]) for f in exc.fields],
        ) from exc


def _shape_changed(exc: PayloadValidationError) -> bool:
    """Whether a refusal is one an older version's shape makes: a field missing or one not taken (a
    wrong type is the value's fault, not the version's)."""
    return any(
        f["message"].startswith(("Field required", "Extra inputs are not permitted")) for f in exc.fields
    )


def _payload_version(job: Job[Any] | RoutedJob, version: object) -> int:
    """The payload version an enqueue sends: ``version``, else the job's.

    Raises:
        EnqueueOptionError: not a whole number from 1 to the job's version.
    """
    if version is None:
        return job.version
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= job.version:
        raise EnqueueOptionError(
            f"payload_version must be a whole number from 1 to {job.name}'s version {job.version} (the "
            f"version of the payload you send, when older), got {shown(version)}"
        )
    return version


def _older_payload_data(
    job: Job[Any] | RoutedJob, payload: BaseModel | dict[str, Any], version: int
) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """A payload of an older ``version``: its JSON data as sent, the data it upgrades to (what the
    consumer validates, and what the job's tenant or group function reads), and its ``key=``.

    Raises:
        PayloadValidationError: it is no JSON object, or does not upgrade to a payload the job takes.
    """
    if isinstance(payload, BaseModel) or not isinstance(cast(object, payload), dict):
        raise PayloadValidationError(
            f"payload for {job.name} at payload_version={version} must be a dict of that version's "
            f"fields, got {type(payload).__name__}"
        )
    data = _sendable(job.name, lambda: to_jsonable_python(payload))
    if not isinstance(job, Job):  # by name: the catalog has the current schema only; the consumer checks
        return data, data, None
    try:
        # (a copy: a step may change nested objects of the data sent)
        upgraded = job.upgrade(copy.deepcopy(data), version, fix=UPGRADE_FIX_SENT)
    except PayloadVersionError as exc:
        raise PayloadValidationError(f"payload for {job.name}: {exc}") from exc
    current, key = payload_data(job, upgraded)
    return data, current, key


def _sendable(name: str, dump: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The payload as JSON data, or a :class:`PayloadValidationError` saying why it cannot be sent."""
    try:
        data = dump()
    except UnicodeDecodeError as exc:
        raise PayloadValidationError(
            f"payload for {name} has bytes that are not UTF-8 text ({exc.reason}): JSON carries text; "
            "send binary data as base64 in a str field, or store it (S3) and send its key"
        ) from exc
    except PydanticSerializationError as exc:
        raise PayloadValidationError(f"payload for {name} cannot be sent as JSON: {exc}") from exc
    where = _non_finite(data)
    if where is not None:
        raise PayloadValidationError(
            f"payload for {name}: {where[0]} is {where[1]}, which JSON cannot carry (it would arrive as "
            "null); send null or a number",
            [(_dotted(where[0]), f"{where[1]} cannot be sent as JSON; send null or a number")],
        )
    return data


def _dotted(path: str) -> str:
    """A path as :func:`_non_finite` writes it (``items[2].price``) as a field's (``items.2.price``)."""
    return "" if path == "the payload" else path.replace("[", ".").replace("]", "").lstrip(".")


def _non_finite(data: Any, path: str = "") -> tuple[str, float] | None:
    """The first NaN or infinite float in JSON data, with its path (``items[2].price``)."""
    if isinstance(data, float):
        return None if math.isfinite(data) else (path or "the payload", data)
    if isinstance(data, dict):
        items: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in data.items())
    elif isinstance(data, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(data))
    else:
        return None
    for where, value in items:
        found = _non_finite(value, where)
        if found is not None:
            return found
    return None
