"""Which dead letters a redrive or a purge takes: those there when it started; by reason, by id, and the
letters whose type cannot be read (``--type '?'``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jobframework.dlq import DeadLetters
from jobframework.envelope import string_attribute
from jobframework.testing import receive_all
from tests.functional.conftest_local import cli_env, dead_letter, invoke, jf_aws, jf_config, sqs

__all__ = ["jf_aws", "jf_config", "sqs"]


def test_a_paced_redrive_of_jobs_that_fail_again_ends_and_leaves_the_new_letters(sqs, jf_config):
    """A redriven job that fails again is dead-lettered as a new message. The redrive took it as one
    more letter to move, so a redrive with --rate (which gives the jobs time to fail) never ended."""
    ep = jf_config.endpoints("default")
    envs = [dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"}) for i in range(5)]
    failed_again: list[str] = []

    def fail_again(params: dict[str, Any], **_: Any) -> None:  # the consumer, failing each job at once
        if params["QueueUrl"] != ep.url or len(failed_again) >= 100:
            return
        for entry in params["Entries"]:
            sqs.send_message(
                QueueUrl=ep.dlq_url,
                MessageBody=entry["MessageBody"],
                MessageAttributes={**entry["MessageAttributes"], "jf-reason": string_attribute("exhausted")},
            )
            failed_again.append(json.loads(entry["MessageBody"])["id"])

    sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", fail_again)
    considered: list[int] = []
    try:
        result = DeadLetters(jf_config, sqs, wait_time_seconds=0).redrive(
            "default", rate=20, progress=considered.append
        )
    finally:
        sqs.meta.events.unregister("provide-client-params.sqs.SendMessageBatch", fail_again)

    assert result.moved == 5 and sorted(result.job_ids) == sorted(e.id for e in envs)
    assert result.later == 5  # said, and left for the next redrive
    assert sum(considered) == 5  # the progress bar's count of the 5 there at the start (it read 10/5)
    assert sorted(failed_again) == sorted(e.id for e in envs)  # each redriven once
    assert len(receive_all(sqs, ep.url)) == 5
    left = [json.loads(m["Body"])["id"] for m in receive_all(sqs, ep.dlq_url)]
    assert sorted(left) == sorted(e.id for e in envs)  # the new letters wait for the next redrive


def test_a_redrive_takes_the_letters_there_by_sqs_clock_whatever_this_machines_says(
    sqs, jf_config, monkeypatch
):
    """The cutoff is SQS's time of the first receive: with this machine's clock an hour behind, a
    letter dead-lettered a moment before the redrive is still one it takes (a local cutoff left it)."""
    import time
    from types import SimpleNamespace

    from jobframework.dlq import reader

    envs = [dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"}) for i in range(2)]
    # (The embedded AWS runs in this process: only the framework's own clock is set back.)
    skewed = SimpleNamespace(time=lambda: time.time() - 3600, monotonic=time.monotonic)
    monkeypatch.setattr(reader, "time", skewed)

    result = DeadLetters(jf_config, sqs, wait_time_seconds=0).redrive("default")

    assert sorted(result.job_ids) == sorted(e.id for e in envs) and result.later == 0


def _malformed_letter(sqs: Any, url: str) -> str:
    """A dead letter whose body is not an envelope, as the consumer writes one; returns its message id."""
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody="{not json",
        MessageAttributes={
            "jf-reason": string_attribute("malformed"),
            "jf-error": string_attribute("the body is not JSON"),
        },
    )
    return str(sent["MessageId"])


def test_the_cli_selects_letters_by_reason_by_id_and_the_untyped_ones(sqs, jf_config):
    env, ep = cli_env(jf_config), jf_config.endpoints("default")
    crm = [dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"}) for i in range(3)]
    report = dead_letter(sqs, jf_config, "default", "reports.generate", {"report_id": "r"}, reason="version")
    malformed = _malformed_letter(sqs, ep.dlq_url)

    peek = invoke(["dlq", "peek", "default", "-n", "10"], {**env, "COLUMNS": "250"})
    assert peek.exit_code == 0, peek.output
    assert f"message {malformed}" in peek.stdout  # what --id takes for a letter without a job id

    limited = ["dlq", "redrive", "default", "--type", "reports.generate", "--limit", "1", "--dry-run"]
    bar = invoke(limited, env).stderr  # letters considered, of the DLQ's depth (it said 5/1)
    assert "dry run: default DLQ letters read (at most 1 moved)" in bar and "5/5 " in bar, bar

    by_reason = invoke(["dlq", "redrive", "default", "--reason", "version", "--json"], env)
    assert by_reason.exit_code == 0, by_reason.output
    assert json.loads(by_reason.stdout)["job_ids"] == [report.id]

    misspelt = invoke(["dlq", "redrive", "default", "--reason", "exhuasted"], env)  # refused, nothing read
    assert misspelt.exit_code == 2, misspelt.output
    assert "'exhuasted' is not a dead-letter reason; they are: permanent, exhausted" in misspelt.output

    by_job_id = invoke(["dlq", "redrive", "default", "--id", crm[0].id, "--json"], env)
    assert json.loads(by_job_id.stdout)["job_ids"] == [crm[0].id]

    mistyped = invoke(["dlq", "redrive", "default", "--type", "crm.synk"], env)
    assert mistyped.exit_code == 0, mistyped.output
    assert "redrove 0" in mistyped.stdout and "`jf dlq peek default` shows" in mistyped.stderr

    gone = invoke(["dlq", "redrive", "default", "--id", "no-such-job"], env)  # named, not there: exit 1
    assert gone.exit_code == 1 and "no dead letter of the default DLQ has the id no-such-job" in gone.stderr

    untyped = invoke(["dlq", "purge", "default", "--type", "?", "--yes", "--json"], env)
    assert untyped.exit_code == 0, untyped.output
    assert json.loads(untyped.stdout)["deleted"] == 1

    message_id = next(
        m["MessageId"] for m in _visible(sqs, ep.dlq_url) if json.loads(m["Body"])["id"] == crm[1].id
    )
    by_message_id = invoke(["dlq", "purge", "default", "--id", message_id, "--yes", "--json"], env)
    assert json.loads(by_message_id.stdout)["deleted"] == 1

    assert [json.loads(m["Body"])["id"] for m in receive_all(sqs, ep.dlq_url)] == [crm[2].id]
    assert sorted(json.loads(m["Body"])["id"] for m in receive_all(sqs, ep.url)) == sorted(
        [report.id, crm[0].id]
    )


def _visible(sqs: Any, url: str) -> Sequence[dict[str, Any]]:
    """The queue's messages, left visible."""
    messages = receive_all(sqs, url)
    for m in messages:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    return messages


