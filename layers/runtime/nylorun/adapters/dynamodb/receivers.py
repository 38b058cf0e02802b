"""The push receivers' breakers and each subject's delivery slots as items of the task table, shared by every push
function instance: each change is one conditional write, so two instances never both hold a slot or a probe, and a
retried write changes nothing twice that matters; every item carries `expiresAt` (the table's TTL)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

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
        return self._count(layout.receiver(receiver), "failures", expires_at)

    def failed_attempts(self, delivery: str) -> int:
        item = self._t.get(layout.delivery_attempts(delivery))
        return int(item.get("failed", 0)) if item else 0

    def attempt_failed(self, delivery: str, expires_at: int) -> int:
        return self._count(layout.delivery_attempts(delivery), "failed", expires_at)

    def _count(self, key: dict[str, str], name: str, expires_at: int) -> int:
        """One more in the item's counter `name` (made if absent), in one write; the count now."""
        with aws("update_item"):
            out = self._t.db.update_item(
                TableName=self._t.name, Key=codec.to_item(key),
                UpdateExpression="ADD #n :one SET expiresAt = :expires", ExpressionAttributeNames={"#n": name},
                ExpressionAttributeValues=codec.to_item({":one": 1, ":expires": expires_at}),
                ReturnValues="UPDATED_NEW",
            )  # fmt: skip
        return int(codec.from_item(out["Attributes"])[name])

    def open_receiver(self, receiver: str, until: float, expires_at: int) -> None:
        # Racing instances: the later end stands (a failed condition means one as late or later is already set).
        self._t.update(
            layout.receiver(receiver), "SET openUntil = :until, expiresAt = :expires",
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

    def take_delivery_slot(self, owner: str, slots: int, holder: str, now: float, until: float) -> int | None:
        for slot in range(slots):
            item: dict[str, Any] = {
                **layout.delivery_slot(owner, slot), "holder": holder, "heldUntil": _n(until),
                # A slot whose holder died is free again after `heldUntil`; the item itself goes within a day.
                "expiresAt": int(until) + 24 * 3600,
            }  # fmt: skip
            if self._t.put_if(item, "attribute_not_exists(PK) OR heldUntil < :now", {":now": _n(now)}):
                return slot
        return None

    def free_delivery_slot(self, owner: str, slot: int, holder: str) -> None:
        self._t.delete(layout.delivery_slot(owner, slot), "holder = :holder", {":holder": holder})


def _n(seconds: float) -> Decimal:
    """Epoch seconds to the millisecond, as DynamoDB numbers take them (boto3 refuses floats)."""
    return Decimal(str(round(seconds, 3)))
