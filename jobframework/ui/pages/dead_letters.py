"""Dead letters: each DLQ grouped by reason and job type, search, one letter in full, export.

The letters shown are read with :meth:`jobframework.dlq.DeadLetters.peek` (held invisible while
being read, visible again at once); at most :data:`READ_LIMIT` a page, and the page says so when
the DLQ holds more. The actions (redrive, purge) are in :mod:`jobframework.ui.pages.dlq_actions`.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobframework.dlq import DeadLetter
from jobframework.ui.console import Console
from jobframework.ui.templating import render

READ_LIMIT = 500


@dataclass
class Group:
    reason: str
    job_type: str
    count: int
    oldest_seconds: float | None


def groups(letters: Iterable[DeadLetter]) -> list[Group]:
    """Count and oldest age by (reason, job type), largest first."""
    now = datetime.now(UTC)
    found: dict[tuple[str, str], Group] = {}
    for letter in letters:
        key = (letter.reason or "-", letter.job_type or "?")
        group = found.setdefault(key, Group(key[0], key[1], 0, None))
        group.count += 1
        age = letter.age(now)
        if age is not None and (group.oldest_seconds is None or age > group.oldest_seconds):
            group.oldest_seconds = age
    return sorted(found.values(), key=lambda g: (-g.count, g.reason, g.job_type))


def matches(letter: DeadLetter, *, q: str, job_type: str, reason: str) -> bool:
    """Whether a letter passes the page's filters (``q``: text in its id, key, type, reason, error, body)."""
    if job_type and (letter.job_type or "?") != job_type:
        return False
    if reason and (letter.reason or "-") != reason:
        return False
    if q:
        needle = q.lower()
        fields = (letter.job_id, letter.key, letter.job_type, letter.reason, letter.error, letter.body)
        return any(needle in (f or "").lower() for f in fields)
    return True


def dlq_index(request: Request) -> Response:
    """Each DLQ's depth, in flight, oldest letter (among the first :data:`DLQ_SAMPLE` read) and
    whether its source queue is paused: ``jf dlq ls``'s columns."""
    from jobframework.flow.pause import paused
    from jobframework.ui.pages.overview import DLQ_SAMPLE

    console: Console = request.app.state.console
    store = console.store
    return render(
        request,
        "dlq_index.html",
        page="dlq",
        depths=console.letters.depths(sample=DLQ_SAMPLE),
        paused=paused(store) if store is not None else None,
    )


def dlq_lane(request: Request) -> Response:
    console: Console = request.app.state.console
    lane = console.lane(request.path_params["lane"])
    letters = console.letters
    depth = next(d for d in letters.depths(sample=0) if d.priority == lane)
    read = letters.peek(lane, limit=READ_LIMIT)
    q = request.query_params.get("q", "").strip()
    job_type = request.query_params.get("type", "").strip()
    reason = request.query_params.get("reason", "").strip()
    shown = [d for d in read if matches(d, q=q, job_type=job_type, reason=reason)]
    return render(
        request,
        "dlq_lane.html",
        page="dlq",
        lane=lane,
        depth=depth,
        read=read,
        read_limit=READ_LIMIT,
        groups=groups(read),
        letters=shown,
        keyed=any(d.own_key for d in shown),
        tenants=any(d.tenant for d in shown),
        types=sorted({d.job_type or "?" for d in read}),
        reasons=sorted({d.reason for d in read if d.reason}),
        q=q,
        job_type=job_type,
        reason=reason,
        now=datetime.now(UTC),
    )


def dlq_letter(request: Request) -> Response:
    console: Console = request.app.state.console
    lane = console.lane(request.path_params["lane"])
    wanted = request.path_params["message_id"].strip()  # the letter's message id, or (as --id) its job's
    letter = next(
        (
            d
            for d in console.letters.peek(lane, limit=READ_LIMIT)
            if wanted in (d.message_id, d.dead_message_id, d.job_id)
        ),
        None,
    )
    if letter is None:
        raise LookupError(
            f"no dead letter {wanted} (a job id or a message id) among the first {READ_LIMIT} of the "
            f"{lane} DLQ: redriven or purged meanwhile, or in another lane's DLQ (a dead job's page "
            "links its letter)"
        )
    return render(request, "dlq_letter.html", page="dlq", lane=lane, letter=letter)


async def dlq_export(request: Request) -> Response:
    console: Console = request.app.state.console
    lane = console.lane(request.path_params["lane"])
    out = io.StringIO()
    await run_in_threadpool(console.letters.export, lane, out)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Response(
        out.getvalue(),
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="{lane}-dlq-{stamp}.jsonl"'},
    )


routes = [
    Route("/dlq", dlq_index, name="dlq_index"),
    Route("/dlq/{lane}", dlq_lane, name="dlq_lane"),
    Route("/dlq/{lane}/letters/{message_id}", dlq_letter, name="dlq_letter"),
    Route("/dlq/{lane}/export", dlq_export, name="dlq_export"),
]