def test_a_malformed_message_is_found_in_the_dlq_by_the_id_the_consumers_log_named(sqs, jf_config):
    """A body that is no envelope has no job id: the consumer's log (and `jf dev`'s line) names its SQS
    message id, and its dead letter is a new message with an id of its own. `jf dlq peek` shows the
    logged id and `--id` takes it."""
    from jobframework import consumer
    from jobframework.testing import consume_once

    env, ep = cli_env(jf_config), jf_config.endpoints("default")
    sent = sqs.send_message(QueueUrl=ep.url, MessageBody='{"type": "crm.sync", "payload": oops')["MessageId"]
    outcomes: list[Any] = []
    consume_once(consumer(config=jf_config, sqs_client=sqs, listeners=[outcomes.append]), sqs, ep.url)
    assert [(o.outcome, o.message_id) for o in outcomes] == [("dead_lettered", sent)]

    peek = invoke(["dlq", "peek", "default", "--json"], env)
    [letter] = json.loads(peek.stdout)
    assert letter["dead_message_id"] == sent and letter["message_id"] != sent and letter["id"] is None
    table = invoke(["dlq", "peek", "default"], {**env, "COLUMNS": "250"})
    assert f"message {sent}" in table.stdout

    purged = invoke(["dlq", "purge", "default", "--id", sent, "--yes", "--json"], env)
    assert json.loads(purged.stdout)["deleted"] == 1
    assert receive_all(sqs, ep.dlq_url) == []


