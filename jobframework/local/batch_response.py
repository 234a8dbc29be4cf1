"""How Lambda reads a handler's partial batch response (``batchItemFailures``): the emulator's rule."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


def failed_ids(response: Any, ids: set[str]) -> set[str]:
    """The record ids a partial batch response reports as failed, as Lambda reads it.

    ``None`` or an empty list means all succeeded; a response naming an unknown or empty
    identifier, or of the wrong shape, fails the whole batch.

    Example:
        >>> sorted(failed_ids({"batchItemFailures": [{"itemIdentifier": "m-2"}]}, {"m-1", "m-2"}))
        ['m-2']
    """
    if response is None:
        return set()
    if not isinstance(response, Mapping):
        return set()
    failures = response.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        log.error("batchItemFailures is not a list: the whole batch failed")
        return set(ids)
    failed: set[str] = set()
    for item in failures:
        ident = item.get("itemIdentifier") if isinstance(item, Mapping) else None
        if not isinstance(ident, str) or ident not in ids:
            log.error("batchItemFailures names %r, not a record of the batch: the whole batch failed", ident)
            return set(ids)
        failed.add(ident)
    return failed
