"""The composition root: settings → AWS clients → adapters → service, runner and app.

Made once per cold start by each Lambda handler, and once by `nylorun serve`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from nylorun.adapters.dynamodb import DynamoTaskStore, decode_change, decode_expiry
from nylorun.adapters.s3 import S3FileStore
from nylorun.adapters.sqs import SqsContextQueue, SqsDeadLetters, SqsPushQueue
from nylorun.adapters.stepfunctions import StepFunctionsOrchestrator
from nylorun.adapters.webhooks import WebhookSender
from nylorun.domain.ids import use_runtime_key
from nylorun.engine.agent import AgentRegistry
from nylorun.engine.files import FileService
from nylorun.ports import Sealer, SigningSecrets
from nylorun.service.a2a import A2AService
from nylorun.service.scheduler import TurnScheduler
from nylorun.service.signing import PushSigningKeys
from nylorun.settings import Settings

if TYPE_CHECKING:  # each imported where it is built: the api function builds none of them
    from nylorun.adapters.a2a_client import A2aClient
    from nylorun.adapters.eventbridge import EventBridgeBus
    from nylorun.engine.connections import ConnectionDeps
    from nylorun.engine.delegation import DelegationDeps
    from nylorun.engine.runner import TurnRunner
    from nylorun.service.connections import ConnectionFlow
    from nylorun.service.delegation import DelegationCallbacks
    from nylorun.service.operator import OperatorService
    from nylorun.service.publish import EventPublisher
    from nylorun.service.push import PushService
    from nylorun.service.retention import RetentionService

# Standard retry mode with a few attempts: throttling is retried by the SDK, not by our code.
_BOTO = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=30)


class LazyClient:
    """A boto3 client made on its first call. Every function builds its adapters at cold start, but most
    requests use one or two AWS services (a GetTask only DynamoDB); making a client loads botocore's service
    model, so each is made when first used."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The boto3 client itself (made now if it was not yet)."""
        if self._client is None:
            self._client = self._make()
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def forget(self) -> None:
        """Drop the client (its pooled connections, the credentials it resolved): the next call makes a new one."""
        self._client = None