def test_the_dead_records_id_is_left_out_where_sqs_has_no_room_for_an_eleventh_attribute():
    from jobframework.classification import Reason
    from jobframework.dead_letter import dead_letter_message

    kept = {
        name: {"stringValue": "v", "dataType": "String"} for name in ("traceparent", "tracestate", "jf-type")
    }
    signed = {
        **kept,
        "jf-sig": {"stringValue": "s", "dataType": "String"},
        "jf-kid": {"stringValue": "k", "dataType": "String"},
    }

    def letter_of(attributes: dict[str, Any]) -> Any:
        record = {"messageId": "m-1", "body": "{}", "messageAttributes": attributes}
        return dead_letter_message(record, Reason.MALFORMED, "bad", attempt=1, source="q")[
            "MessageAttributes"
        ]

    roomy, full = letter_of(kept), letter_of(signed)
    assert roomy["jf-message-id"]["StringValue"] == "m-1"
    assert "jf-message-id" not in full and len(full) == 10
    # A redriven job's count goes before the record's id, and only where there is room.
    redriven = {"jf-redrives": {"stringValue": "2", "dataType": "String"}}
    counted, crowded = letter_of({**kept, **redriven}), letter_of({**signed, **redriven})
    assert counted["jf-redrives"]["StringValue"] == "2" and len(counted) == 10
    assert "jf-redrives" not in crowded and len(crowded) == 10


def test_redrive_and_purge_by_id_say_which_named_ids_are_not_there_and_which_did_not_match(sqs, jf_config):
    """An operator pasting ids: one mistyped among them is named (the rest still move, exit 1); a letter
    that is there but is not of the --type given is said to be there, not "no dead letter has the id";
    a purge of an id that is not there fails as a redrive's does."""
    env, ep = cli_env(jf_config), jf_config.endpoints("default")
    empty = invoke(["dlq", "redrive", "default"], env)  # (said "redrove 0 (none); 0 not matching; 0 failed")
    assert empty.exit_code == 0 and "the default DLQ is empty: nothing to redrive" in empty.stdout
    crm = [dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"}) for i in range(2)]
    typo = "01a249d2-0000-0000-0000-000000000000"

    other_type = invoke(["dlq", "redrive", "default", "--id", crm[0].id, "--type", "reports.generate"], env)
    assert other_type.exit_code == 1, other_type.output
    assert (
        "are in the default DLQ but do not match --type, --reason, --match or --older-than"
        in other_type.stderr
    )
    assert "has the id" not in other_type.stderr

    partly = invoke(["dlq", "redrive", "default", "--id", crm[0].id, "--id", typo, "--json"], env)
    assert partly.exit_code == 1, partly.output
    assert json.loads(partly.stdout)["job_ids"] == [crm[0].id]  # the one there moved
    assert json.loads(partly.stdout)["not_found"] == [typo]
    assert f"1 of the ids given is in no dead letter of the default DLQ (the others were there): {typo}" in (
        partly.stderr
    )

    shown = invoke(["dlq", "peek", "default", "--id", crm[1].id, "--id", typo], env)  # one shown, one named
    assert shown.exit_code == 1 and crm[1].id in shown.stdout, shown.output
    assert f"not in the default DLQ: {typo} (the others are shown)" in shown.stderr
    purged = invoke(["dlq", "purge", "default", "--id", "nope", "--yes"], env)
    assert purged.exit_code == 1, purged.output
    assert "no dead letter of the default DLQ has the id nope" in purged.stderr
    assert [json.loads(m["Body"])["id"] for m in _visible(sqs, ep.dlq_url)] == [crm[1].id]

    # one there and one mistyped: the one there is deleted, the other named (it deleted 1 and said
    # nothing of the typo, exit 0)
    both = invoke(["dlq", "purge", "default", "--id", crm[1].id, "--id", typo, "--yes", "--json"], env)
    assert both.exit_code == 1, both.output
    assert json.loads(both.stdout)["deleted"] == 1 and json.loads(both.stdout)["not_found"] == [typo]
    assert f"no dead letter of the default DLQ has the id {typo} (a typo, or deleted already)" in both.stderr
    assert receive_all(sqs, ep.dlq_url) == []


def test_letters_are_selected_by_text_in_their_payload_or_error(sqs, jf_config):
    """An operator during one partner's outage: "redrive globex only; initech is still down" took a
    script over `peek --json` and eight --id flags; --match selects by text in the body or the error."""
    env, ep = cli_env(jf_config), jf_config.endpoints("default")
    globex = [
        dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"globex-{i}"}) for i in range(2)
    ]
    initech = dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": "initech-1"})

    peeked = invoke(["dlq", "peek", "default", "--match", "globex", "--json"], env)
    assert peeked.exit_code == 0, peeked.output
    assert sorted(p["id"] for p in json.loads(peeked.stdout)) == sorted(e.id for e in globex)
    shown_form = invoke(["dlq", "peek", "default", "--match", '"account_id": "initech-1"', "--json"], env)
    assert [p["id"] for p in json.loads(shown_form.stdout)] == [initech.id]  # as `peek --id` shows a body
    one = invoke(["dlq", "peek", "default", "--limit", "1", "--json"], env)  # (redrive's word for -n)
    assert one.exit_code == 0 and len(json.loads(one.stdout)) == 1, one.output
    dry = invoke(["dlq", "redrive", "default", "--match", "globex", "--dry-run"], env)
    assert "dry run: would redrive 2 (crm.sync 2); 1 not matching" in dry.stdout, dry.output
    moved = invoke(["dlq", "redrive", "default", "--match", "globex", "--json"], env)
    assert sorted(json.loads(moved.stdout)["job_ids"]) == sorted(e.id for e in globex)
    unset = invoke(["dlq", "purge", "default", "--match", " ", "--yes"], env)  # "$PARTNER" unset: not all
    assert unset.exit_code == 2 and "give the text to match" in unset.output
    none = invoke(["dlq", "purge", "default", "--match", "umbrella", "--yes"], env)
    assert none.exit_code == 0 and "no dead letter of the default DLQ matched" in none.stderr
    assert [json.loads(m["Body"])["id"] for m in receive_all(sqs, ep.dlq_url)] == [initech.id]


