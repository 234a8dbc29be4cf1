"""What `jf dlq redrive` says of letters that will fail the same way again (a trial's unsigned jobs,
dead-lettered `signature`, were told their code or data had to change)."""

from __future__ import annotations

from jobframework.cli.dlq_args import redrive_summary
from jobframework.dlq.redrive import RedriveResult


def test_a_redrive_of_letters_that_fail_again_says_so_and_what_helps_a_signature_letter():
    permanent = RedriveResult(priority="high", dry_run=True, matched=2, by_reason={"permanent": 2})
    summary, note = redrive_summary("high", permanent, dry_run=True, limit=None)
    assert summary.startswith("dry run: would redrive 2")
    # (they were dead-lettered so: "would be" read as a forecast of the redrive)
    assert note is not None and "2 of the letters it would redrive were dead-lettered permanent" in note
    assert "signature" not in note
    unsigned = RedriveResult(priority="high", dry_run=False, moved=3, matched=3, by_reason={"signature": 3})
    _, note = redrive_summary("high", unsigned, dry_run=False, limit=None)
    assert (
        note is not None and "enqueue the job again from a producer with the keys (JF_SIGNING_KEYS)" in note
    )
    fine = RedriveResult(priority="high", dry_run=False, moved=1, matched=1, by_reason={"exhausted": 1})
    assert redrive_summary("high", fine, dry_run=False, limit=None)[1] is None
