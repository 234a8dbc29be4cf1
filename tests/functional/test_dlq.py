"""`jf dlq ...` against the embedded AWS: peek, export, purge, redrive (selective, interrupted, native)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from jobframework.dlq import DeadLetterError, DeadLetters
from jobframework.errors import EndpointNotSupportedError
from jobframework.testing import receive_all
from tests.functional.conftest_local import cli_env, dead_letter, invoke, jf_aws, jf_config, queue_counts, sqs

__all__ = ["jf_aws", "jf_config", "sqs"]


def _attrs(message: dict[str, Any]) -> dict[str, str]:
    return {k: v["StringValue"] for k, v in message.get("MessageAttributes", {}).items()}


@pytest.fixture
def letters(sqs, jf_config):
    """Three crm.sync and two reports.generate dead letters on the default DLQ."""
    crm = [
        dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": f"a-{i}"}, key=f"crm:{i}")
        for i in range(3)
    ]
    reports = [
        dead_letter(sqs, jf_config, "default", "reports.generate", {"report_id": f"r-{i}"}) for i in range(2)
    ]
    return crm, reports


def test_tables_say_which_deployment_they_read_and_peek_shows_keys_and_short_times(sqs, jf_config, letters):
    """An on-call trial: nothing said whether a table was dev's or prod's; peek had no key column (to find a
    customer's letters), and its 32-character dead-at wrapped over four lines at 100 columns."""
    env = {**cli_env(jf_config), "COLUMNS": "160"}
    where = f"{jf_config.endpoints('high').name.removesuffix('-high')} at {jf_config.endpoint_url}"
    listed = invoke(["dlq", "ls"], env)
    assert f"DLQs of {where}" in listed.stdout, listed.output
    assert "its queue" in listed.stdout
    queues = invoke(["queue", "ls"], env)
    assert f"Queues of {where}" in queues.stdout, queues.output
    peeked = invoke(["dlq", "peek", "default"], env)
    assert "crm:0" in peeked.stdout and "key" in peeked.stdout
    assert "2026-01-01 00:00:00" in peeked.stdout and "+00:00" not in peeked.stdout, peeked.output


def test_peek_shows_dead_letters_and_changes_nothing(sqs, jf_config, letters):
    dlq = jf_config.endpoints("default").dlq_url
    before = sorted((m["Body"], json.dumps(_attrs(m), sort_keys=True)) for m in _peek_raw(sqs, dlq))

    result = invoke(["dlq", "peek", "default", "-n", "10", "--json"], cli_env(jf_config))

    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert len(shown) == 5
    assert {s["type"] for s in shown} == {"crm.sync", "reports.generate"}
    assert all(s["reason"] == "exhausted" and s["attempts"] == 3 and s["dead_at"] for s in shown)
    assert queue_counts(sqs, dlq) == (5, 0)  # all still there and visible
    after = sorted((m["Body"], json.dumps(_attrs(m), sort_keys=True)) for m in _peek_raw(sqs, dlq))
    assert after == before


def test_peek_shows_only_the_type_or_reason_asked_for(sqs, jf_config, letters):
    """A trial looked for the few other letters among 130 dead-lettered `budget` with --json and a script:
    redrive selected by --type and --reason, peek could not."""
    dead_letter(sqs, jf_config, "default", "reports.generate", {"report_id": "r-9"}, reason="version")
    env = cli_env(jf_config)
    reports = json.loads(
        invoke(["dlq", "peek", "default", "--type", "reports.generate", "--json"], env).stdout
    )
    assert sorted(s["reason"] for s in reports) == ["exhausted", "exhausted", "version"]
    versions = json.loads(invoke(["dlq", "peek", "default", "--reason", "version", "--json"], env).stdout)
    assert [(s["type"], s["reason"]) for s in versions] == [("reports.generate", "version")]
    misspelt = invoke(["dlq", "peek", "default", "--reason", "budgt"], env)
    assert misspelt.exit_code == 2 and "'budgt' is not a dead-letter reason" in misspelt.output


def _peek_raw(sqs, url):
    msgs = list(receive_all(sqs, url))
    for m in msgs:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    return msgs


def test_redrive_by_type_moves_only_that_type_keeps_ids_keys_and_resets_attempts(sqs, jf_config, letters):
    crm, reports = letters
    ep = jf_config.endpoints("default")

    result = invoke(["dlq", "redrive", "default", "--type", "crm.sync", "--json"], cli_env(jf_config))

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["moved"] == 3
    assert report["by_type"] == {"crm.sync": 3}
    assert report["by_source"] == {ep.name: 3}
    moved = receive_all(sqs, ep.url)
    assert sorted(json.loads(m["Body"])["id"] for m in moved) == sorted(e.id for e in crm)
    assert {m["Body"] for m in moved} == {e.to_body() for e in crm}  # body byte for byte: id, key kept
    for m in moved:
        attrs = _attrs(m)
        assert m["Attributes"]["ApproximateReceiveCount"] == "1"  # attempts reset
        assert attrs["jf-type"] == "crm.sync"
        assert attrs["traceparent"].startswith("00-")  # trace kept
        assert not {"jf-reason", "jf-error", "jf-attempts", "jf-source", "jf-dead-at"} & set(attrs)
    remaining = receive_all(sqs, ep.dlq_url)
    assert sorted(json.loads(m["Body"])["id"] for m in remaining) == sorted(e.id for e in reports)


def test_redrive_dry_run_and_limit(sqs, jf_config, letters):
    env = cli_env(jf_config)
    ep = jf_config.endpoints("default")

    dry = invoke(["dlq", "redrive", "default", "--dry-run", "--json"], env)
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["matched"] == 5
    assert queue_counts(sqs, ep.dlq_url) == (5, 0)
    assert queue_counts(sqs, ep.url) == (0, 0)

    limited = invoke(["dlq", "redrive", "default", "--limit", "2", "--older-than", "1h"], env)
    assert limited.exit_code == 0, limited.output
    assert "redrove 2" in limited.stdout
    # The three left matched: the limit left them, not "not matching" (a trial read "3 not matching")
    assert "0 not matching; --limit 2 reached (more may match)" in limited.stdout, limited.stdout
    assert queue_counts(sqs, ep.url) == (2, 0)
    assert queue_counts(sqs, ep.dlq_url) == (3, 0)
    # A limit met by a batch's last letter leaves the rest too: an operator's trial read
    # "limited": false with ten letters left behind, in no count.
    everything = invoke(["dlq", "redrive", "default", "--limit", "3", "--dry-run", "--json"], env)
    assert (json.loads(everything.stdout)["matched"], json.loads(everything.stdout)["limited"]) == (3, True)

    too_young = invoke(["dlq", "redrive", "default", "--older-than", "36500d", "--json"], env)
    assert json.loads(too_young.stdout)["moved"] == 0


def test_redrive_by_message_ids_moves_exactly_the_selection(sqs, jf_config, letters):
    crm, reports = letters
    ep = jf_config.endpoints("default")
    by_job = {json.loads(m["Body"])["id"]: m["MessageId"] for m in _peek_raw(sqs, ep.dlq_url)}
    picked = [by_job[crm[0].id], by_job[reports[1].id], "gone-since"]  # one id no longer in the DLQ
    dead = DeadLetters(jf_config, sqs, wait_time_seconds=0)

    dry = dead.redrive("default", message_ids=picked, dry_run=True)
    assert (dry.matched, dry.moved) == (2, 0)
    assert queue_counts(sqs, ep.dlq_url) == (5, 0)

    result = dead.redrive("default", message_ids=picked)

    assert (result.matched, result.moved, result.failed) == (2, 2, 0)
    assert sorted(result.job_ids) == sorted([crm[0].id, reports[1].id])
    moved = receive_all(sqs, ep.url)
    assert sorted(json.loads(m["Body"])["id"] for m in moved) == sorted([crm[0].id, reports[1].id])
    remaining = {json.loads(m["Body"])["id"] for m in receive_all(sqs, ep.dlq_url)}
    assert remaining == {crm[1].id, crm[2].id, reports[0].id}


class _Interrupting:
    """An SQS client that is interrupted at the ``n``-th call of ``operation``."""

    def __init__(self, client: Any, operation: str, n: int) -> None:
        self._client, self._operation, self._n, self.calls = client, operation, n, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name != self._operation:
            return attr

        def call(**kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self._n:
                raise KeyboardInterrupt
            return attr(**kwargs)

        return call


@pytest.mark.parametrize("operation", ["send_message_batch", "delete_message_batch"])
def test_interrupted_redrive_loses_no_message(sqs, jf_config, operation):
    ep = jf_config.endpoints("low")
    envs = [
        dead_letter(sqs, jf_config, "low", "reports.generate", {"report_id": f"r-{i}"}) for i in range(25)
    ]
    flaky = _Interrupting(sqs, operation, 2)

    with pytest.raises(KeyboardInterrupt):
        DeadLetters(jf_config, flaky).redrive("low")  # type: ignore[arg-type]

    in_source = [json.loads(m["Body"])["id"] for m in _peek_raw(sqs, ep.url)]
    in_dlq = [json.loads(m["Body"])["id"] for m in _peek_raw(sqs, ep.dlq_url)]  # visible again at once
    assert set(in_source) | set(in_dlq) == {e.id for e in envs}
    assert len(in_source) >= 10  # the first batch moved
    if operation == "send_message_batch":
        assert len(in_source) + len(in_dlq) == 25  # nothing sent twice either
    # Finishing the redrive afterwards moves the rest.
    DeadLetters(jf_config, sqs).redrive("low")
    assert queue_counts(sqs, ep.dlq_url) == (0, 0)


def test_export_and_purge_by_type(sqs, jf_config, letters, tmp_path):
    env = cli_env(jf_config)
    out = tmp_path / "dlq.jsonl"

    out.write_text("an older export, readable by all\n")
    out.chmod(0o644)
    exported = invoke(["dlq", "export", "default", "--out", str(out)], env)
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 5
    assert all(line["body"] and line["attributes"]["jf-reason"] == "exhausted" for line in lines)
    assert out.stat().st_mode & 0o777 == 0o600  # (the payloads: a fintech trial's export was 0644)

    refused = invoke(["dlq", "purge", "default"], env)
    assert refused.exit_code == 2
    assert "--yes" in refused.output
    assert "--dry-run" in refused.output  # (an on-call trial looked for it: "No such option")

    preview = invoke(["dlq", "purge", "default", "--type", "reports.generate", "--dry-run"], env)
    assert preview.exit_code == 0, preview.output
    assert preview.stdout.startswith("would delete 2 dead letters from the default DLQ (reports.generate: 2)")
    counted = invoke(["dlq", "purge", "default", "--dry-run", "--json", "--id", "no-such-id"], env)
    assert counted.exit_code == 1 and "no-such-id" in counted.stderr, counted.output
    assert json.loads(counted.stdout)["would_delete"] == 0
    assert queue_counts(sqs, jf_config.endpoints("default").dlq_url) == (5, 0)  # nothing deleted or held

    purged = invoke(["dlq", "purge", "default", "--type", "reports.generate", "--yes", "--json"], env)
    assert purged.exit_code == 0, purged.output
    assert json.loads(purged.stdout)["deleted"] == 2
    assert {
        json.loads(m["Body"])["type"] for m in receive_all(sqs, jf_config.endpoints("default").dlq_url)
    } == {"crm.sync"}


def test_ls_reports_depth_and_oldest_age(sqs, jf_config, letters):
    result = invoke(["dlq", "ls", "--json"], cli_env(jf_config))
    assert result.exit_code == 0, result.output
    rows = {r["priority"]: r for r in json.loads(result.stdout)}
    assert rows["default"]["depth"] == 5
    assert rows["default"]["oldest_age_seconds"] > 3600  # dead at 2026-01-01
    assert rows["critical"]["depth"] == 0
    table = invoke(["dlq", "ls"], cli_env(jf_config))
    assert "default" in table.stdout


def test_native_redrive_on_the_embedded_aws_says_not_supported(jf_config, caplog):
    result = invoke(["dlq", "redrive", "default", "--native"], cli_env(jf_config))
    assert result.exit_code == 4
    assert "not supported by this endpoint" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # ... and the embedded AWS's own log (what `jf dev` shows) has no traceback of moto's for it.
    told = [r for r in caplog.records if r.name == "werkzeug" and "NotImplementedError" in r.getMessage()]
    assert not told, caplog.text[-2000:]
    tasks = invoke(["dlq", "tasks", "default"], cli_env(jf_config))
    assert tasks.exit_code == 4


def _stubbed(jf_config):
    import boto3

    client = boto3.client("sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    letters = DeadLetters(jf_config, client)
    dlq_arn = "arn:aws:sqs:us-east-1:123456789012:" + jf_config.endpoints("default").dlq_name
    letters._arns[jf_config.endpoints("default").dlq_url] = dlq_arn
    return client, letters, dlq_arn


def test_native_redrive_starts_a_message_move_task(jf_config):
    client, letters, dlq_arn = _stubbed(jf_config)
    with Stubber(client) as stub:
        stub.add_response(
            "start_message_move_task",
            {"TaskHandle": "handle-1"},
            {"SourceArn": dlq_arn, "MaxNumberOfMessagesPerSecond": 50},
        )
        stub.add_response(
            "list_message_move_tasks",
            {"Results": [{"Status": "RUNNING", "ApproximateNumberOfMessagesMoved": 3, "SourceArn": dlq_arn}]},
            {"SourceArn": dlq_arn, "MaxResults": 10},
        )
        assert letters.start_native_redrive("default", rate=50) == "handle-1"
        assert letters.native_tasks("default")[0]["Status"] == "RUNNING"
        stub.assert_no_pending_responses()


def test_native_redrive_errors(jf_config):
    client, letters, _ = _stubbed(jf_config)
    with Stubber(client) as stub:
        stub.add_client_error("start_message_move_task", service_error_code="500", http_status_code=500)
        stub.add_client_error(
            "start_message_move_task", service_error_code="InvalidParameterValue", http_status_code=400
        )
        with pytest.raises(EndpointNotSupportedError, match="not supported by this endpoint"):
            letters.start_native_redrive("default")
        with pytest.raises(DeadLetterError, match="InvalidParameterValue"):
            letters.start_native_redrive("default")