@dataclass
class Runtime:
    settings: Settings
    registry: AgentRegistry
    # What init made that a restored copy must make again (after_restore): clients and cached secrets.
    _remade: list[Any] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        # Settings naming no key (a test's, a library user's) keep the process's: one process, one key.
        if self.settings.runtime_key_arn or self.settings.runtime_key:
            use_runtime_key(self._runtime_key)  # read when a subject is first keyed, not at every cold start

    def _runtime_key(self) -> str:
        if self.settings.runtime_key_arn:
            from nylorun.adapters.secrets import runtime_key

            return runtime_key(self.client("secretsmanager"), self.settings.runtime_key_arn)
        return self.settings.runtime_key or ""

    def client(self, name: str) -> Any:
        # S3: SigV4 presigned URLs (X-Amz-Expires), which every region takes.
        config = _BOTO.merge(Config(signature_version="s3v4")) if name == "s3" else _BOTO
        lazy = LazyClient(lambda: boto3.client(name, config=config))
        self._remade.append(lazy)
        return lazy

    def after_restore(self) -> None:
        """SnapStart (nylorun.snapshot): each copy restored from one snapshot gets its own random state, AWS
        clients and secrets, none shared with another copy or older than the restore."""
        # `random` jitters retries (DynamoDB, push): copies with one state would retry in step.
        random.seed()
        # Connections open in the snapshot are gone after a restore, and the credentials a client resolved
        # may have expired: https://docs.aws.amazon.com/lambda/latest/dg/snapstart-uniqueness.html
        for remade in self._remade:
            remade.forget()
        if self.settings.runtime_key_arn or self.settings.runtime_key:
            use_runtime_key(self._runtime_key)  # read again on first use, as at a cold start

    @cached_property
    def sealer(self) -> Sealer | None:
        """Push credentials and callback tokens at rest: sealed with the stack's KMS key when there is one."""
        if not self.settings.kms_key_id:
            return None
        from nylorun.adapters.kms import KmsSealer

        return KmsSealer(self.client("kms"), self.settings.kms_key_id)

    @cached_property
    def store(self) -> DynamoTaskStore:
        settings = self.settings
        return DynamoTaskStore(
            self.client("dynamodb"), settings.table_name, settings.max_task_bytes, sealer=self.sealer,
            quotas=settings.quotas, retention_seconds=settings.retention,
        )

    @cached_property
    def publisher(self) -> EventPublisher:
        """The change stream's records → Runtime events on the bus, and the pushed ones on the push queue."""
        from nylorun.service.publish import EventPublisher

        push_queue = self.push_queue if self.settings.push_queue_url else None
        return EventPublisher(self.store, self.bus, decode_change, push_queue)

    @cached_property
    def retention(self) -> RetentionService:
        """The stream's REMOVE of an expired task → its files and items removed
        (docs/operate.md#data-retention)."""
        from nylorun.service.retention import RetentionService

        return RetentionService(self.store, self.files, decode_expiry)

    @cached_property
    def orchestrator(self) -> StepFunctionsOrchestrator:
        return StepFunctionsOrchestrator(
            self.client("stepfunctions"),
            self.settings.state_machine_arn,
            self.settings.interaction_timeout_seconds,
            self.settings.uncertainty_timeout_seconds,
            self.settings.delegation_poll_seconds,
        )

    @cached_property
    def bus(self) -> EventBridgeBus:
        from nylorun.adapters.eventbridge import EventBridgeBus

        return EventBridgeBus(self.client("events"), self.settings.event_bus_name)

    @cached_property
    def queue(self) -> SqsContextQueue:
        return SqsContextQueue(self.client("sqs"), self.settings.context_queue_url)

    @cached_property
    def scheduler(self) -> TurnScheduler:
        return TurnScheduler(self.store, self.orchestrator, self.queue)

    @cached_property
    def http(self) -> WebhookSender:
        """Outbound HTTP to callers' URLs (push and url files), with the SSRF checks."""
        return WebhookSender(
            timeout_seconds=self.settings.push_timeout_seconds,
            allow_loopback=self.settings.push_allow_loopback,
            private_hosts=frozenset(self.settings.push_private_hosts),
        )

    @cached_property
    def files(self) -> FileService | None:
        if not self.settings.files_bucket:
            return None
        return FileService(S3FileStore(self.client("s3"), self.settings.files_bucket), self.settings, self.http)

    @cached_property
    def service(self) -> A2AService:
        return A2AService(
            self.store, self.orchestrator, self.registry, self.settings, self.scheduler, files=self.files,
            delegations=self.delegations, connections=self.connection_flow,
        )

    @cached_property
    def runner(self) -> TurnRunner:
        from nylorun.engine.runner import TurnRunner

        return TurnRunner(
            self.store, self.registry, self.orchestrator, on_ended=self.scheduler.ended, files=self.files,
            strict_components=self.settings.development, delegation=self.delegation, connections=self.connections,
        )

    @cached_property
    def delegates(self) -> A2aClient:
        """The A2A client delegations speak through (docs/writing/delegation.md)."""
        from nylorun.adapters.a2a_client import A2aClient

        return A2aClient(timeout_seconds=self.settings.push_timeout_seconds)

    @cached_property
    def delegation(self) -> DelegationDeps:
        from nylorun.engine.delegation import DelegationDeps

        settings = self.settings
        return DelegationDeps(
            client=self.delegates,
            sealer=self.sealer,
            callback_base=settings.delegation_callback_url or settings.public_base_url,
            timeout_seconds=settings.interaction_timeout_seconds,
        )

    @cached_property
    def delegations(self) -> DelegationCallbacks:
        """The delegates' callbacks and the cancel of a delegating task's delegates."""
        from nylorun.service.delegation import DelegationCallbacks

        return DelegationCallbacks(
            self.store, self.orchestrator, lambda: self.delegates, self.sealer, self.store,
            answer=lambda *answer: self.service._answer(*answer),
        )

    @cached_property
    def connections(self) -> ConnectionDeps | None:
        """docs/writing/connections.md: the providers the stack declares, their tokens' store, and the OAuth
        client (Authlib, imported when a connection is first used); None when it declares none. An Agent that
        names a provider the stack does not declare stops the Runtime here, at load time."""
        from nylorun.engine.connections import ConnectionDeps, check_declared

        settings = self.settings
        providers = {provider.name: provider for provider in settings.connection_providers}
        check_declared([a for n in self.registry.names() if (a := self.registry.get(n))], providers)
        if not providers:
            return None
        from nylorun.adapters.dynamodb.connections import DynamoConnectionStore
        from nylorun.adapters.oauth import AuthlibOAuth

        secret_of: Callable[[str], str | None] = lambda name: None
        if settings.connection_secrets_arn:
            from nylorun.adapters.secrets import connection_secrets

            secret_of = connection_secrets(self.client("secretsmanager"), settings.connection_secrets_arn)
        return ConnectionDeps(
            store=DynamoConnectionStore(self.client("dynamodb"), settings.table_name),
            oauth=AuthlibOAuth(secret_of, timeout_seconds=settings.push_timeout_seconds),
            providers=providers,
            sealer=self.sealer,
            base_url=settings.public_base_url or settings.delegation_callback_url or "",
        )

    @cached_property
    def connection_flow(self) -> ConnectionFlow | None:
        """The consent flow's pages and a caller's connections (api/connections.py)."""
        if self.connections is None:
            return None
        from nylorun.service.connections import ConnectionFlow

        return ConnectionFlow(self.store, self.connections, lambda *answer: self.service._answer(*answer))

    @cached_property
    def operators(self) -> OperatorService:
        """What `nylorun admin` does to tasks waiting for an operator (docs/operate.md)."""
        from nylorun.service.operator import OperatorService

        return OperatorService(self.store, self.orchestrator, self.scheduler)

    @cached_property
    def push_queue(self) -> SqsPushQueue:
        return SqsPushQueue(self.client("sqs"), self.settings.push_queue_url, self.settings.push_dlq_url)

    @cached_property
    def dead_letters(self) -> SqsDeadLetters:
        """The Runtime's dead-letter queues (`nylorun admin dlq`/`redrive`; no function reads them)."""
        settings = self.settings
        return SqsDeadLetters(
            self.client("sqs"),
            dlqs={
                "context": settings.context_dlq_url,
                "push": settings.push_dlq_url,
                "publish": settings.publish_dlq_url,
            },
            sources={"context": settings.context_queue_url, "push": settings.push_queue_url},
            clock=time.time,
        )

    def push_secrets(self) -> SigningSecrets:
        """The signing secret(s): from Secrets Manager when deployed, else from settings. Space-separated
        values all sign (put the new secret beside the old one while receivers move over). Deployed, the value
        is read through Powertools Parameters for a delivery and reused for `push_secret_max_age_seconds`
        (5 minutes by default), so a rotation reaches every warm push function within that time."""
        if self.settings.push_secret_arn:
            from nylorun.adapters.secrets import SecretsManagerSigningSecrets

            source = SecretsManagerSigningSecrets(
                self.client("secretsmanager"), self.settings.push_secret_arn, self.settings.push_secret_max_age_seconds
            )
            self._remade.append(source)
            return source
        secrets = (self.settings.push_secret or "").split()
        return lambda: secrets

    @cached_property
    def push(self) -> PushService:
        from nylorun.service.push import PushService

        return PushService(
            self.store, self.http, self.push_queue, self.settings, self.push_secrets(), files=self.files,
            sealer=self.sealer,
        )

    @cached_property
    def signing_keys(self) -> PushSigningKeys | None:
        """Each subject's push signing keys, for the api's push-signing-secrets; None with push off."""
        if not self.settings.push_enabled:
            return None
        return PushSigningKeys(self.push_secrets(), self.settings.push_signing)

    def app(self) -> Any:
        from nylorun.api.app import create_app
        from nylorun.api.auth import Authenticator

        return create_app(
            self.service, self.registry, self.settings, Authenticator(self.settings), signing=self.signing_keys,
            delegations=self.delegations, connections=self.connection_flow,
        )


def build_runtime(settings: Settings | None = None) -> Runtime:
    return Runtime(settings=settings or Settings.from_env(), registry=AgentRegistry.from_env())
