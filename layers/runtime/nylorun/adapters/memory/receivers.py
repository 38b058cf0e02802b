"""The push receivers' breakers and each subject's delivery-time budget in one process's memory (the DynamoDB store
keeps them as items: adapters/dynamodb/receivers.py)."""

from __future__ import annotations

from dataclasses import replace

from nylorun.adapters.memory.state import State
from nylorun.ports import ReceiverState


class Receivers(State):
    def receiver_state(self, receiver: str) -> ReceiverState | None:
        with self._lock:
            return self._receivers.get(receiver)

    def receiver_failed(self, receiver: str, expires_at: int) -> int:
        with self._lock:
            state = self._receivers.get(receiver) or ReceiverState()
            self._receivers[receiver] = replace(state, failures=state.failures + 1)
            return state.failures + 1

    def open_receiver(self, receiver: str, until: float, expires_at: int) -> None:
        with self._lock:
            state = self._receivers.get(receiver) or ReceiverState()
            self._receivers[receiver] = replace(state, open_until=max(state.open_until, until))
            self._probes.pop(receiver, None)

    def claim_probe(self, receiver: str, now: float, until: float) -> bool:
        with self._lock:
            if self._probes.get(receiver, 0.0) > now:
                return False
            self._probes[receiver] = until
            return True

    def receiver_answered(self, receiver: str) -> None:
        with self._lock:
            self._receivers.pop(receiver, None)
            self._probes.pop(receiver, None)

    def failed_attempts(self, delivery: str) -> int:
        with self._lock:
            return self._attempts.get(delivery, 0)

    def attempt_failed(self, delivery: str, expires_at: int) -> int:
        with self._lock:
            self._attempts[delivery] = self._attempts.get(delivery, 0) + 1
            return self._attempts[delivery]

    def reserve_budget(self, owner: str, window: int, seconds: float, budget: float, expires_at: int) -> bool:
        with self._lock:
            reserved = self._budgets.get((owner, window), 0.0)
            if reserved + seconds > budget:
                return False
            self._budgets[(owner, window)] = reserved + seconds
            return True

    def refund_budget(self, owner: str, window: int, seconds: float, expires_at: int) -> None:
        with self._lock:
            self._budgets[(owner, window)] = self._budgets.get((owner, window), 0.0) - seconds
