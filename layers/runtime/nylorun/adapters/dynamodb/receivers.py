"""The push receivers' breakers and each subject's delivery-time budget as items of the task table, shared by every
push function instance: each change is one atomic (conditional) write, so two instances never both take the last of a
budget or a probe; every item carries `expiresAt` (the table's TTL)."""

from __future__ import annotations

from decimal import Decimal

from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.dynamodb.table import Table, aws
from nylorun.ports import ReceiverState


class Receivers:
    _t: Table

    def receiver_state(self, receiver: str) -> ReceiverState | None:
        item = self._t.get(layout.receiver(receiver))
        if item is None:
            return None
        return ReceiverState(failures=int(item.get("failures", 0)), open_until=float(item.get("openUntil", 0)))

    def receiver_failed(self, receiver: str, expires_at: int) -> int:
        return int(self._add(layout.receiver(receiver), "failures", 1, expires_at))

    def failed_attempts(self, delivery: str) -> int:
        item = self._t.get(layout.delivery_attempts(delivery))
        return int(item.get("failed", 0)) if item else 0

    def attempt_failed(self, delivery: str, expires_at: int) -> int:
        return int(self._add(layout.delivery_attempts(delivery), "failed", 1, expires_at))

    def _add(self, key: dict[str, str], name: str, amount: int | Decimal, expires_at: int) -> float:
        """Add `amount` to the item's number `name` (made if absent), in one write; the number now."""
        with aws("update_item"):
            out = self._t.db.update_item(
                TableName=self._t.name, Key=codec.to_item(key),
                UpdateExpression="ADD #n :amount SET expiresAt = :expires", ExpressionAttributeNames={"#n": name},
                ExpressionAttributeValues=codec.to_item({":amount": amount, ":expires": expires_at}),
                ReturnValues="UPDATED_NEW",
            )  # fmt: skip
        return float(codec.from_item(out["Attributes"])[name])

    def open_receiver(self, receiver: str, until: float, expires_at: int) -> None:
        # Racing instances: the later end stands (a failed condition means one as late or later is already set).
        self._t.update(
            layout.receiver(receiver), "SET openUntil = :until, expiresAt = :expires REMOVE probeUntil",
            "attribute_not_exists(openUntil) OR openUntil < :until", {":until": _n(until), ":expires": expires_at},
        )  # fmt: skip

    def claim_probe(self, receiver: str, now: float, until: float) -> bool:
        return self._t.update(
            layout.receiver(receiver), "SET probeUntil = :until",
            "attribute_exists(PK) AND (attribute_not_exists(probeUntil) OR probeUntil < :now)",
            {":until": _n(until), ":now": _n(now)},
        )  # fmt: skip

    def receiver_answered(self, receiver: str) -> None:
        self._t.delete(layout.receiver(receiver))

    def reserve_budget(self, owner: str, window: int, seconds: float, budget: float, expires_at: int) -> bool:
        if seconds > budget:
            return False
        # DynamoDB conditions do no arithmetic: `reserved + seconds <= budget` is `reserved <= budget - seconds`.
        return self._t.update(
            layout.subject_budget(owner, window), "ADD reserved :seconds SET expiresAt = :expires",
            "attribute_not_exists(reserved) OR reserved <= :room",
            {":seconds": _n(seconds), ":room": _n(budget - seconds), ":expires": expires_at},
        )  # fmt: skip

    def refund_budget(self, owner: str, window: int, seconds: float, expires_at: int) -> None:
        self._add(layout.subject_budget(owner, window), "reserved", -_n(seconds), expires_at)


def _n(seconds: float) -> Decimal:
    """Epoch seconds to the millisecond, as DynamoDB numbers take them (boto3 refuses floats)."""
    return Decimal(str(round(seconds, 3)))
