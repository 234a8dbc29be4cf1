"""How ``jf dlq peek`` shows dead letters (a table, or each letter in full: ``--id``) and ``purge
--dry-run`` what it would delete."""

from __future__ import annotations

import json
from typing import Any

import typer

from jobframework.cli.base import print_json, rich_console
from jobframework.cli.errors import CliError

TABLE_ERROR_CHARS = 100
"""An error longer than this is cut in ``peek``'s table (wrapped into slivers in a terminal of 100
columns, a trial found); ``peek --id`` shows it whole."""


def print_table(
    lane: str,
    found: list[Any],
    pointers: list[dict[str, Any] | None],
    *,
    depth: int,
    count: int,
    filtered: bool = False,
) -> None:
    """``peek``'s table: a row a letter (type, id, reason, error, attempts, dead at; where its offloaded
    payload is, when any is), titled with how many are shown (matching, when ``filtered``) of about
    how many in the DLQ."""
    from rich.table import Table

    from jobframework.dlq import UNTYPED

    shown = f"{len(found)} {'matching ' if filtered else ''}shown"
    if depth > len(found):  # (SQS's count is approximate)
        shown += f" of about {depth} in the DLQ" + (
            f" (-n {min(depth, 1000)} for more{' that match' if filtered else ''})"
            if len(found) == count
            else ""
        )
    table = Table(title=f"{lane} DLQ: {shown}", title_justify="left")
    keyed, tenants = any(d.own_key for d in found), any(d.tenant for d in found)
    columns = [
        *("type", "id", *(["key"] if keyed else []), *(["tenant"] if tenants else [])),
        *("reason", "error", "attempts", "dead at (UTC)"),
    ]
    if any(pointers):
        columns.append("payload")
    for name in columns:  # (the id whole: it is what --id, jf status and the console take)
        table.add_column(name, overflow="fold", no_wrap=name == "id")
    for d, ref in zip(found, pointers, strict=True):
        s = d.summary()
        row = [
            s["type"] or UNTYPED,
            # A malformed body has no job id: the id the consumer's log named (--id takes either).
            s["id"] or f"message {d.dead_message_id or d.message_id}",
            *([d.own_key or "-"] if keyed else []),
            *([d.tenant or "-"] if tenants else []),
            s["reason"] or "-",
            _cut(s["error"] or "-"),
            str(s["attempts"] or "-") + (f" ({d.redrives} redriven)" if d.redrives else ""),
            d.died_at.strftime("%Y-%m-%d %H:%M:%S") if d.died_at else "-",  # (UTC, as --json's dead_at)
        ]
        if any(pointers):
            row.append(f"{ref['uri']} ({ref['size']:,} bytes)" if ref else "inline")
        table.add_row(*row)
    rich_console().print(table)


def _cut(error: str) -> str:
    if len(error) <= TABLE_ERROR_CHARS:
        return error
    return error[: TABLE_ERROR_CHARS - 1].rstrip() + "… (peek --id: all of it)"


def show_in_full(lane: str, found: list[Any], ids: list[str], *, json_output: bool, s3: Any = None) -> None:
    """``peek --id``: each letter as ``export`` writes it (JSON), or its fields, body and attributes;
    an offloaded payload's data read from S3 with ``s3`` (``offloaded_payload`` in JSON, or why not
    as ``offloaded_payload_error``)."""
    if not found:
        raise CliError(
            f"no dead letter of the {lane} DLQ has the id {', '.join(ids)}; `jf dlq peek {lane}` shows "
            "their job ids and message ids"
        )
    records = [{**d.export_record(), **offloaded(d.body, s3)} for d in found]
    if json_output:
        print_json(records)
    else:
        _print_letters(found, records)
    from jobframework.dlq.letter import Selection

    named = Selection(ids=frozenset(ids))
    carried = set().union(*(named.named(d) for d in found))
    missing = [i for i in dict.fromkeys(ids) if i not in carried]
    if missing and not lane.endswith("-fifo"):  # (a FIFO DLQ's group past ten held: not seen)
        raise CliError(f"not in the {lane} DLQ: {', '.join(missing)} (the others are shown)")


