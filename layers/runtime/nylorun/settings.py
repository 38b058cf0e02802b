"""Runtime settings, read from the environment once per cold start (one model, validated)."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nylorun.domain.connections import Provider
from nylorun.domain.quotas import Quotas
from nylorun.domain.signing import PushSigning
from nylorun.limits import (
    CALLER_HEADROOM,
    DEFAULT_MAX_TASK_BYTES,
    DEFAULT_RETENTION_SECONDS,
    MAX_REQUEST_BYTES,
    MAX_STORED_JSON_BYTES,
)
from nylorun.observability import logger

AuthMode = Literal["jwt", "dev", "none"]


class Settings(BaseModel):
    # A refused value is never echoed into the error (Lambda logs it): dev tokens and push secrets are secrets.
    model_config = ConfigDict(hide_input_in_errors=True)

    table_name: str = "nylorun-tasks"
    state_machine_arn: str = ""
    event_bus_name: str = "nylorun"
    context_queue_url: str = ""
    context_dlq_url: str = ""  # where queued turns go after their retries (read by `nylorun admin dlq` only)
    # How long a queued turn's message stays out of sight while its context is busy (the backstop's pace;
    # the ending turn starts the next one directly).
    dispatch_retry_seconds: int = Field(default=60, ge=0, le=43_200)
    # Profile v2: a blocking SendMessage waits up to `a2aWaitMs`, 5 minutes by default.
    a2a_wait_ms: int = Field(default=300_000, ge=0, le=900_000)
    public_base_url: str | None = None
    auth: AuthMode = "jwt"
    # Set by Lambda (AWS_LAMBDA_FUNCTION_NAME) and by `sam local` (AWS_SAM_LOCAL=true, beside the former): together
    # they tell a deployed function from sam local's container and from `nylorun serve` (neither).
    lambda_function_name: str | None = None
    sam_local: bool = False
    # `--auth dev`: "token=subject,token2=subject2". Tokens are secrets: never logged.
    dev_tokens: dict[str, str] = Field(default_factory=dict, repr=False)
    # Standard Webhooks secret(s), space-separated while rotating ("whsec_new whsec_old"): all of them sign.
    push_secret: str | None = Field(default=None, repr=False)
    push_secret_arn: str | None = None  # deployed: the secret lives in Secrets Manager
    # The KMS key that seals push credentials and callback tokens at rest (template.yaml StackKey); empty: stored as
    # they are (a Runtime without KMS).
    kms_key_id: str = ""
    # How long the push function reuses the value it read from Secrets Manager (Powertools Parameters' max age): a
    # rotated value signs every warm instance's deliveries at most this long after it became current. 0: read it
    # for every delivery.
    push_secret_max_age_seconds: int = Field(default=300, ge=0)
    # Each subject's deliveries are signed with a key derived from the push secret and the subject
    # (nylorun.domain.signing); "shared" signs every delivery with the push secret itself: single-tenant only
    # (docs/security.md).
    push_signing: PushSigning = "per-subject"
    # The Runtime's key for keyed digests (a subject's in item keys, S3 keys and task ids; page-token
    # MACs). Item keys derive from it, so it never rotates: a new value orphans every stored task. Deployed, a
    # Secrets Manager secret (RuntimeKey) read once per cold start; locally a value per run (`nylorun serve`).
    # See docs/security.md, "Subjects are keyed, not hashed".
    runtime_key: str | None = Field(default=None, repr=False)
    runtime_key_arn: str | None = None
    push_queue_url: str = ""
    push_dlq_url: str = ""
    # A dead-letter queue no function reads, listed by `nylorun admin dlq`: table-change batches the publish function
    # could not send (Lambda's).
    publish_dlq_url: str = ""
    # The overall deadline of one delivery (connect + send + read; and of one `url` file fetch). A
    # push batch starts a delivery only while its function has this long left (the push function's Timeout is 60).
    push_timeout_seconds: int = Field(default=10, ge=1, le=30)
    # Fair delivery workers (docs/architecture.md#fair-push-delivery). A delivery's first attempt has a
    # shorter deadline: most receivers answer within it, and one that never answers holds its worker that much
    # less.
    push_first_timeout_seconds: int = Field(default=5, ge=1, le=30)
    # The push function's configured concurrency (deployed: the template's PushMaxConcurrency, the queue's
    # MaximumConcurrency): its capacity is this × 60 s of delivery time a minute.
    push_concurrency: int = Field(default=20, ge=1, le=1000)
    # The percent of that capacity one subject's attempts may hold in any minute (template PushSubjectShare, 1-100):
    # 10 keeps the 1/10 bound, 100 opts out (a stack with one caller). A window's budget is never under one longest
    # deadline, so every delivery can be attempted: below 4 push instances at 10 %, that is more than the share.
    push_subject_share: int = Field(default=10, ge=1, le=100)
    # A subject's receiver (its URL's origin) that failed this many times in a row (no answer, 429, 5xx) is parked:
    # its deliveries wait without an attempt, first `push_breaker_open_seconds`, doubling to `push_retry_max_seconds`;
    # then one probe attempt at a time. Any answer closes it.
    push_breaker_failures: int = Field(default=3, ge=1)
    push_breaker_open_seconds: int = Field(default=30, ge=1)
    push_retry_base_seconds: int = Field(default=30, ge=1)
    push_retry_max_seconds: int = Field(default=3600, ge=1)
    push_max_age_seconds: int = Field(default=24 * 3600, ge=1)  # Profile v2: retries last up to 24 hours
    # Deliveries one fan-out step queues before the event goes back to the queue (other tasks' deliveries take
    # their turn in between: docs/architecture.md, "Fair push delivery"). 10: one SendMessageBatch.
    push_fan_out_step: int = Field(default=10, ge=1, le=1000)
    # Deliveries to loopback addresses (local Runtime: the TCK's receiver runs there). Off when deployed.
    push_allow_loopback: bool = False
    # Host names allowed to resolve to private addresses (a receiver inside your VPC, say).
    push_private_hosts: list[str] = Field(default_factory=list)
    # Hosts a push config URL may name ("*" = any public host). http:// only to `push_http_hosts`.
    push_allowed_hosts: list[str] = Field(default_factory=lambda: ["*"])
    push_http_hosts: list[str] = Field(default_factory=list)
    # files/v1: the bucket, size limits in and out, and how long a presigned download URL lives.
    files_bucket: str = ""
    max_file_bytes_in: int = Field(default=10 * 1024 * 1024, ge=1)
    max_file_bytes_out: int = Field(default=100 * 1024 * 1024, ge=1)
    file_url_expiry_seconds: int = Field(default=3600, ge=1, le=7 * 24 * 3600)
    # Which hosts a caller's `url` file part may name (fetched with the same SSRF checks as push).
    fetch_allowed_hosts: list[str] = Field(default_factory=lambda: ["*"])
    fetch_http_hosts: list[str] = Field(default_factory=list)
    # Web pages (their `Origin`, e.g. "https://app.example") whose scripts may call the JSON-RPC endpoint. A browser
    # sends Origin on every cross-site POST; any other is refused, so a page cannot drive a Runtime on loopback (DNS
    # rebinding gets past the Content-Type rule, as the page is then "same-origin"). Callers that are not browsers
    # send no Origin.
    allowed_origins: list[str] = Field(default_factory=list)
    # How many `url` file parts one message may carry (more: -32602, nothing written), and what the
    # files fetched for one message may add up to (more: the turn fails naming the file). Each fetch has the
    # same overall deadline as a push delivery (`push_timeout_seconds`: connect + send + read). See docs/limits.md.
    max_url_parts: int = Field(default=20, ge=0)
    max_url_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    # A request body (nylorun.limits.MAX_REQUEST_BYTES: 1 MiB), refused from its length before it is parsed. Raising
    # it admits nothing more (a message and its metadata are capped as stored) and only makes refusals dearer.
    max_request_bytes: int = Field(default=MAX_REQUEST_BYTES, ge=1024)
    # What one task's history and artifacts may hold (nylorun.limits): at least one largest message and the
    # room kept for the agent; at most 4 MiB, so a whole task with its status and metadata is one answer
    # under 5 MiB (Lambda: 6 MB response payload).
    max_task_bytes: int = Field(
        default=DEFAULT_MAX_TASK_BYTES, ge=MAX_STORED_JSON_BYTES + CALLER_HEADROOM, le=DEFAULT_MAX_TASK_BYTES
    )
    # Per-subject quotas (docs/security.md#quotas; nylorun.domain.quotas): open turns (running, waiting for a
    # person, or queued) per context and per subject, push configs per task and per subject (of its open tasks).
    max_turns_per_context: int = Field(default=Quotas.turns_per_context, ge=1)
    max_turns_per_subject: int = Field(default=Quotas.turns_per_subject, ge=1)
    max_push_configs_per_task: int = Field(default=Quotas.push_configs_per_task, ge=1)
    max_push_configs_per_subject: int = Field(default=Quotas.push_configs_per_subject, ge=1)
    # Retention (docs/operate.md#data-retention): a task and everything of it (history, artifacts, journal,
    # push configs, its files) expire this long after it ends. Deployed: the template's RetentionDays (its S3
    # lifecycle is in days too); `retention_seconds`, when set, overrides it (the local Runtime's tests shrink
    # it to seconds).
    retention_days: int = Field(default=DEFAULT_RETENTION_SECONDS // (24 * 3600), ge=1, le=3653)
    retention_seconds: int | None = Field(default=None, ge=1)
    # How long a turn waits for a person's answer before the task fails (7 days by default).
    interaction_timeout_seconds: int = Field(default=7 * 24 * 3600, ge=1)
    # How long a task whose step lost its outcome waits for an operator (`nylorun admin resolve`) before
    # it fails saying the outcome is unknown, and its context moves on (24 hours by default; template.yaml
    # UncertaintyTimeoutSeconds bounds the deployed value; docs/operate.md, "Lost outcomes").
    uncertainty_timeout_seconds: int = Field(default=24 * 3600, ge=1)
    # A turn waiting for a delegate's task looks at it (GetTask) this often when no callback wakes it
    # sooner; the delegate gets `interaction_timeout_seconds` in all (then its task is canceled). The callback's
    # base URL (this Runtime's public URL; deployed, PublicBaseUrl): unset, delegations only poll
    # (docs/writing/delegation.md).
    delegation_poll_seconds: int = Field(default=300, ge=1, le=24 * 3600)
    delegation_callback_url: str | None = None
    # The subjects that may act on behalf of their own callers here (nylorun.domain.behalf,
    # docs/security.md#delegation-on-behalf-of-each-caller): from them the `Nylorun-On-Behalf-Of` header is
    # honoured; from any other subject it is ignored.
    delegating_subjects: list[str] = Field(default_factory=list)
    # nylorun.models (docs/writing/model-agents.md): the Bedrock model id (or inference profile id) model-backed
    # Agents call, "scripted" for the local stand-in (`nylorun serve --model scripted`; refused on Lambda), empty:
    # none configured. An optional Bedrock guardrail, "identifier:version". Prices per million tokens override or
    # add to nylorun.models.prices' table: JSON {"model id": {"input": 0.8, "output": 4.0}}.
    # docs/writing/connections.md: the OAuth 2.0 providers Agents may ask a person to connect (a JSON list of
    # domain/connections.py Provider), and deployed, the secret holding their client secrets ({"name": "secret"}).
    connection_providers: list[Provider] = Field(default_factory=list)
    connection_secrets_arn: str | None = None
    model: str = ""
    model_guardrail: str = ""
    model_prices: dict[str, dict[str, float]] = Field(default_factory=dict)
    documentation_url: str = "https://docs.nylorun.com/a2a/profile/v2"
    icon_url: str = "https://docs.nylorun.com/icon.png"
    provider_organization: str = "Nylorun"
    provider_url: str = "https://docs.nylorun.com"
    runtime_version: str = "0.1.0"

    @field_validator(
        "push_allowed_hosts", "push_http_hosts", "push_private_hosts", "fetch_allowed_hosts", "fetch_http_hosts",
        "allowed_origins", mode="before",
    )
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [host.strip().lower() for host in value.split(",") if host.strip()]
        return value

    @field_validator("delegating_subjects", mode="before")
    @classmethod
    def _subjects(cls, value: object) -> object:
        if isinstance(value, str):  # subjects are case-sensitive: split, never lowered
            return [subject.strip() for subject in value.split(",") if subject.strip()]
        return value

    @field_validator("model_prices", "connection_providers", mode="before")
    @classmethod
    def _json(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("dev_tokens", mode="before")
    @classmethod
    def _pairs(cls, value: object) -> object:
        if isinstance(value, str):
            pairs = (item.split("=", 1) for item in value.split(",") if "=" in item)
            return {token.strip(): subject.strip() for token, subject in pairs}
        return value

    @model_validator(mode="after")
    def _fail_closed(self) -> Settings:
        # Fail closed: on Lambda only API Gateway's JWT authorizer says who calls. `dev` and `none` there
        # would make every caller one subject (or any dev token's), so a deployed function refuses to start with
        # them. `sam local` runs no JWT authorizer: there the local modes stay allowed
        # (docs/deploy.md#test-with-sam-local).
        if self.lambda_function_name and not self.sam_local and self.auth != "jwt":
            raise ValueError(
                f"NYLORUN_AUTH={self.auth} is refused on AWS Lambda (function {self.lambda_function_name}): set "
                "NYLORUN_AUTH=jwt, the template's value. The dev and none modes are for `nylorun serve` and `sam local`."
            )
        if self.lambda_function_name and not self.sam_local and self.model == "scripted":
            # The scripted stand-in answers without a model: never what a deployed Agent's callers should get.
            raise ValueError("NYLORUN_MODEL=scripted is refused on AWS Lambda: set a Bedrock model id (ModelId)")
        if self.lambda_function_name and not (self.runtime_key or self.runtime_key_arn):
            # Without it each cold start would key subjects its own way, and no task would be found again.
            raise ValueError("NYLORUN_RUNTIME_KEY_ARN is not set: the template's RuntimeKey secret keys subjects")
        return self

    @property
    def quotas(self) -> Quotas:
        return Quotas(
            turns_per_context=self.max_turns_per_context,
            turns_per_subject=self.max_turns_per_subject,
            push_configs_per_task=self.max_push_configs_per_task,
            push_configs_per_subject=self.max_push_configs_per_subject,
        )

    @property
    def subject_budget_window(self) -> int:
        """Seconds of one window of a subject's delivery budget: a minute and the longest deadline, so every attempt
        that holds time in a given minute started within one window's span
        (docs/architecture.md#fair-push-delivery)."""
        return 60 + self.push_timeout_seconds

    @property
    def subject_budget(self) -> float:
        """Seconds of delivery time one subject's attempts may hold per window: half its share of a minute's
        capacity (any minute meets at most two windows' attempts), and never under one attempt's longest deadline."""
        half = self.push_subject_share / 100 * self.push_concurrency * 60 / 2
        return max(half, float(self.push_timeout_seconds))

    @property
    def retention(self) -> int:
        """Seconds from a task's end to its expiry."""
        return self.retention_seconds or self.retention_days * 24 * 3600

    @property
    def development(self) -> bool:
        """Running for a developer: `nylorun serve` (no Lambda) or `sam local`, not a deployed function. There an
        agent's invalid component is an error in its code; deployed, the part is dropped (docs/components.md)."""
        return not self.lambda_function_name or self.sam_local

    @property
    def push_enabled(self) -> bool:
        # Profile v2: push configs are served only when the Runtime has a push secret.
        return bool(self.push_secret or self.push_secret_arn)

    @classmethod
    def from_env(cls) -> Settings:
        fields = {
            "table_name": "NYLORUN_TABLE",
            "state_machine_arn": "NYLORUN_STATE_MACHINE_ARN",
            "event_bus_name": "NYLORUN_EVENT_BUS",
            "context_queue_url": "NYLORUN_CONTEXT_QUEUE_URL",
            "context_dlq_url": "NYLORUN_CONTEXT_DLQ_URL",
            "dispatch_retry_seconds": "NYLORUN_DISPATCH_RETRY_SECONDS",
            "a2a_wait_ms": "NYLORUN_A2A_WAIT_MS",
            "public_base_url": "NYLORUN_PUBLIC_BASE_URL",
            "auth": "NYLORUN_AUTH",
            "lambda_function_name": "AWS_LAMBDA_FUNCTION_NAME",
            "sam_local": "AWS_SAM_LOCAL",
            "dev_tokens": "NYLORUN_DEV_TOKENS",
            "push_secret": "NYLORUN_PUSH_SECRET",
            "push_secret_arn": "NYLORUN_PUSH_SECRET_ARN",
            "kms_key_id": "NYLORUN_KMS_KEY",
            "push_secret_max_age_seconds": "NYLORUN_PUSH_SECRET_MAX_AGE_SECONDS",
            "push_signing": "NYLORUN_PUSH_SIGNING",
            "runtime_key": "NYLORUN_RUNTIME_KEY",
            "runtime_key_arn": "NYLORUN_RUNTIME_KEY_ARN",
            "push_queue_url": "NYLORUN_PUSH_QUEUE_URL",
            "push_dlq_url": "NYLORUN_PUSH_DLQ_URL",
            "publish_dlq_url": "NYLORUN_PUBLISH_DLQ_URL",
            "push_timeout_seconds": "NYLORUN_PUSH_TIMEOUT_SECONDS",
            "push_first_timeout_seconds": "NYLORUN_PUSH_FIRST_TIMEOUT_SECONDS",
            "push_concurrency": "NYLORUN_PUSH_CONCURRENCY",
            "push_subject_share": "NYLORUN_PUSH_SUBJECT_SHARE",
            "push_breaker_failures": "NYLORUN_PUSH_BREAKER_FAILURES",
            "push_breaker_open_seconds": "NYLORUN_PUSH_BREAKER_OPEN_SECONDS",
            "push_retry_base_seconds": "NYLORUN_PUSH_RETRY_BASE_SECONDS",
            "push_retry_max_seconds": "NYLORUN_PUSH_RETRY_MAX_SECONDS",
            "push_max_age_seconds": "NYLORUN_PUSH_MAX_AGE_SECONDS",
            "push_fan_out_step": "NYLORUN_PUSH_FAN_OUT_STEP",
            "push_allow_loopback": "NYLORUN_PUSH_ALLOW_LOOPBACK",
            "push_private_hosts": "NYLORUN_PUSH_PRIVATE_HOSTS",
            "files_bucket": "NYLORUN_FILES_BUCKET",
            "max_file_bytes_in": "NYLORUN_MAX_FILE_BYTES_IN",
            "max_file_bytes_out": "NYLORUN_MAX_FILE_BYTES_OUT",
            "file_url_expiry_seconds": "NYLORUN_FILE_URL_EXPIRY_SECONDS",
            "fetch_allowed_hosts": "NYLORUN_FETCH_ALLOWED_HOSTS",
            "fetch_http_hosts": "NYLORUN_FETCH_HTTP_HOSTS",
            "max_url_parts": "NYLORUN_MAX_URL_PARTS",
            "max_url_bytes": "NYLORUN_MAX_URL_BYTES",
            "push_allowed_hosts": "NYLORUN_PUSH_ALLOWED_HOSTS",
            "push_http_hosts": "NYLORUN_PUSH_HTTP_HOSTS",
            "allowed_origins": "NYLORUN_ALLOWED_ORIGINS",
            "max_request_bytes": "NYLORUN_MAX_REQUEST_BYTES",
            "max_task_bytes": "NYLORUN_MAX_TASK_BYTES",
            "interaction_timeout_seconds": "NYLORUN_INTERACTION_TIMEOUT_SECONDS",
            "retention_days": "NYLORUN_RETENTION_DAYS",
            "retention_seconds": "NYLORUN_RETENTION_SECONDS",
            "uncertainty_timeout_seconds": "NYLORUN_UNCERTAINTY_TIMEOUT_SECONDS",
            "delegation_poll_seconds": "NYLORUN_DELEGATION_POLL_SECONDS",
            "delegation_callback_url": "NYLORUN_DELEGATION_CALLBACK_URL",
            "delegating_subjects": "NYLORUN_DELEGATING_SUBJECTS",
            "max_turns_per_context": "NYLORUN_MAX_TURNS_PER_CONTEXT",
            "max_turns_per_subject": "NYLORUN_MAX_TURNS_PER_SUBJECT",
            "max_push_configs_per_task": "NYLORUN_MAX_PUSH_CONFIGS_PER_TASK",
            "max_push_configs_per_subject": "NYLORUN_MAX_PUSH_CONFIGS_PER_SUBJECT",
            "connection_providers": "NYLORUN_CONNECTION_PROVIDERS",
            "connection_secrets_arn": "NYLORUN_CONNECTION_SECRETS_ARN",
            "model": "NYLORUN_MODEL",
            "model_guardrail": "NYLORUN_MODEL_GUARDRAIL",
            "model_prices": "NYLORUN_MODEL_PRICES",
            "documentation_url": "NYLORUN_DOCUMENTATION_URL",
            "icon_url": "NYLORUN_ICON_URL",
        }
        values = {name: os.environ[var] for name, var in fields.items() if os.environ.get(var)}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            # The cold start fails here, so no request is served: say why in one line (the errors hide inputs).
            reasons = [f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()]
            logger.critical("Nylorun refuses to start: " + "; ".join(reasons))
            raise


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
