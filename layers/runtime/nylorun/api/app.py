"""The HTTP face of the Runtime: Agent Cards and the A2A 1.0 JSON-RPC endpoint (FastAPI; Mangum on Lambda,
uvicorn locally — the same app).

    GET  /v1/a2a/agents/{agent}/.well-known/agent-card.json
    POST /v1/a2a/agents/{agent}/          (the Agent's URL; also without the trailing slash)
    GET  /v1/a2a/push-signing-secrets     (the caller's own push signing keys)

No A2A route answers a redirect: a JSON-RPC client does not follow one for a POST, so both spellings of a
path are served as they are.

This module parses and maps; the service decides. Errors are JSON-RPC objects with HTTP 200;
only an unknown Agent (404) and missing credentials (401) are HTTP errors.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from nylorun.api.auth import Authenticator, Unauthenticated
from nylorun.api.connections import add_connection_routes
from nylorun.api.startup_heap import frozen_after_startup
from nylorun.domain.behalf import ON_BEHALF_HEADER, BadScope, honoured_scope
from nylorun.engine.agent import AgentRegistry
from nylorun.limits import MAX_ANSWER_BYTES, payload_bytes
from nylorun.observability import count_rpc, log_keys, logger
from nylorun.ports.delegation import CALLBACK_PATH, CallbackRefused
from nylorun.profile.card import A2A_PATH, agent_url, build_card
from nylorun.profile.extensions import PROFILE_EXTENSIONS, parse_activation
from nylorun.protocol import jsonrpc
from nylorun.protocol.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidRequestError,
    UnsupportedOperationError,
)
from nylorun.protocol.models import (
    CancelTaskRequest,
    CreatePushConfigRequest,
    GetTaskRequest,
    ListPushConfigsRequest,
    ListTasksRequest,
    SendMessageRequest,
    TaskIdRequest,
)
from nylorun.protocol.versions import VERSION_HEADER, check_version
from nylorun.service.a2a import A2AService, Caller
from nylorun.service.signing import PushSigningKeys
from nylorun.settings import Settings

if TYPE_CHECKING:  # made by wiring when first used: standardwebhooks and the A2A client stay out of cold start
    from nylorun.service.connections import ConnectionFlow
    from nylorun.service.delegation import DelegationCallbacks

EXTENSIONS_HEADER = "A2A-Extensions"
JSON_RPC_CONTENT = "application/json"
# Where a caller gets the keys that sign its own push deliveries (beside the Agents, not one of them):
# docs/calling/push.md, "Verify a delivery".
PUSH_SIGNING_PATH = "/v1/a2a/push-signing-secrets"
# What a delegate's push delivery to CALLBACK_PATH is checked by (service/delegation.py).
CALLBACK_HEADERS = ("x-a2a-notification-token", "webhook-id", "webhook-timestamp", "webhook-signature")

Handler = Callable[[A2AService, Caller, dict[str, Any]], Any]

# One table: JSON-RPC method → (params model, service call).
ROUTES: dict[str, Handler] = {
    "SendMessage": lambda s, c, p: s.send_message(c, jsonrpc.parse_params(SendMessageRequest, p)),
    "GetTask": lambda s, c, p: s.get_task(c, jsonrpc.parse_params(GetTaskRequest, p)),
    "ListTasks": lambda s, c, p: s.list_tasks(c, jsonrpc.parse_params(ListTasksRequest, p)),
    "CancelTask": lambda s, c, p: s.cancel_task(c, jsonrpc.parse_params(CancelTaskRequest, p)),
    "CreateTaskPushNotificationConfig": lambda s, c, p: s.create_push_config(
        c, jsonrpc.parse_params(CreatePushConfigRequest, p)
    ),
    "GetTaskPushNotificationConfig": lambda s, c, p: s.get_push_config(c, jsonrpc.parse_params(TaskIdRequest, p)),
    "ListTaskPushNotificationConfigs": lambda s, c, p: s.list_push_configs(
        c, jsonrpc.parse_params(ListPushConfigsRequest, p)
    ),
    "DeleteTaskPushNotificationConfig": lambda s, c, p: s.delete_push_config(
        c, jsonrpc.parse_params(TaskIdRequest, p)
    ),
}


# The JSON-RPC route's path, both spellings: what Route(A2A_PATH + "/{agent_name}[/]") matches.
_RPC_PATH = re.compile(re.escape(A2A_PATH) + "/([^/]+)/?")


def create_app(
    service: A2AService,
    registry: AgentRegistry,
    settings: Settings,
    authenticator: Authenticator,
    *,
    hop_to_thread: bool | None = None,
    signing: PushSigningKeys | None = None,
    delegations: DelegationCallbacks | None = None,
    connections: ConnectionFlow | None = None,
) -> RuntimeApp:
    """`hop_to_thread`: whether a JSON-RPC request's service call (blocking: DynamoDB, Step Functions, the
    blocking SendMessage's wait) runs in the threadpool, keeping the event loop free for other requests.
    None (the default): it does, except for a request that comes through Mangum — a Lambda process serves one
    request at a time, so there is nothing to keep free and the hop is pure cost. False: never (adapters that
    never block, e.g. the in-memory ones)."""
    # redirect_slashes=False: Starlette would answer a 307 to the other spelling, which no POST follows.
    app = RuntimeApp(
        title="Nylorun Runtime", docs_url=None, redoc_url=None, openapi_url=None, redirect_slashes=False,
        lifespan=frozen_after_startup,
    )
    started = formatdate(usegmt=True)

    def base_url(request: Request) -> str:
        if settings.public_base_url:
            return settings.public_base_url
        scheme = request.headers.get("x-forwarded-proto", request.url.scheme)
        host = request.headers.get("host", request.url.netloc)
        return f"{scheme}://{host}"

    # The GET routes read only memory (registry, settings): async, so they never wait for a threadpool hop.
    # response_model=None: a plain dict needs no response validation (nor FastAPI's pydantic.v1 probe).
    @app.get(A2A_PATH, response_model=None)
    @app.get(A2A_PATH + "/", response_model=None)
    async def list_agents(request: Request) -> dict[str, Any]:
        base = base_url(request)
        return {"agents": [{"name": n, "url": agent_url(base, n)} for n in registry.names()]}

    @app.get(A2A_PATH + "/.well-known/agent-card.json")
    async def no_agent_card(request: Request) -> Response:
        # Where `.well-known/agent-card.json` lands when resolved against an Agent URL without its slash.
        # It cannot say which Agent was meant, so it says how to ask (a 404, never a redirect or a guess).
        names = registry.names()
        example = agent_url(base_url(request), names[0] if names else "NAME")
        return JSONResponse(
            {
                "error": "No Agent is named here. An Agent's URL ends with '/', e.g. "
                f"{example}, and its card is at {example}.well-known/agent-card.json",
                "agents": [agent_url(base_url(request), n) for n in names],
            },
            status_code=404,
        )

    @app.get(PUSH_SIGNING_PATH, response_model=None)
    async def push_signing_secrets(request: Request) -> Response:
        # The caller's own keys only: they verify its deliveries and no other subject's (docs/security.md).
        try:
            subject = authenticator.subject(request)
        except Unauthenticated as exc:
            return _unauthorized(exc)
        if signing is None:
            # Decision: 404, not an empty list: with push off no delivery is ever signed, and a receiver that
            # asked for keys should learn that rather than wait with none (the card says pushNotifications false).
            return JSONResponse(
                {"error": "Push notifications are off on this Runtime (it has no push secret)"}, status_code=404
            )
        if hop_to_thread is False or (hop_to_thread is None and "aws.event" in request.scope):
            secrets = signing.for_subject(subject)  # as for JSON-RPC: on Lambda there is nothing else to serve
        else:
            secrets = await run_in_threadpool(signing.for_subject, subject)  # Secrets Manager: a blocking call
        return JSONResponse({"secrets": secrets}, headers={"Cache-Control": "no-store"})

    @app.post(CALLBACK_PATH + "/{task_id}/{key}", response_model=None)
    async def delegation_callback(request: Request, task_id: str, key: str) -> Response:
        # A delegate's push delivery for a task this Runtime delegated. No bearer token (the delegate
        # is the caller): the push config's token, the Standard Webhooks signature and the task are checked.
        if delegations is None:
            return JSONResponse({"error": "this Runtime delegates nothing"}, status_code=404)
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > settings.max_request_bytes:
            return JSONResponse({"error": "too large"}, status_code=413)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > settings.max_request_bytes:
                return JSONResponse({"error": "too large"}, status_code=413)
        headers = {name: request.headers.get(name, "") for name in CALLBACK_HEADERS}
        try:
            await run_in_threadpool(delegations.receive, task_id[:64], key[:64], headers, body)
        except CallbackRefused as refused:
            return JSONResponse({"error": refused.reason}, status_code=refused.status)
        return Response(status_code=204)

    # docs/writing/connections.md
    add_connection_routes(app, connections, authenticator, _unauthorized, settings.delegating_subjects)

    async def agent_card(request: Request) -> Response:
        agent_name: str = request.path_params["agent_name"]
        agent = registry.get(agent_name)
        if agent is None:
            return _not_found(agent_name)
        body = json.dumps(build_card(agent, base_url(request), settings), separators=(",", ":")).encode()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        headers = {"Cache-Control": "public, max-age=300", "ETag": etag, "Last-Modified": started}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    async def rpc(request: Request) -> Response:
        agent_name: str = request.path_params["agent_name"]
        if registry.get(agent_name) is None:
            return _not_found(agent_name)
        origin = request.headers.get("origin")
        if origin is not None and origin.rstrip("/").lower() not in settings.allowed_origins:
            # A browser page's request (settings.allowed_origins says why): refused before anything is read.
            return JSONResponse({"error": f"requests from the web page at {origin[:100]!r} are not allowed"},
                                status_code=403)
        try:
            subject = authenticator.subject(request)
        except Unauthenticated as exc:
            return _unauthorized(exc)
        declared = list(PROFILE_EXTENSIONS)
        activated = parse_activation(request.headers.getlist(EXTENSIONS_HEADER), declared)
        headers = {EXTENSIONS_HEADER: ", ".join(activated)} if activated else {}

        if not _is_json(request.headers.get("content-type", "")):
            # docs/protocol.md §1.2: requests are application/json. Refusing other types also keeps a web page
            # from posting a "simple" (text/plain, no preflight) request to a Runtime on loopback.
            error = ContentTypeNotSupportedError("Content-Type must be application/json for JSON-RPC requests")
            return _refuse(error, headers)

        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > settings.max_request_bytes:
            return _refuse(_too_large(settings), headers)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > settings.max_request_bytes:
                return _refuse(_too_large(settings), headers)

        try:  # nylorun.domain.behalf: honoured only from a delegating identity
            on_behalf = honoured_scope(subject, request.headers.get(ON_BEHALF_HEADER), settings.delegating_subjects)
        except BadScope as exc:
            return _refuse(InvalidRequestError(str(exc)), headers)
        caller = Caller(subject=subject, agent=agent_name, extensions=tuple(activated), on_behalf=on_behalf)
        header = request.headers.get(VERSION_HEADER)
        # The query string is parsed only when it can count: check_version reads the header first.
        version = (header, None if header else request.query_params.get(VERSION_HEADER))
        if hop_to_thread is False or (hop_to_thread is None and "aws.event" in request.scope):
            payload = _dispatch(service, caller, body, version)  # Mangum (Lambda): nothing else to serve
        else:
            payload = await run_in_threadpool(_dispatch, service, caller, body, version)
        return _answer(payload, headers)

    # The card and JSON-RPC routes are plain Starlette routes: they take the Request and build their Response
    # themselves, so FastAPI's per-request parameter solving and response handling would be pure overhead.
    card_route = Route(A2A_PATH + "/{agent_name}/.well-known/agent-card.json", agent_card, methods=["GET"])
    card_route.methods = {"GET"}  # as the FastAPI route had it: Starlette would add HEAD
    app.router.routes += [
        card_route,
        Route(A2A_PATH + "/{agent_name}", rpc, methods=["POST"]),
        Route(A2A_PATH + "/{agent_name}/", rpc, methods=["POST"]),
    ]
    app.rpc_endpoint = rpc
    return app


class RuntimeApp(FastAPI):
    """FastAPI with one shortcut: a JSON-RPC POST goes from the ASGI call to its endpoint behind Starlette's
    ServerErrorMiddleware (the same 500 for an unexpected exception), past the rest of the middleware stack and
    the route table, which do nothing for it: the endpoint raises no HTTPException, has no dependencies and no
    body limit but its own. Off when middleware is added or a root_path set: then the routes serve it."""

    rpc_endpoint: Callable[[Request], Awaitable[Response]] | None = None
    _rpc_stack: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and self.rpc_endpoint is not None:
            match = _RPC_PATH.fullmatch(scope["path"])
            if match and not scope.get("root_path") and not self.root_path and not self.user_middleware:
                scope["app"] = self
                scope["path_params"] = {"agent_name": match[1]}
                if self._rpc_stack is None:
                    self._rpc_stack = self._build_rpc_stack(self.rpc_endpoint)
                await self._rpc_stack(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def _build_rpc_stack(self, endpoint: Callable[[Request], Awaitable[Response]]) -> ASGIApp:
        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            response = await endpoint(Request(scope, receive, send))
            await response(scope, receive, send)

        handler = self.exception_handlers.get(500) or self.exception_handlers.get(Exception)
        return ServerErrorMiddleware(serve, handler=handler, debug=self.debug)


# The Method dimension of a request refused before its method was known (not JSON-RPC, too large, an unknown
# method): a fixed word, so a caller's made-up method names never become metrics of their own.
UNREAD_METHOD = "Invalid"


def _dispatch(
    service: A2AService, caller: Caller, body: bytes, version: tuple[str | None, str | None]
) -> dict[str, Any]:
    try:
        request = jsonrpc.decode(body, before_method=lambda: check_version(*version))
    except jsonrpc.RequestError as exc:
        count_rpc(UNREAD_METHOD, failed=True)
        return jsonrpc.failure(exc.request_id, exc.error)
    with log_keys(rpc_method=request.method, agent=caller.agent):  # and the task's keys the call adds
        answer = _call(service, caller, request)
    count_rpc(request.method, failed="error" in answer)  # decode admits only jsonrpc.METHODS
    return answer


def _call(service: A2AService, caller: Caller, request: jsonrpc.Request) -> dict[str, Any]:
    try:
        handler = ROUTES.get(request.method)
        if handler is None:
            if request.method in ("SendStreamingMessage", "SubscribeToTask"):
                raise jsonrpc.streaming_unsupported(request.method)
            # GetExtendedAgentCard: capabilities.extendedAgentCard is false (Profile v2: No).
            raise UnsupportedOperationError("GetExtendedAgentCard is not supported: this Agent has no extended card")
        return jsonrpc.success(request.id, handler(service, caller, request.params))
    except A2AError as exc:
        return jsonrpc.failure(request.id, exc)
    except Exception:  # noqa: BLE001 - any other error is -32603, logged
        # No stack trace reaches a caller; the log has it, with the request's method and task keys.
        logger.exception("unhandled error")
        return jsonrpc.failure(request.id, InternalError())


def _refuse(error: A2AError, headers: dict[str, str]) -> Response:
    """An error answered before the body was read (its id and method unknown)."""
    count_rpc(UNREAD_METHOD, failed=True)
    return _answer(jsonrpc.failure(None, error), headers)


def _answer(payload: dict[str, Any], headers: dict[str, str]) -> Response:
    body = jsonrpc.encode(payload)
    if payload_bytes(body) > MAX_ANSWER_BYTES:
        # Lambda: 6 MB response payload; we keep answers under 5 MiB. The service trims tasks and ListTasks
        # pages to fit; this backstop catches the rest (an agent's huge direct reply, a huge request id).
        logger.error("answer over 5 MiB refused", extra={"bytes": len(body)})
        error = InternalError(f"The answer would be larger than {MAX_ANSWER_BYTES} bytes, the most this Runtime sends")
        body = jsonrpc.encode(jsonrpc.failure(payload.get("id"), error))
    return Response(body, media_type=JSON_RPC_CONTENT, headers=headers)


def _is_json(content_type: str) -> bool:
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == JSON_RPC_CONTENT or (media_type.startswith("application/") and media_type.endswith("+json"))


def _too_large(settings: Settings) -> InvalidRequestError:
    return InvalidRequestError(f"Payload too large: the limit is {settings.max_request_bytes} bytes")


def _unauthorized(exc: Unauthenticated) -> JSONResponse:
    return JSONResponse(
        {"error": str(exc)},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="nylorun", error="invalid_token"'},
    )


def _not_found(agent_name: str) -> JSONResponse:
    return JSONResponse({"error": f"No agent named {agent_name[:64]!r} is served here"}, status_code=404)
