"""Dead-letter actions: redrive (a filter or a selection; a dry-run count first, then progress) and purge.

Every action is two steps: a preview (``.../preview``) that changes nothing and says how many
letters would move or go, then the action itself, which the preview's confirm button posts with the
same fields. A filter redrive is :meth:`jobframework.dlq.DeadLetters.redrive`; a selection redrive is the same
call with the ticked ``message_ids``; purge is :meth:`~jobframework.dlq.DeadLetters.purge`
and needs the lane's name (``high``, ``low-cpu``) typed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import typer
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobframework.classification import Reason
from jobframework.dlq import RedriveResult
from jobframework.ui.console import Console
from jobframework.ui.tasks import Tasks
from jobframework.ui.templating import render

log = logging.getLogger(__name__)

MAX_SELECTION = 1000


@dataclass
class RedriveRequest:
    """What a redrive form asks for: a filter (type, age, count) or a selection of message ids."""

    lane: str
    mode: str
    job_type: str | None = None
    older_than: str | None = None
    limit: int | None = None
    ids: list[str] = field(default_factory=list)
    reason: str | None = None
    """Only letters of this dead-letter reason (``jf-reason``: ``budget``, ``exhausted``, ...)."""

    @classmethod
    def of(cls, lane: str, form: FormData) -> RedriveRequest:
        mode = str(form.get("mode", "filter"))
        if mode not in ("filter", "selection"):
            raise ValueError(f"unknown redrive mode {mode!r}: use filter or selection")
        ids = [str(v) for v in form.getlist("id") if str(v).strip()]
        if mode == "selection" and not ids:
            raise ValueError("no dead letters selected: tick some, or redrive by filter")
        if len(ids) > MAX_SELECTION:
            raise ValueError(f"at most {MAX_SELECTION} letters at a time; redrive by filter instead")
        limit_text = str(form.get("limit", "")).strip()
        if limit_text and (not limit_text.isdigit() or int(limit_text) < 1):
            raise ValueError(f"limit {limit_text!r} is not a positive whole number")
        older = str(form.get("older_than", "")).strip() or None
        if older is not None:
            seconds(older)  # a bad duration is refused before anything is read
        reason = str(form.get("reason", "")).strip() or None
        known = [r.value for r in Reason]
        if reason is not None and reason not in known:
            raise ValueError(f"{reason!r} is not a dead-letter reason; they are: {', '.join(known)}")
        return cls(
            lane=lane,
            mode=mode,
            job_type=str(form.get("type", "")).strip() or None,
            older_than=older,
            limit=int(limit_text) if limit_text else None,
            ids=ids,
            reason=reason,
        )

    def describe(self, count: int | None) -> str:
        """What a task redrives: ``redrive of 1 selected high dead letter``, ``redrive of 3 high dead
        letters of reason budget (the dry run count)``."""
        n = count if count is not None else "the"
        letters = "dead letter" if count == 1 else "dead letters"
        if self.mode == "selection":
            return f"redrive of {n} selected {self.lane} {letters}"
        chosen = [
            f"{what} {value}"
            for what, value in (
                ("of type", self.job_type),
                ("of reason", self.reason),
                ("older than", self.older_than),
                ("at most", self.limit),
            )
            if value
        ]
        which = f" {', '.join(chosen)}" if chosen else ""
        counted = " (the dry run count)" if count is not None else ""
        return f"redrive of {n} {self.lane} {letters}{which}{counted}"

    def run(
        self, console: Console, *, dry_run: bool, progress: Callable[[int], None] | None = None
    ) -> RedriveResult:
        if self.mode == "selection":
            return console.letters.redrive(
                self.lane, message_ids=self.ids, dry_run=dry_run, progress=progress
            )
        return console.letters.redrive(
            self.lane,
            job_type=self.job_type,
            reason=self.reason,
            older_than=seconds(self.older_than) if self.older_than else None,
            limit=self.limit,
            dry_run=dry_run,
            progress=progress,
        )


@dataclass
class RedriveOutcome:
    """A finished redrive and what it was meant to move, to say why fewer moved."""

    result: RedriveResult
    mode: str
    expected: int | None
    """The letters selected (a selection) or the dry run's count (a filter); ``None``: not known."""

    @property
    def gone(self) -> int:
        """Expected letters the redrive did not find: they left the DLQ since they were listed or counted."""
        return max(0, self.expected - self.result.matched) if self.expected is not None else 0

    @property
    def extra(self) -> int:
        """Letters that matched beyond the dry run's count (they arrived in the DLQ since)."""
        return max(0, self.result.matched - self.expected) if self.expected is not None else 0


def seconds(text: str) -> float:
    """A duration as ``jf dlq redrive --older-than`` reads it (``90s``, ``15m``, ``2h``, ``1d``)."""
    from jobframework.cli.base import parse_duration

    try:
        return parse_duration(text)
    except typer.BadParameter as exc:
        raise ValueError(str(exc.message)) from None


