"""The job catalog: enqueue a job by name from a process that does not import its module.

The topology carries one :class:`~jobframework.config.JobRoute` per job (its lane, priority,
FIFO or not, payload version, dedup window, and its payload model's JSON Schema). The stack writes
the catalog into the topology parameter (``JF_TOPOLOGY_PARAMETER``), ``jf dev`` too. A
:class:`~jobframework.client.JobClient` that finds no job of a name in its registry looks it up
there, routes by it, and validates the payload against the schema with ``fastjsonschema`` (what
Powertools' validation utility uses) before anything is sent.

The schema check is what a producer can do without the model: types, required fields, bounds,
patterns, enums, formats. Validators written in Python (``@field_validator``) run only in the
consumer, which validates with the model; a payload that passes the schema but fails the model is
dead-lettered there with reason ``invalid-payload``. The schema is also stricter than pydantic's lax
mode in one way: ``"5"`` is not an integer. A URL type's schemes are checked (an ``HttpUrl`` field
refuses ``ftp://``): :mod:`jobframework.catalog_schema` makes the schemas.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING, Any

from jobframework.catalog_check import compile_schema, format_refusal
from jobframework.catalog_schema import URL_SCHEMES, decimal_refusal
from jobframework.config import ENV_TOPOLOGY_PARAMETER, NAMED_BY_APP, JobRoute, RuntimeConfig
from jobframework.errors import (
    ConfigurationError,
    EnqueueError,
    PayloadValidationError,
    TopologyParameterNotFound,
    UnknownJobError,
)
from jobframework.jobs import Priority, Profile, lane_name, lane_priority, lane_profile
from jobframework.validation import fields_text

if TYPE_CHECKING:
    from pydantic import BaseModel

log = logging.getLogger(__name__)


MAX_PROBLEM_DEPTH = 8
"""How deep into nested objects and lists a refused payload's problems are looked for."""


def _at(data: Any, path: list[str | int]) -> Any:
    for step in path:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return None
    return data


