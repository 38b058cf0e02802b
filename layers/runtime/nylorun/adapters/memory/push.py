"""Push configs, their fan-out cursors and their sweep."""

from __future__ import annotations

import time
from collections.abc import Sequence

from nylorun.adapters.dynamodb import codec
from nylorun.adapters.memory.state import State, SubjectEntry
from nylorun.domain.quotas import QuotaExceeded
from nylorun.ports import StoredPushConfig


class PushConfigs(State):
    """Push configs per task, counted against the quotas (docs/security.md#quotas), and the fan-out cursors."""

    def put_push_config(self, task_id: str, config: StoredPushConfig) -> None:
        """Add or replace (same id) a config; a new one counts against its task and, while the task is open, its
        subject (QuotaExceeded over either, nothing written)."""
        item = codec.push_item(task_id, config)
        with self._lock:
            configs = self._push.setdefault(task_id, {})
            task = self._tasks.get(task_id)
            if str(config.config.id) not in configs and task is not None:
                if len(configs) >= self._quotas.push_configs_per_task:
                    raise QuotaExceeded("pushConfigsPerTask", self._quotas.push_configs_per_task)
                if not task.record.state.terminal:
                    subject = self._subjects.setdefault(task.record.owner.subject, SubjectEntry())
                    if subject.push_configs >= self._quotas.push_configs_per_subject:
                        raise QuotaExceeded("pushConfigsPerSubject", self._quotas.push_configs_per_subject)
                    subject.push_configs += 1
            configs[str(config.config.id)] = item

    def get_push_config(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        with self._lock:
            found = self._push.get(task_id, {}).get(config_id)
            return codec.push_config(found) if found else None

    def list_push_configs(self, task_id: str) -> list[StoredPushConfig]:
        with self._lock:
            configs = [codec.push_config(item) for item in self._push.get(task_id, {}).values()]
        return sorted(configs, key=lambda c: (c.created_at, c.config.id or ""))

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        with self._lock:
            removed = self._push.get(task_id, {}).pop(config_id, None)
            task = self._tasks.get(task_id)
            if removed is not None and task is not None and not task.record.state.terminal:
                self._subjects.setdefault(task.record.owner.subject, SubjectEntry()).push_configs -= 1

    def expire_push_configs(self, task_id: str, expires_at: int, config_ids: Sequence[str] | None = None) -> None:
        """Marks the task's configs to expire (DynamoDB's TTL deletes them, and both stores' sweep)."""
        with self._lock:
            for config_id, item in self._push.get(task_id, {}).items():
                if config_ids is None or config_id in config_ids:
                    item["expiresAt"] = expires_at

    def push_configs_after(self, task_id: str, after: str | None, limit: int) -> list[StoredPushConfig]:
        with self._lock:
            ids = sorted(i for i in self._push.get(task_id, {}) if after is None or i > after)[:limit]
            return [codec.push_config(self._push[task_id][i]) for i in ids]

    def fan_out_cursor(self, task_id: str, event_id: str) -> str | None:
        with self._lock:
            return self._fan_out.get((task_id, event_id))

    def set_fan_out_cursor(self, task_id: str, event_id: str, after: str | None, expires_at: int) -> None:
        with self._lock:
            if after is None:
                self._fan_out.pop((task_id, event_id), None)
            else:
                self._fan_out[(task_id, event_id)] = after

    def sweep_push_configs(self) -> int:
        """Remove configs whose task is gone or whose expiry has passed; returns how many."""
        now = int(time.time())
        removed = 0
        with self._lock:
            for task_id, configs in self._push.items():
                for config_id in list(configs):
                    expires_at = configs[config_id].get("expiresAt")
                    if task_id not in self._tasks or (expires_at is not None and expires_at <= now):
                        del configs[config_id]
                        removed += 1
        return removed