async def redrive_preview(request: Request) -> Response:
    console: Console = request.app.state.console
    lane = console.lane(request.path_params["lane"])
    asked = RedriveRequest.of(lane, await request.form())
    result = await run_in_threadpool(asked.run, console, dry_run=True)
    paused_since = await run_in_threadpool(_paused_since, console, lane)
    return render(
        request, "_redrive_preview.html", lane=lane, asked=asked, result=result, paused_since=paused_since
    )


def _paused_since(console: Console, lane: str) -> str | None:
    """Since when ``lane`` is paused (``None``: consuming, or no state table to say)."""
    store = console.store
    if store is None:
        return None
    from jobframework.flow.pause import paused

    try:
        return paused(store).get(lane)
    except Exception:  # (a note of the preview's: the dry run stands without it)
        log.warning("reading whether the %s queue is paused failed", lane, exc_info=True)
        return None


async def redrive(request: Request) -> Response:
    console: Console = request.app.state.console
    tasks: Tasks = request.app.state.tasks
    lane = console.lane(request.path_params["lane"])
    form = await request.form()
    asked = RedriveRequest.of(lane, form)
    counted = str(form.get("expected", ""))  # the dry run's count
    expected = int(counted) if counted.isdigit() else None
    if asked.mode == "selection":
        expected = len(set(asked.ids))
    to_read = await run_in_threadpool(console.letters.depth, lane)

    def work(progress: Callable[[int], None]) -> RedriveOutcome:
        result = asked.run(console, dry_run=False, progress=progress)
        return RedriveOutcome(result=result, mode=asked.mode, expected=expected)

    task = tasks.start(asked.describe(expected), work, expected=expected, to_read=to_read)
    return render(request, "_task.html", task=task)


def task_progress(request: Request) -> Response:
    tasks: Tasks = request.app.state.tasks
    task = tasks.get(request.path_params["task_id"])
    if task is None:
        raise LookupError("no such task (the console was restarted, or it is long finished)")
    return render(request, "_task.html", task=task)


@dataclass(frozen=True)
class PurgeRequest:
    """What a purge form asks for: the letters of a type and a reason (either, both or neither: all),
    or a selection of message ids (the ticked letters)."""

    job_type: str | None = None
    reason: str | None = None
    ids: tuple[str, ...] = ()

    @classmethod
    def of(cls, form: FormData) -> PurgeRequest:
        if str(form.get("mode", "")) == "selection" and not any(str(v).strip() for v in form.getlist("id")):
            raise ValueError("no dead letters selected: tick some, or purge by type and reason")
        asked = RedriveRequest.of("", form)  # (the same fields, checked the same way)
        if asked.mode == "selection":
            return cls(ids=tuple(dict.fromkeys(asked.ids)))
        return cls(job_type=asked.job_type, reason=asked.reason)

    def letters(self, count: int) -> str:
        """``dead letters of type shop.charge and reason budget``, ``selected dead letter`` (of ``count``)."""
        letters = "dead letter" if count == 1 else "dead letters"
        if self.ids:
            return f"selected {letters}"
        chosen = [
            f"{what} {value}" for what, value in (("type", self.job_type), ("reason", self.reason)) if value
        ]
        return letters + (f" of {' and '.join(chosen)}" if chosen else "")

    def count(self, console: Console, lane: str) -> int:
        return len(
            console.letters.peek(
                lane, limit=None, job_type=self.job_type, reason=self.reason, ids=self.ids or None
            )
        )

    def run(self, console: Console, lane: str) -> int:
        return console.letters.purge(
            lane, job_type=self.job_type, reason=self.reason, ids=self.ids or None
        ).deleted


async def purge_preview(request: Request) -> Response:
    console: Console = request.app.state.console
    lane = console.lane(request.path_params["lane"])
    asked = PurgeRequest.of(await request.form())
    count = await run_in_threadpool(asked.count, console, lane)
    return render(request, "_purge_preview.html", lane=lane, asked=asked, count=count)


async def purge(request: Request) -> Response:
    console: Console = request.app.state.console
    lane = console.lane(request.path_params["lane"])
    form = await request.form()
    asked = PurgeRequest.of(form)
    typed = str(form.get("confirm", "")).strip()
    if typed != lane:
        raise ValueError(f"type the lane ({lane}) to confirm the purge; nothing was deleted")
    deleted = await run_in_threadpool(asked.run, console, lane)
    return render(request, "_purge_done.html", lane=lane, asked=asked, deleted=deleted)


routes = [
    Route("/dlq/{lane}/redrive/preview", redrive_preview, methods=["POST"], name="redrive_preview"),
    Route("/dlq/{lane}/redrive", redrive, methods=["POST"], name="redrive"),
    Route("/tasks/{task_id}", task_progress, name="task"),
    Route("/dlq/{lane}/purge/preview", purge_preview, methods=["POST"], name="purge_preview"),
    Route("/dlq/{lane}/purge", purge, methods=["POST"], name="purge"),
]