def _print_letters(found: list[Any], records: list[dict[str, Any]]) -> None:
    """Each letter's fields, body (indented), offloaded payload and attributes, as ``peek --id`` shows
    them."""
    console = rich_console()
    for d, record in zip(found, records, strict=True):
        for name in (
            *("type", "id", "key", "reason", "error", "attempts", "dead_at", "source"),
            *("dead_message_id", "message_id"),  # the record that died (jf dev's), the letter's own
        ):
            if record.get(name) is not None:
                console.print(f"{name + ':':<17} {record[name]}", markup=False, highlight=False)
        console.print("body:", markup=False)
        console.print(d.shown_body(), markup=False, highlight=False)
        if "offloaded_payload" in record:
            console.print("payload (offloaded, read from S3):", markup=False)
            shown = json.dumps(record["offloaded_payload"], indent=2, sort_keys=True, ensure_ascii=False)
            console.print(shown, markup=False, highlight=False)
        elif "offloaded_payload_error" in record:
            console.print(f"payload: {record['offloaded_payload_error']}", markup=False, highlight=False)
        console.print("attributes:", markup=False)
        for name, value in sorted(record["attributes"].items()):
            console.print(f"  {name}: {value}", markup=False, highlight=False)
        console.print()


def payload_pointer(body: str) -> dict[str, Any] | None:
    """Where an offloaded payload is (``payload_ref`` in the body): ``{"uri": "s3://...", "size": n}``."""
    try:
        ref = json.loads(body).get("payload_ref")
    except (ValueError, AttributeError, RecursionError):  # (a body nested too deep: a malformed one)
        return None
    if not isinstance(ref, dict) or not ref.get("bucket") or not ref.get("key"):
        return None
    return {"uri": f"s3://{ref['bucket']}/{ref['key']}", "size": ref.get("size"), "sha256": ref.get("sha256")}


def offloaded(body: str, s3: Any) -> dict[str, Any]:
    """An offloaded payload's data (``{"offloaded_payload": {...}}``), or why it cannot be read
    (``{"offloaded_payload_error": "..."}``); ``{}`` for a payload in the body."""
    from jobframework.envelope import PayloadRef
    from jobframework.payloads import fetch

    pointer = payload_pointer(body)
    if pointer is None:
        return {}
    if s3 is None:
        return {"offloaded_payload_error": f"at {pointer['uri']}; no payload bucket is configured to read it"}
    try:
        ref = PayloadRef.model_validate(json.loads(body)["payload_ref"])
        return {"offloaded_payload": fetch(ref, s3)}
    except Exception as exc:  # gone (expired), unreadable, or not what was sent: said, not raised
        return {"offloaded_payload_error": f"at {pointer['uri']}, not read: {exc}"}


def purge_preview(lane: str, found: list[Any], ids: list[str] | None, *, json_output: bool) -> None:
    """What ``purge --dry-run`` found: how many letters a purge would delete, by type (and by reason when
    they have more than one), and the ids given that no letter carries (exit 1, as the purge's)."""
    from collections import Counter

    from jobframework.dlq.letter import UNTYPED

    by_type = Counter(d.job_type or UNTYPED for d in found)
    by_reason = Counter(d.reason or "-" for d in found)
    named = {n for d in found for n in (d.message_id, d.job_id, d.dead_message_id) if n}
    missing = [i for i in ids or () if i not in named]
    if json_output:
        print_json(
            {
                "priority": lane,
                "dry_run": True,
                "would_delete": len(found),
                "by_type": dict(by_type),
                "by_reason": dict(by_reason),
                "not_found": missing,
            }
        )
    else:
        kinds = ", ".join(f"{kind}: {n}" for kind, n in by_type.most_common()) or "none"
        reasons = (
            " (" + ", ".join(f"{why}: {n}" for why, n in by_reason.most_common()) + ")"
            if len(by_reason) > 1
            else ""
        )
        typer.echo(
            f"would delete {len(found)} dead letter{'' if len(found) == 1 else 's'} from the {lane} DLQ "
            f"({kinds}){reasons}; nothing deleted"
            + ("; the same command with --yes deletes them" if found else "")
        )
    if missing:
        raise CliError(
            f"no dead letter of the {lane} DLQ has the id {', '.join(missing)}; `jf dlq peek {lane}` "
            "shows their job ids and message ids"
        )
