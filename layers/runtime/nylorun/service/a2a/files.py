"""A caller's inbound files: checked and kept for the write that takes them, marked refused when it refuses."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from nylorun.protocol.errors import A2AError, UnsupportedOperationError
from nylorun.protocol.models import Message
from nylorun.service.a2a.base import ServiceBase
from nylorun.service.a2a.caller import Caller


class InboundFiles(ServiceBase):
    @contextmanager
    def _inbound_files(self, caller: Caller, context_id: str, message: Message) -> Iterator[Message]:
        """Files in a caller's message: checked (size, media type, url host) and `raw` ones kept in the
        bucket, so history holds a reference rather than the bytes. The body of the `with` writes the request;
        when it refuses it (a busy context, say: known only by that write), the stored files are marked refused."""
        has_files = any(p.raw is not None or p.url is not None for p in message.parts)
        if not has_files:
            yield message
            return
        agent = self._registry.get(caller.agent)
        modes = agent.input_modes if agent else ["text/plain"]
        if self._files is None:
            raise UnsupportedOperationError("This Runtime takes no files (it has no file store)")
        stored = self._files.accept_inbound(caller.owner, context_id, message, modes)
        try:
            yield stored
        except A2AError:  # a refusal; an AWS error may come after the write took the files, so those stay
            self._refused_files(stored)
            raise

    def _refused_files(self, message: Message) -> None:
        # docs/writing/files.md: a refused request keeps nothing: the bucket's lifecycle expires files marked
        # refused.
        if self._files is not None:
            self._files.refuse_inbound(message)
