"""`jf dlq` over big letters and slow reads: redrive batches sized by bytes; export and a selective
redrive consider each letter once, however long the read takes against the hold (issue 12, items 14-15).

Faults and slowness are injected with botocore event hooks on the real SQS client of the embedded AWS.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel

from jobframework import envelope as wire
from jobframework.dlq import DeadLetters
from jobframework.jobs import JobRegistry, job
from jobframework.local.aws import FAKE_CREDENTIALS
from jobframework.testing import provision_fresh, receive_all
from tests.functional.conftest_local import cli_env, dead_letter, invoke, jf_aws, jf_config, queue_counts, sqs

__all__ = ["jf_aws", "jf_config", "sqs"]


class ReportPayload(BaseModel):
    report_id: str


def _slow_receives(client: Any, seconds: float) -> list[float]:
    """Make every ReceiveMessage of ``client`` take ``seconds`` longer; returns the list of call times."""
    calls: list[float] = []

    def slow(**_: Any) -> None:
        calls.append(time.monotonic())
        time.sleep(seconds)

    client.meta.events.register("before-send.sqs.ReceiveMessage", slow)
    return calls


def _hold_extensions(client: Any, *, fail: bool = False) -> list[int]:
    """Record (or, with ``fail``, refuse) every ChangeMessageVisibilityBatch that extends a hold."""
    extended: list[int] = []

    def watch(params: dict[str, Any], **_: Any) -> None:
        seconds = [e["VisibilityTimeout"] for e in params.get("Entries", [])]
        if seconds and min(seconds) > 0:
            extended.append(len(seconds))
            if fail:
                raise ConnectionError("injected: ChangeMessageVisibilityBatch unreachable")

    client.meta.events.register("provide-client-params.sqs.ChangeMessageVisibilityBatch", watch)
    return extended


def test_redrive_of_eight_letters_of_150_kb_sends_batches_under_1_mib(sqs, jf_config):
    ep = jf_config.endpoints("low")
    envs = [
        dead_letter(sqs, jf_config, "low", "reports.generate", {"report_id": f"r-{i}", "blob": "x" * 150_000})
        for i in range(8)
    ]
    batches: list[int] = []

    def size(params: dict[str, Any], **_: Any) -> None:
        batches.append(
            sum(wire.message_size(e["MessageBody"], e["MessageAttributes"]) for e in params["Entries"])
        )

    sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", size)

    result = DeadLetters(jf_config, sqs).redrive("low")

    assert (result.moved, result.failed, result.errors) == (8, 0, [])
    assert len(batches) >= 2 and max(batches) <= wire.SQS_MAX_MESSAGE_BYTES
    moved = receive_all(sqs, ep.url)
    assert sorted(json.loads(m["Body"])["id"] for m in moved) == sorted(e.id for e in envs)
    assert queue_counts(sqs, ep.dlq_url) == (0, 0)


def test_cli_redrive_of_big_letters_exits_zero(sqs, jf_config):
    for i in range(8):
        dead_letter(sqs, jf_config, "low", "reports.generate", {"report_id": f"r-{i}", "blob": "y" * 150_000})

    result = invoke(["dlq", "redrive", "low", "--json"], cli_env(jf_config))

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["moved"] == 8


def test_export_that_outlasts_its_hold_writes_each_letter_once_and_ends(sqs, jf_config, tmp_path):
    ep = jf_config.endpoints("default")
    envs = [dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"}) for i in range(30)]
    receives = _slow_receives(sqs, 0.6)  # 3 batches + 2 empty receives: about 3 s against a 2 s hold
    extended = _hold_extensions(sqs)
    out = tmp_path / "dlq.jsonl"
    progress: list[int] = []

    with out.open("w") as fh:
        count = DeadLetters(jf_config, sqs, hold_seconds=2).export("default", fh, progress=progress.append)

    assert receives[-1] - receives[0] > 2  # the read did outlast the first hold
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert count == len(lines) == 30
    assert sorted(line["id"] for line in lines) == sorted(e.id for e in envs)  # each once
    assert sum(progress) == 30
    assert extended  # the hold was extended while reading
    assert len(receives) <= 3 + 2 + 2  # bounded: the batches, the empty receives, a little slack
    assert queue_counts(sqs, ep.dlq_url) == (30, 0)  # nothing removed, all visible again


def test_export_whose_holds_lapse_still_writes_each_letter_once_and_ends(sqs, jf_config):
    envs = [dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"}) for i in range(20)]
    _slow_receives(sqs, 0.7)  # each receive outlasts half the 1 s hold ...
    refused = _hold_extensions(sqs, fail=True)  # ... and no extension gets through
    letters = DeadLetters(jf_config, sqs, hold_seconds=1)

    found = letters.peek("default", limit=None)

    assert refused  # it tried
    assert sorted(d.job_id or "" for d in found) == sorted(e.id for e in envs)  # each once: repeats dropped


def test_redrive_by_type_where_most_letters_do_not_match_considers_each_once(sqs, jf_config):
    ep = jf_config.endpoints("default")
    wanted = [dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"}) for i in range(4)]
    others = [
        dead_letter(sqs, jf_config, "default", "reports.generate", {"report_id": f"r-{i}"}) for i in range(36)
    ]
    receives = _slow_receives(sqs, 0.5)  # 4 batches + 2 empty receives: about 3 s against a 2 s hold
    considered: list[int] = []

    result = DeadLetters(jf_config, sqs, hold_seconds=2).redrive(
        "default", job_type="crm.sync", progress=considered.append
    )

    assert (result.moved, result.skipped, result.failed) == (4, 36, 0)
    assert sum(considered) == 40
    assert len(receives) <= 4 + 2 + 2
    assert sorted(json.loads(m["Body"])["id"] for m in receive_all(sqs, ep.url)) == sorted(
        e.id for e in wanted
    )
    left = receive_all(sqs, ep.dlq_url)
    assert sorted(json.loads(m["Body"])["id"] for m in left) == sorted(e.id for e in others)


report_jobs = JobRegistry()


@job("dl.report", registry=report_jobs, priority="low")
def report(payload: ReportPayload) -> None:
    """Never run: its letters are made by hand."""


def test_peek_says_how_many_the_dlq_holds_and_where_a_job_types_letters_are(sqs, jf_aws):
    """A trial's `jf dlq peek high` said "10 shown" of 11, and a peek or redrive of a job type on the
    wrong DLQ printed an empty table or "redrove 0" with nothing said."""
    topology, config = provision_fresh(jf_aws.endpoint_url, report_jobs)
    for i in range(12):
        dead_letter(sqs, config, "low", "dl.report", {"report_id": f"r-{i}"})
    env = {  # as jf dev's exports: the topology parameter, whose job catalog knows each job's lane
        **FAKE_CREDENTIALS,
        "JF_ENDPOINT_URL": jf_aws.endpoint_url,
        "JF_TOPOLOGY_PARAMETER": topology.topology_parameter,
    }
    peeked = invoke(["dlq", "peek", "low", "-n", "5"], env)
    assert peeked.exit_code == 0, peeked.output
    assert "low DLQ: 5 shown of about 12 in the DLQ (-n 12 for more)" in peeked.stdout
    everything = invoke(["dlq", "peek", "low", "-n", "20"], env)
    assert "low DLQ: 12 shown" in everything.stdout and "of about" not in everything.stdout
    # An on-call trial: a filtered peek's title read as if -n would show more of what matched.
    one = invoke(["dlq", "peek", "low", "--match", '"r-3"'], env)
    assert "low DLQ: 1 matching shown of about 12 in the DLQ" in one.stdout and "for more" not in one.stdout
    two = invoke(["dlq", "peek", "low", "--type", "dl.report", "-n", "2"], env)
    assert "2 matching shown of about 12 in the DLQ (-n 12 for more that match)" in two.stdout
    nothing = invoke(["dlq", "peek", "low", "--match", "no-such-text"], env)
    assert "no dead letter of the low DLQ matched" in nothing.stderr and "DLQ:" not in nothing.stdout
    elsewhere = invoke(["dlq", "peek", "high", "--type", "dl.report"], env)
    assert elsewhere.exit_code == 0
    assert "dl.report runs on low: its letters are in the low DLQ" in elsewhere.stderr
    moved = invoke(["dlq", "redrive", "high", "--type", "dl.report"], env)
    assert "dl.report runs on low" in moved.stderr
    typo = invoke(["dlq", "redrive", "low", "--type", "dl.reprot", "--dry-run"], env)  # (an on-call trial's)
    assert "no job type 'dl.reprot': did you mean dl.report?" in typo.stderr, typo.output
    assert queue_counts(sqs, config.endpoints("low").dlq_url)[0] == 12
    # jf dev's exports also carry the queue URLs (JF_QUEUE_URL_*), and no catalog: the parameter has it
    exported = {**env, **{k: v for k, v in config.to_env().items() if k.startswith(("JF_QUEUE", "JF_DLQ"))}}
    assert "JF_QUEUE_URL_LOW" in exported
    purged = invoke(["dlq", "purge", "high", "--type", "dl.report", "--yes"], exported)
    assert "dl.report runs on low: its letters are in the low DLQ" in purged.stderr, purged.output


def test_a_long_error_is_cut_in_the_table_and_whole_by_id(sqs, jf_config):
    """An on-call trial's budget errors wrapped into 8-character slivers in a 100-column terminal."""
    env = {**cli_env(jf_config), "COLUMNS": "400"}  # (one line a row: the cell as cut)
    error = "ConnectionError: partner down (not retried: the retry budget of default is spent; " + "x" * 300
    letter = dead_letter(sqs, jf_config, "low", "reports.generate", {"report_id": "r-long"}, error=error)
    table = invoke(["dlq", "peek", "low"], env)
    assert "… (peek --id: all of it)" in table.stdout and "x" * 50 not in table.stdout, table.stdout
    whole = invoke(["dlq", "peek", "low", "--id", letter.id], env)
    assert "x" * 300 in whole.stdout.replace("\n", "")


