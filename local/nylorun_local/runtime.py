"""The whole Runtime on one machine: moto for AWS, the real handlers in-process, the api app under uvicorn.

`nylorun serve` runs it in the foreground; the end-to-end tests start it in a thread on a free port.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from nylorun.api.startup_heap import freeze_startup_heap, thaw_heap
from nylorun.engine.agent import Agent
from nylorun.observability import SERVICE
from nylorun.settings import AuthMode, Settings
from nylorun.wiring import Runtime, build_runtime

from nylorun_local.activity import Activity
from nylorun_local.aws import LocalAws, free_port
from nylorun_local.connections import provider_env
from nylorun_local.header_deadline import HeaderDeadlineProtocol
from nylorun_local.lambda_shim import function_timeout_ms
from nylorun_local.logs import AgentErrors, labelled_as
from nylorun_local.pollers import QueuePoller, StreamPoller
from nylorun_local.private_file import write_private
from nylorun_local.push_processes import PushProcesses
from nylorun_local.stack import LocalStack, add_environments, create_stack, start_functions, stream_filters
from nylorun_local.ttl import TtlSweeper

LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1"]
# Push batches run in this many execution environments at once. Deployed, Lambda runs up to the push event
# source's MaximumConcurrency (template parameter PushMaxConcurrency, 20 by default), one per message group in
# flight; locally a few threads stand in, so one task's 1,000 deliveries do not hold up another subject's
# (docs/architecture.md, "Fair push delivery").
PUSH_ENVIRONMENTS = int(os.environ.get("NYLORUN_LOCAL_PUSH_ENVIRONMENTS", "4"))
# The example Agents (echo, tck, support), served locally unless LocalOptions.examples is False.
EXAMPLE_AGENTS = "nylorun_examples:AGENTS"
ASSISTANT_AGENT = "nylorun_examples.assistant:agent"  # the model-backed example: served only with a model
# NYLORUN_AGENTS as the process got it, before a LocalRuntime set it: a local Runtime serves those Agents too.
_CALLER_AGENTS = os.environ.get("NYLORUN_AGENTS", "")


@dataclass
class LocalOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    auth: AuthMode = "dev"
    dev_tokens: dict[str, str] = field(default_factory=dict)
    push_secret: str | None = None
    push: bool = True  # False: no push secret, so the card says pushNotifications false (Profile v2)
    a2a_wait_ms: int | None = None
    examples: bool = True  # serve the example Agents (EXAMPLE_AGENTS) beside your own
    agents: str | None = None  # your own Agents, "module:attribute,…"; None: those in $NYLORUN_AGENTS
    # The model model-backed Agents call (NYLORUN_MODEL). Locally only "scripted", the stand-in (no AWS here); with
    # the examples it also serves `assistant` (ASSISTANT_AGENT).
    model: str | None = None
    interaction_timeout_seconds: int | None = None
    # How long a lost outcome waits for an operator (None: $NYLORUN_UNCERTAINTY_TIMEOUT_SECONDS, else 24 h).
    uncertainty_timeout_seconds: int | None = None
    allowed_origins: list[str] = field(default_factory=list)  # web pages whose scripts may call (NYLORUN_ALLOWED_ORIGINS)
    # --auth none on an address other than loopback lets anyone who reaches it act as 'anonymous': only when asked for.
    allow_remote_without_auth: bool = False
    connections: str | None = None  # a JSON file of connection providers (docs/writing/connections.md)
    extra_env: dict[str, str] = field(default_factory=dict)
    # How often the local TTL deletes expired items (nylorun_local.ttl; DynamoDB's takes up to days). The environment's
    # NYLORUN_LOCAL_TTL_SECONDS, for a `nylorun serve` whose retention is shrunk
    # (docs/operate.md#data-retention).
    ttl_sweep_seconds: float = field(default_factory=lambda: float(os.environ.get("NYLORUN_LOCAL_TTL_SECONDS") or 60))
    # The push function's environments as this many processes of their own (nylorun_local.push_processes), as Lambda
    # runs them; 0: threads of this process (PUSH_ENVIRONMENTS), which tests can reach into.
    push_processes: int = field(default_factory=lambda: int(os.environ.get("NYLORUN_LOCAL_PUSH_PROCESSES") or 0))


class LocalRuntime:
    def __init__(self, options: LocalOptions) -> None:
        self.options = options
        if options.auth == "none" and options.host not in LOOPBACK_HOSTS and not options.allow_remote_without_auth:
            raise ValueError(
                f"--auth none on --host {options.host} would let anyone who reaches it call as 'anonymous': "
                "serve on 127.0.0.1, use --auth dev, or add --allow-remote-without-auth"
            )
        if options.port == 0:
            options.port = free_port()
        if options.auth == "dev" and not options.dev_tokens:
            options.dev_tokens = {f"dev-{secrets.token_urlsafe(18)}": "dev"}
        if not options.push:
            options.push_secret = None
        elif not options.push_secret:
            options.push_secret = os.environ.get("NYLORUN_PUSH_SECRET") or _new_push_secret()
        # The example `refunds` delegates to `support` as the subject agent:refunds, with a dev token of
        # its own (in its environment, never printed with the callers' tokens).
        self.agent_tokens: dict[str, str] = {}
        if options.auth == "dev" and options.examples:
            self.agent_tokens = {os.environ.get("NYLORUN_REFUNDS_TOKEN") or f"agent-{secrets.token_urlsafe(18)}": "agent:refunds"}
        # Subjects are keyed with the Runtime's key (docs/security.md); one per run (or the caller's), shared by
        # every function.
        self.runtime_key = os.environ.get("NYLORUN_RUNTIME_KEY") or secrets.token_urlsafe(32)
        self.aws = LocalAws()
        self.stack: LocalStack | None = None
        self.runtime: Runtime | None = None
        self._functions: dict[str, Any] = {}  # logical id -> the handler module of its first execution environment
        self.environments: dict[str, list[Any]] = {}  # logical id -> the modules of its environments, where several
        self._pollers: list[StreamPoller | QueuePoller] = []
        self._push_processes: PushProcesses | None = None
        self._state_file: Path | None = None
        self._ttl: TtlSweeper | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._agent_errors = AgentErrors()
        self.payments: Any = None  # the example payments provider, with the examples (nylorun_examples)

    @property
    def base_url(self) -> str:
        return f"http://{self.options.host}:{self.options.port}"

    def agent_url(self, agent: str) -> str:
        return f"{self.base_url}/v1/a2a/agents/{agent}"

    def prepare(self) -> Runtime:
        """Start moto, create the stack from template.yaml, load the functions, build the api app."""
        self.aws.start()
        self.stack = create_stack(self.aws)
        opts = self.options
        env = {
            "NYLORUN_TABLE": self.stack.table_name,
            "NYLORUN_STATE_MACHINE_ARN": self.stack.state_machine_arn,
            "NYLORUN_EVENT_BUS": self.stack.event_bus_name,
            "NYLORUN_CONTEXT_QUEUE_URL": self.stack.context_queue_url,
            "NYLORUN_CONTEXT_DLQ_URL": self.stack.context_dlq_url,
            "NYLORUN_PUSH_QUEUE_URL": self.stack.push_queue_url,
            "NYLORUN_PUSH_DLQ_URL": self.stack.push_dlq_url,
            "NYLORUN_PUBLISH_DLQ_URL": self.stack.publish_dlq_url,
            "NYLORUN_PUSH_ALLOW_LOOPBACK": "true",
            "NYLORUN_FILES_BUCKET": self.stack.files_bucket,
            "NYLORUN_KMS_KEY": self.stack.kms_key_arn,
            "NYLORUN_FETCH_HTTP_HOSTS": ",".join(LOOPBACK_HOSTS),
            "NYLORUN_DISPATCH_RETRY_SECONDS": os.environ.get("NYLORUN_DISPATCH_RETRY_SECONDS", "2"),
            "NYLORUN_AGENTS": agent_refs(opts.examples, opts.agents, model=bool(opts.model)),
            "NYLORUN_MODEL": opts.model or "",
            "NYLORUN_AUTH": opts.auth,
            "NYLORUN_DEV_TOKENS": ",".join(f"{t}={s}" for t, s in {**opts.dev_tokens, **self.agent_tokens}.items()),
            **({"NYLORUN_REFUNDS_TOKEN": next(iter(self.agent_tokens))} if self.agent_tokens else {}),
            # agent:refunds acts for each of its callers at support
            # (docs/security.md#delegation-on-behalf-of-each-caller): a delegating identity.
            "NYLORUN_DELEGATING_SUBJECTS": ",".join(self.agent_tokens.values()),
            "NYLORUN_PUSH_SECRET": opts.push_secret or "",
            "NYLORUN_ALLOWED_ORIGINS": ",".join(opts.allowed_origins),
            "NYLORUN_RUNTIME_KEY": self.runtime_key,
            # Delegates' callbacks reach this Runtime at its own address; a turn waiting for one looks
            # every few seconds when none comes (deployed: DelegationPollSeconds, 5 minutes by default).
            "NYLORUN_DELEGATION_CALLBACK_URL": self.base_url,
            "NYLORUN_DELEGATION_POLL_SECONDS": os.environ.get("NYLORUN_DELEGATION_POLL_SECONDS", "5"),
            # Locally, push receivers on loopback are allowed (the TCK's receiver runs there).
            "NYLORUN_PUSH_HTTP_HOSTS": ",".join(LOOPBACK_HOSTS),
            "POWERTOOLS_SERVICE_NAME": "nylorun",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
            **({"NYLORUN_A2A_WAIT_MS": str(opts.a2a_wait_ms)} if opts.a2a_wait_ms is not None else {}),
            **(
                {"NYLORUN_INTERACTION_TIMEOUT_SECONDS": str(opts.interaction_timeout_seconds)}
                if opts.interaction_timeout_seconds is not None
                else {}
            ),
            **(
                {"NYLORUN_UNCERTAINTY_TIMEOUT_SECONDS": str(uncertainty)}
                if (uncertainty := opts.uncertainty_timeout_seconds or os.environ.get("NYLORUN_UNCERTAINTY_TIMEOUT_SECONDS"))
                else {}
            ),
            **opts.extra_env,
        }
        connections, self.payments = provider_env(self.base_url, opts.connections, opts.examples)
        env.update(connections)
        os.environ.update(env)
        logging.getLogger(SERVICE).addHandler(self._agent_errors)  # Powertools' Logger logs as this one
        self._state_file = write_state_file(self.options.port, self.aws.endpoint, env)
        self._functions = start_functions(self.stack)
        push = self._functions["PushFunction"]
        threads = 0 if opts.push_processes else PUSH_ENVIRONMENTS - 1
        self.environments = {"PushFunction": [push, *add_environments(self.stack, "PushFunction", push, threads)]}
        self.runtime = build_runtime(Settings.from_env())
        # Lambda's event source mappings, with Lambda's semantics (moto's run inline and drop failures).
        names, stream = self.stack.function_names, self.stack.table_stream_arn
        # The sweep's stream mapping takes only the TTL's removals of expired tasks: it sleeps until the local TTL
        # (the only thing that makes them) has removed something, not on every table write.
        expired = Activity()
        self._ttl = TtlSweeper(self.aws, self.stack.table_name, opts.ttl_sweep_seconds, expired).start()
        self._pollers = [
            StreamPoller(self.aws, stream, names["PublishFunction"], filters=stream_filters("PublishFunction")).start(),
            StreamPoller(self.aws, stream, names["SweepFunction"], batch_size=10, filters=stream_filters("SweepFunction"),
                         idle_max=max(opts.ttl_sweep_seconds, 5.0), activity=expired).start(),
            QueuePoller(self.aws, self.stack.context_queue_url, self.stack.function_names["DispatchFunction"]).start(),
        ]
        if opts.push_processes:
            self.push_in_processes(opts.push_processes)
        else:
            self._pollers.append(
                QueuePoller(self.aws, self.stack.push_queue_url, names["PushFunction"],
                            environments=len(self.environments["PushFunction"])).start()
            )  # fmt: skip
        return self.runtime

    def push_in_processes(self, count: int) -> None:
        """From now on the push function's environments are `count` processes of their own (LocalOptions.push_processes
        from the start); its threads, if they ran, take no more batches."""
        assert self.stack is not None, "call prepare() first"
        if self._push_processes is not None:
            return
        name = self.stack.function_names["PushFunction"]
        for poller in [p for p in self._pollers if p.function_name == name]:
            poller.stop()
            self._pollers.remove(poller)
        self._push_processes = PushProcesses(name, function_timeout_ms(name), count).start()

    def add_agent(self, agent: Agent) -> None:
        """Serve one more Agent: the api app (cards) and the turn function (turns) each load a registry."""
        assert self.runtime is not None, "call prepare() first"
        self.runtime.registry.add(agent)
        turn_module = self._functions["TurnFunction"]
        if turn_module.runtime.registry is not self.runtime.registry:
            turn_module.runtime.registry.add(agent)

    def app(self) -> Any:
        assert self.runtime is not None, "call prepare() first"
        return self.runtime.app()

    def _served_app(self) -> Any:
        """The api app as uvicorn serves it: its log lines labelled as the api function's."""
        assert self.stack is not None, "call prepare() first"
        return labelled_as(f"{self.stack.prefix}-ApiFunction", self.app())

    def start_in_thread(self) -> LocalRuntime:
        """For tests: serve on the configured port in a background thread until stop()."""
        self.prepare()
        self._server = uvicorn.Server(self._config("warning"))
        self._thread = threading.Thread(target=self._server.run, name="nylorun-api", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the local Runtime did not start")
            time.sleep(0.02)
        return self

    def serve_forever(self, wrap: Callable[[Any], Any] = lambda app: app) -> None:
        """`wrap` adds to the api app what only `nylorun serve` serves (the console)."""
        uvicorn.Server(self._config("info", wrap)).run()

    def _config(self, log_level: str, wrap: Callable[[Any], Any] = lambda app: app) -> uvicorn.Config:
        # http=HeaderDeadlineProtocol: a connection that does not finish a request head within a few seconds is
        # closed (header_deadline.py); uvicorn's own keep-alive timeout does not cover it.
        config = uvicorn.Config(
            wrap(self._served_app()), host=self.options.host, port=self.options.port, log_level=log_level,
            lifespan="off", http=HeaderDeadlineProtocol,
        )
        freeze_startup_heap()  # moto, the stack, the functions and the app are built (lifespan is off)
        return config

    def paused(self, logical_id: str) -> AbstractContextManager[None]:
        """Keep the poller that invokes this function (e.g. "PushFunction") from invoking it in the block."""
        assert self.stack is not None
        name = self.stack.function_names[logical_id]
        (poller,) = [p for p in self._pollers if p.function_name == name]
        return poller.paused()

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._ttl is not None:
            self._ttl.stop()
        if self.payments is not None:
            self.payments.stop()
        for poller in self._pollers:
            poller.stop()
        if self._push_processes is not None:
            self._push_processes.stop()
        self.aws.stop()
        logging.getLogger(SERVICE).removeHandler(self._agent_errors)
        if self._state_file is not None:
            self._state_file.unlink(missing_ok=True)
        thaw_heap()  # what this Runtime made may now end in reference cycles: let the collector see it


# What `nylorun admin --local PORT` needs to reach this Runtime's stack (moto's endpoint and the resource names),
# never a secret: the push secret, the dev tokens and the Runtime key stay out of it.
_STATE_KEYS = (
    "NYLORUN_TABLE", "NYLORUN_STATE_MACHINE_ARN", "NYLORUN_EVENT_BUS", "NYLORUN_CONTEXT_QUEUE_URL",
    "NYLORUN_CONTEXT_DLQ_URL", "NYLORUN_PUSH_QUEUE_URL", "NYLORUN_PUSH_DLQ_URL", "NYLORUN_PUBLISH_DLQ_URL",
    "NYLORUN_FILES_BUCKET",
    "NYLORUN_KMS_KEY", "NYLORUN_INTERACTION_TIMEOUT_SECONDS", "NYLORUN_UNCERTAINTY_TIMEOUT_SECONDS",
)


def state_file(port: int) -> Path:
    """Where a local Runtime on `port` says how to reach its stack ($NYLORUN_STATE_DIR, else ~/.cache/nylorun)."""
    folder = os.environ.get("NYLORUN_STATE_DIR") or str(Path.home() / ".cache" / "nylorun")
    return Path(folder) / f"local-{port}.json"


def write_state_file(port: int, endpoint: str, env: dict[str, str]) -> Path:
    path = state_file(port)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    state = {"awsEndpoint": endpoint, "env": {k: env[k] for k in _STATE_KEYS if env.get(k)}}
    # Only this user may read it: it names a moto endpoint that accepts any credentials.
    write_private(path, json.dumps(state))
    return path


def agent_refs(examples: bool, own: str | None = None, *, model: bool = False) -> str:
    """NYLORUN_AGENTS for a local Runtime: the examples (unless left out; `assistant` among them only with a
    model), then the caller's own (`own`, else $NYLORUN_AGENTS as the process got it)."""
    own = _CALLER_AGENTS if own is None else own
    examples_served = [EXAMPLE_AGENTS, *([ASSISTANT_AGENT] if model else [])] if examples else []
    refs = examples_served + [r.strip() for r in own.split(",") if r.strip()]
    return ",".join(dict.fromkeys(refs))


def _new_push_secret() -> str:
    # Standard Webhooks secrets are "whsec_" + base64 of 24-64 random bytes.
    import base64

    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
