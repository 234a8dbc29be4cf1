"""The consumer's flow-control gates, run after the payload is loaded and before the job runs.

In order: expiry (no I/O), debounce (one read, only for debounced enqueues), the job's concurrency
and rate limits (only for jobs that declare them), then the cancel check, which claims the start of
the run and so comes last. The first gate that does not say "go on" decides.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import TYPE_CHECKING, Any

from jobframework.flow.expiry import expiry_gate
from jobframework.flow.outcome import NO_RATE_INPUTS, Gate, GateOutcome, RateInputs

if TYPE_CHECKING:
    from jobframework.envelope import Envelope
    from jobframework.flow.cancel import CancelGate
    from jobframework.flow.limits import LimitGate
    from jobframework.jobs import Job
    from jobframework.state import StateStore

log = logging.getLogger(__name__)


class FlowGates:
    """The gates of one consumer.

    Args:
        state: the state table (``None``: only the gates that need no table, i.e. expiry, run).
        runner_table: the consumer's idempotency table (the cancel gate's, see
            :class:`~jobframework.flow.cancel.CancelGate`).
    """

    def __init__(self, state: StateStore | None, runner_table: str | None = None) -> None:
        self.state = state
        self.gates: list[Gate] = [expiry_gate]
        self.limits: LimitGate | None = None
        self.cancel: CancelGate | None = None
        if state is not None:
            from jobframework.flow.cancel import CancelGate
            from jobframework.flow.debounce import DebounceGate
            from jobframework.flow.limits import LimitGate

            self.limits = LimitGate(state)
            self.cancel = CancelGate(state, runner_table)
            self.gates += [DebounceGate(state), self.limits, self.cancel]

    def check(
        self,
        env: Envelope,
        job: Job[Any],
        payload: Any,
        attempt: int,
        now: float,
        *,
        rate: RateInputs = NO_RATE_INPUTS,
        claimant: str = "",
    ) -> GateOutcome | None:
        """The first gate's verdict that is not "go on", or ``None`` to run the job (``rate``: what
        the limits need to know of the record besides its job; ``claimant``: the delivery, whose start
        claim the cancel gate writes)."""
        for gate in self.gates:
            verdict: GateOutcome | None
            if gate is self.limits:
                verdict = self.limits(env, job, payload, attempt, now, rate=rate)
            elif gate is self.cancel:
                verdict = self.cancel(env, job, payload, attempt, now, claimant=claimant)
            else:
                verdict = gate(env, job, payload, attempt, now)
            if verdict is not None:
                return verdict
        return None


_by_consumer: weakref.WeakKeyDictionary[Any, FlowGates] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def flow_gates(consumer: Any) -> FlowGates:
    """The gates of ``consumer`` (made on first use from its state table); what their limits take is
    freed by :func:`release_lease`."""
    gates = _by_consumer.get(consumer)
    if gates is None:
        with _lock:
            gates = _by_consumer.get(consumer)
            if gates is None:
                runner = consumer.idempotency
                gates = FlowGates(consumer.state, runner.table if runner is not None else None)
                _by_consumer[consumer] = gates
    return gates


def release_lease(consumer: Any, holder: str) -> None:
    """Free the concurrency lease that ``holder`` (a delivery: :func:`~jobframework.gates.lease_holder`)
    holds in ``consumer``'s process, as soon as its run ended, a later gate stopped it, or its admission
    failed (not when its batch settles: a record of the same cap may be waiting here for the lease,
    :mod:`jobframework.flow.local_leases`). Nothing when it holds none."""
    gates = _by_consumer.get(consumer)
    if gates is not None and gates.limits is not None:
        gates.limits.release(holder)