def test_peek_by_id_shows_a_letter_in_full(sqs, jf_config):
    """A trial found no way to read one letter's body from the CLI but `jf dlq export ... | grep`."""
    env = cli_env(jf_config)
    wanted = dead_letter(sqs, jf_config, "low", "reports.generate", {"report_id": "r-full", "pages": 3})
    dead_letter(sqs, jf_config, "low", "reports.generate", {"report_id": "r-other"})
    shown = invoke(["dlq", "peek", "low", "--id", f" {wanted.id}\n"], env)  # (a pasted id)
    assert shown.exit_code == 0, shown.output
    assert f"id:               {wanted.id}" in shown.stdout and '"report_id": "r-full"' in shown.stdout
    assert "jf-reason: exhausted" in shown.stdout and "r-other" not in shown.stdout
    assert (
        "message_id:" in shown.stdout
    )  # the letter's own (dead_message_id: the record that died, when kept)
    [letter] = json.loads(invoke(["dlq", "peek", "low", "--id", wanted.id, "--json"], env).stdout)
    assert json.loads(letter["body"])["payload"] == {"report_id": "r-full", "pages": 3}
    assert letter["attributes"]["jf-reason"] == "exhausted"
    missing = invoke(["dlq", "peek", "low", "--id", "no-such-id"], env)
    assert missing.exit_code == 1 and "no dead letter of the low DLQ has the id no-such-id" in missing.output
    assert queue_counts(sqs, jf_config.endpoints("low").dlq_url)[0] == 2  # nothing removed


