"""A job catalog as a file: what ``jf catalog`` writes of a service's jobs, and what another
service's tests check their by-name enqueues against (``EnqueueRecorder(catalog=...)``), as Pact's
contracts are checked, without importing the other team's code.

The file is the JSON object the stack writes into the topology parameter's ``jobs``, uncompressed:
each job's name, its route and its payload's JSON Schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from jobframework.config import JobRoute
from jobframework.core import ConfigurationError

CatalogSource = str | Path | Mapping[str, JobRoute]
"""A catalog file's path, or routes by job name."""


def catalog_json(routes: Mapping[str, JobRoute]) -> str:
    """The catalog as indented JSON, by job name (the defaults left out, as the parameter's)."""
    data = {name: routes[name].model_dump(mode="json", exclude_defaults=True) for name in sorted(routes)}
    return json.dumps(data, indent=2, sort_keys=True)


def load_catalog(source: CatalogSource) -> dict[str, JobRoute]:
    """Routes by job name from a catalog file (``jf catalog -o FILE``) or a mapping.

    Raises:
        ConfigurationError: the file cannot be read or is not a catalog (says which job is wrong).
    """
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"cannot read the job catalog {path}: {exc} (write one with `jf catalog -o`)"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"{path} is not a job catalog: a JSON object by job name, as `jf catalog` writes"
        )
    routes: dict[str, JobRoute] = {}
    for name, route in data.items():
        try:
            routes[name] = JobRoute.model_validate(route)
        except ValidationError as exc:
            raise ConfigurationError(f"{path}: job {name!r} is not a catalog entry: {exc}") from None
    return routes