class RoutedJob:
    """A job known only from the catalog: enough to validate, route and send it.

    Args:
        name: the job's name.
        route: its catalog entry.
        source: where the entry came from, for messages (e.g. ``SSM parameter /jf/dev/topology``).
    """

    def __init__(self, name: str, route: JobRoute, source: str) -> None:
        self.name = name
        self.route = route
        self.source = source
        self._check: Callable[[Any], Any] | None = None
        self._field_checks: dict[str, Callable[[Any], Any]] = {}
        """One validator per top-level property, compiled when a payload fails (to name every bad field)."""
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<RoutedJob {self.name} lane={self.route.lane} from {self.source}>"

    @property
    def priority(self) -> Priority:
        return self.route.priority

    @property
    def profile(self) -> Profile | None:
        return lane_profile(self.route.lane)

    @property
    def version(self) -> int:
        return self.route.version

    @property
    def dedup_window(self) -> float | None:
        return self.route.dedup_window

    @property
    def track(self) -> bool:
        return self.route.track

    def lane_for(self, priority: Priority) -> str:
        """The lane of this job at ``priority`` (its own lane at its own priority)."""
        if priority is lane_priority(self.route.lane):
            return self.route.lane
        return lane_name(priority, self.profile, fifo=self.route.fifo)

    def _validator(self) -> Callable[[Any], Any]:
        with self._lock:
            if self._check is None:
                self._check = compile_schema(self.route.payload_schema)
            return self._check

    def _sub_validator(self, schema: dict[str, Any]) -> Callable[[Any], Any]:
        """The check of a part of the payload's schema alone (with the schema's ``$defs``), kept."""
        import json

        with self._lock:
            cache_key = json.dumps(schema, sort_keys=True, default=str)
            check = self._field_checks.get(cache_key)
            if check is None:
                defs = self.route.payload_schema.get("$defs")
                sub = {**schema, "$defs": defs} if defs and "$defs" not in schema else schema
                check = self._field_checks[cache_key] = compile_schema(sub)
            return check

    def validate(self, payload: BaseModel | dict[str, Any]) -> dict[str, Any]:
        """The payload as JSON data, with the schema's defaults filled in.

        Raises:
            PayloadValidationError: it does not match the schema; the message names the field.
        """
        from fastjsonschema import JsonSchemaValueException
        from pydantic import BaseModel
        from pydantic_core import to_jsonable_python

        data = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
        data = to_jsonable_python(data)
        try:
            checked = self._validator()(data)
        except JsonSchemaValueException as exc:
            problems = self._problems(exc, data)
            raise PayloadValidationError(
                f"payload for {self.name} does not match its schema ({self.source}): {fields_text(problems)}",
                problems,
            ) from None
        if not isinstance(checked, dict):
            raise PayloadValidationError(f"payload for {self.name} must be a JSON object, got {data!r}")
        return checked

    def _problems(self, first: Any, data: Any) -> list[tuple[str, str]]:
        """Every bad field of a payload the schema refused (``first``: the schema's first complaint).

        The compiled schema stops at its first complaint; each field of an object and each item of a
        list is then checked on its own, down through nested models, so that a caller sees all of
        them at once, as pydantic reports them (``lines.0.sku``, ``lines.1``).
        """
        return self._problems_in(self.route.payload_schema, data, [], first)

    def _problems_in(
        self, schema: Any, data: Any, prefix: list[str | int], first: Any, depth: int = 0
    ) -> list[tuple[str, str]]:
        """The problems of ``data`` (at ``prefix`` in the payload), which ``schema`` refused with
        ``first``: those of its parts, else ``first``'s own."""
        from fastjsonschema import JsonSchemaValueException

        schema = self._resolved(schema)
        branches = [b for b in schema.get("anyOf", ()) if self._resolved(b).get("type") != "null"]
        if data is not None and len(branches) == 1:  # an optional model (Line | None): the model's
            schema = self._resolved(branches[0])
        parts: list[tuple[str | int, Any, Any]] = []  # (where, value, its schema)
        problems: list[tuple[str, str]] = []
        at = ".".join(map(str, prefix))
        named = f"{at}." if at else ""
        properties = schema.get("properties")
        if depth < MAX_PROBLEM_DEPTH and isinstance(data, dict) and isinstance(properties, dict):
            required = schema.get("required")
            if isinstance(required, list):
                problems += [(f"{named}{f}", "Field required") for f in required if f not in data]
            if schema.get("additionalProperties") is False:
                problems += [
                    (f"{named}{f}", "Extra inputs are not permitted") for f in data if f not in properties
                ]
            parts = [(name, data[name], sub) for name, sub in properties.items() if name in data]
        elif (
            depth < MAX_PROBLEM_DEPTH
            and isinstance(data, dict)
            and isinstance(schema.get("additionalProperties"), dict)
        ):
            parts = [
                (name, value, schema["additionalProperties"]) for name, value in data.items()
            ]  # dict[str, M]
        elif depth < MAX_PROBLEM_DEPTH and isinstance(data, list) and isinstance(schema.get("items"), dict):
            parts = [(i, item, schema["items"]) for i, item in enumerate(data)]
        for where, value, sub in parts:
            try:
                self._sub_validator(sub)(value)
            except JsonSchemaValueException as exc:
                problems += self._problems_in(sub, value, [*prefix, where], exc, depth + 1)
        return problems or self._problem(first, data, prefix=prefix)

    def _resolved(self, schema: Any) -> dict[str, Any]:
        """``schema``, or the ``$defs`` entry its ``$ref`` names (a nested model's)."""
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            found = self.route.payload_schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
            return found if isinstance(found, dict) else schema
        return schema if isinstance(schema, dict) else {}

    def _problem(self, exc: Any, data: Any, prefix: list[str | int] | None = None) -> list[tuple[str, str]]:
        """What ``exc`` says of ``data``, as ``(path in the payload, message)`` (under ``prefix``)."""
        path = list(exc.path or [])[1:]
        where = ".".join(map(str, [*(prefix or []), *path]))
        if exc.rule == "required" and isinstance(exc.rule_definition, list):
            present = _at(data, path)
            missing = [f for f in exc.rule_definition if not isinstance(present, dict) or f not in present]
            return [(f"{where + '.' if where else ''}{f}", "Field required") for f in missing]
        message = str(exc.message).removeprefix(str(exc.name or "data")).strip()
        schemes = exc.definition.get(URL_SCHEMES) if isinstance(exc.definition, dict) else None
        if exc.rule == "pattern" and isinstance(schemes, list):
            message = f"must be a URL whose scheme is {' or '.join(map(str, schemes))}"
        elif exc.rule == "anyOf":
            message = decimal_refusal(exc.definition) or self._branches_refusal(exc) or message
        elif exc.rule == "oneOf":  # (a discriminated union)
            message = self._branches_refusal(exc) or message
        elif exc.rule in ("format", "type"):  # "must be date-time", "must be string": say what is meant
            message = format_refusal(exc.definition) or message
        return [(where, message)]

    def _branches_refusal(self, exc: Any) -> str | None:
        """What each type of a union (``HttpUrl | None``) says of the value, where the validator's own
        message ("cannot be validated by any definition") says nothing of what to send."""
        from fastjsonschema import JsonSchemaValueException

        branches = exc.rule_definition
        if not isinstance(branches, list):
            return None
        tag = exc.definition.get("discriminator") if isinstance(exc.definition, dict) else None
        if isinstance(tag, dict) and isinstance(tag.get("mapping"), dict) and isinstance(exc.value, dict):
            name, mapping = tag.get("propertyName"), tag["mapping"]
            given = exc.value.get(name)
            if not isinstance(given, str) or given not in mapping:  # a tagged union: the tag says which
                return f"{name}: must be one of {', '.join(map(repr, mapping))}"
            branches = [{"$ref": mapping[given]}]
        said: list[str] = []
        for branch in branches:
            if not isinstance(branch, dict):
                return None
            try:
                self._sub_validator(branch)(exc.value)
            except JsonSchemaValueException as refusal:
                text = "; ".join(
                    f"{where}: {message}" if where else message
                    for where, message in self._problem(refusal, exc.value)
                )
                if text not in said:
                    said.append(text)
            except Exception:  # (a branch that does not compile alone: the validator's message stands)
                return None
        if len(said) == 1:
            return said[0]
        if said and all(text.startswith("must be ") for text in said):  # "must be A, or null"
            return "must be " + ", or ".join(text.removeprefix("must be ") for text in said)
        return f"matches none of its types: {', or '.join(said)}" if said else None

    def key_for(self, payload: dict[str, Any]) -> str | None:
        """A catalog job has no key function here: the key is the caller's, else the job id."""
        return None