def test_a_letter_nested_deeper_than_python_reads_is_shown_as_it_is(sqs, jf_config):
    """A fintech trial's forged body of 100,000 nested arrays was dead-lettered malformed, and then
    broke `jf dlq peek` (RecursionError, exit 1) and the console's letter page (500)."""
    from jobframework.dlq.letter import DeadLetter
    from jobframework.ui.templating import pretty_json

    deep = "[" * 100_000 + "]" * 100_000
    attributes = {wire.ATTR_REASON: wire.string_attribute("malformed")}
    sqs.send_message(
        QueueUrl=jf_config.endpoints("low").dlq_url, MessageBody=deep, MessageAttributes=attributes
    )
    env = {**cli_env(jf_config), "COLUMNS": "200"}
    table = invoke(["dlq", "peek", "low"], env)
    assert table.exit_code == 0 and "malformed" in table.stdout, table.output
    [letter] = json.loads(invoke(["dlq", "peek", "low", "--json"], env).stdout)
    shown = invoke(["dlq", "peek", "low", "--id", letter["message_id"]], env)
    assert shown.exit_code == 0 and "[[[[" in shown.stdout, shown.output
    assert DeadLetter.of({"Body": deep, "MessageId": "m"}).shown_body() == deep  # (the console's page)
    assert pretty_json(deep) == deep