def test_letters_are_selected_by_text_in_their_error_only(sqs, jf_config):
    """A data team redriving "only the 429s" after an outage: --match 429 also took a letter whose
    payload held 429 (a 400 for a bad email); --error looks at the error alone."""
    env, ep = cli_env(jf_config), jf_config.endpoints("default")
    throttled = [
        dead_letter(
            sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"}, error="HTTP 429 from the CRM"
        )
        for i in range(2)
    ]
    bad = dead_letter(
        sqs, jf_config, "default", "crm.sync", {"account_id": "a-429"}, reason="permanent", error="HTTP 400"
    )
    wide = invoke(["dlq", "peek", "default", "--match", "429", "--json"], env)
    assert len(json.loads(wide.stdout)) == 3, wide.output
    dry = invoke(["dlq", "redrive", "default", "--error", "429", "--dry-run"], env)
    assert "dry run: would redrive 2 (crm.sync 2); 1 not matching" in dry.stdout, dry.output
    moved = invoke(["dlq", "redrive", "default", "--error", "429", "--json"], env)
    assert sorted(json.loads(moved.stdout)["job_ids"]) == sorted(e.id for e in throttled)
    purged = invoke(["dlq", "purge", "default", "--error", "HTTP 4", "--reason", "permanent", "--yes"], env)
    assert purged.exit_code == 0 and "deleted 1 dead letter from the default DLQ" in purged.stdout
    assert receive_all(sqs, ep.dlq_url) == [] and bad.id
    unset = invoke(["dlq", "peek", "default", "--error", ""], env)
    assert unset.exit_code == 2 and "give the text to match" in unset.output


def test_a_redrive_counts_its_letters_by_reason_and_says_which_fail_the_same_way_again(sqs, jf_config):
    """An operator's dry run said "would redrive 36 (by type)"; permanent and invalid-payload letters
    among them failed again at once ("4 arrived in the DLQ while it ran")."""
    env = cli_env(jf_config)
    for i in range(2):
        dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"})
    dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": "x"}, reason="permanent")

    dry = invoke(["dlq", "redrive", "default", "--dry-run"], env)
    assert dry.exit_code == 0, dry.output
    assert "would redrive 3 (crm.sync 3; by reason: exhausted 2, permanent 1)" in dry.stdout
    assert (
        "1 of the letters it would redrive was dead-lettered permanent: such a letter fails the same way"
        in dry.stderr
    )
    chosen = invoke(["dlq", "redrive", "default", "--reason", "exhausted", "--dry-run"], env)
    assert "would redrive 2 (crm.sync 2); 1 not matching" in chosen.stdout and "note" not in chosen.stderr