def _unreachable(exc: BaseException) -> bool:
    """``exc`` was caused by an endpoint that could not be reached (no connection, a timeout)."""
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import ReadTimeoutError

    return isinstance(exc.__cause__, BotoConnectionError | ReadTimeoutError)


CATALOG_REFRESH_SECONDS = 60.0
"""A name missing from the catalog re-reads the topology parameter at most this often (a new deploy)."""


class JobCatalog:
    """Finds jobs by name in the configuration's catalog, else in the topology parameter.

    Args:
        config: the runtime configuration (its ``jobs``, and ``topology_parameter`` to read more from).
        ssm: makes the SSM client, when the parameter has to be read.
    """

    def __init__(self, config: RuntimeConfig, ssm: Callable[[], Any]) -> None:
        self.config = config
        self._ssm = ssm
        self._routes: dict[str, JobRoute] = dict(config.jobs)
        self._source = "the runtime configuration"
        if config.jobs and config.topology_parameter:
            self._source = f"SSM parameter {config.topology_parameter}"
        self._jobs: dict[str, RoutedJob] = {}
        self._read_at: float | None = None
        self._read_error: ConfigurationError | None = None
        self._lock = threading.Lock()

    def get(self, name: str, *, known: list[str]) -> RoutedJob:
        """The catalog's job of ``name``.

        Raises:
            UnknownJobError: not in the registry (``known``), the configuration or the parameter;
                the message says where the client looked and what to set.
            EnqueueError: the parameter's endpoint cannot be reached (nothing says the job is unknown;
                try again; its cause is the connection error).
        """
        with self._lock:
            if name not in self._routes:
                self._refresh()
            route = self._routes.get(name)
            if route is None:
                raise UnknownJobError(self._unknown(name, known))
            routed = self._jobs.get(name)
            if routed is None or routed.route != route:
                routed = self._jobs[name] = RoutedJob(name, route, self._source)
            return routed

    def _refresh(self) -> None:
        parameter = self.config.topology_parameter
        now = monotonic()
        if parameter is None or (self._read_at is not None and now - self._read_at < CATALOG_REFRESH_SECONDS):
            return
        self._read_at = now
        try:
            read = RuntimeConfig.from_parameter(
                parameter,
                ssm_client=self._ssm(),
                endpoint_url=self.config.endpoint_url,
                region=self.config.region,
            )
        except ConfigurationError as exc:
            if _unreachable(exc):  # the endpoint is the problem, not the job's name: say that
                self._read_at = None
                raise EnqueueError(f"the job catalog could not be read: {exc}") from exc.__cause__
            self._read_error = exc
            log.warning("reading the job catalog failed: %s", str(exc).splitlines()[0])
            return
        self._read_error = None
        self._routes.update(read.jobs)
        self._source = f"SSM parameter {parameter}"

    def _unknown(self, name: str, known: list[str]) -> str:
        from jobframework.errortext import closest
        from jobframework.saga.definition import saga_named

        if saga_named(name) is not None:
            return (
                f"{name!r} is a saga, not a job: start it with the start(payload, client=...) of the saga "
                "that saga() returned, which enqueues its first step"
            )
        close = closest(name, [*known, *self._routes], cutoff=0.8)
        asked = f"{name!r} (did you mean {close!r}?)" if close else repr(name)
        registered = ", ".join(known) or "none"
        listed = ", ".join(sorted(self._routes)) or "none"
        parameter = self.config.topology_parameter
        if parameter is None:
            looked = (
                f"and no topology parameter to look in ({ENV_TOPOLOGY_PARAMETER} is not set; the catalog "
                f"in the configuration lists: {listed})"
            )
            todo = (
                f"set {ENV_TOPOLOGY_PARAMETER} to the SSM parameter the stack wrote (its TopologyParameter "
                "output, e.g. /jf/prod/topology) or export what `jf dev` prints"
            )
        elif isinstance(self._read_error, TopologyParameterNotFound):
            looked = f"and there is no SSM parameter {parameter} to look in"
            todo = f"{NAMED_BY_APP}: set {ENV_TOPOLOGY_PARAMETER} to it"
        elif self._read_error is not None:
            looked = (
                f"and SSM parameter {parameter} could not be read ({str(self._read_error).splitlines()[0]})"
            )
            todo = "let this process read it (stack.grant_enqueue(role)), or check the endpoint and region"
        else:
            looked = f"nor in the job catalog of SSM parameter {parameter} (it lists: {listed})"
            todo = (
                f"deploy (or `jf dev`) the job module that defines {name!r}, point {ENV_TOPOLOGY_PARAMETER} "
                "at the topology that runs it, or import the module here"
            )
        return f"no job named {asked} is registered in this process (known: {registered}) {looked}; {todo}"


__all__ = ["JobCatalog", "RoutedJob"]
