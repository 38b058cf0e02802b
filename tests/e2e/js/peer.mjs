// @ts-check
/**
 * An A2A caller written with @a2a-js/sdk 1.3.0's public client API, driven by tests/e2e/test_a2a_js.py.
 *
 *   A2A_TOKEN=tok-alice node peer.mjs <scenario> '<json arguments>'
 *
 * Prints one JSON line per check: {"check": name, "result": …} or {"check": name, "error": …}. It asserts
 * nothing itself, so a failing pytest assertion shows everything the SDK returned or threw.
 *
 * Requests are written as a JavaScript caller writes them, partial objects (`{ id }`), not full ts-proto
 * messages: what the SDK then puts on the wire for the fields left out is part of what is tested.
 */
import { Role, roleToJSON, taskStateToJSON } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  ServiceParameters,
  createAuthenticatingFetchWithRetry,
  withA2AExtensions,
} from '@a2a-js/sdk/client';
import { A2AError, TaskNotCancelableError, TaskNotFoundError } from '@a2a-js/sdk/errors';

/** @typedef {import('@a2a-js/sdk/client').Client} Client */
/** @typedef {import('@a2a-js/sdk').Task} Task */
/** @typedef {import('@a2a-js/sdk').Message} Message */

const INTERACTIONS = 'https://docs.nylorun.com/a2a/interactions/v1';
const PROFILE = [INTERACTIONS, 'https://docs.nylorun.com/a2a/progress/v1', 'https://docs.nylorun.com/a2a/telemetry/v1'];

/** The JSON-RPC params of every request the client POSTed, in order (to show what the SDK sends). */
const sent = /** @type {{method: string, params: unknown}[]} */ ([]);

/** @type {typeof fetch} */
const recordingFetch = async (input, init) => {
  if (init?.method === 'POST' && typeof init.body === 'string') {
    const { method, params } = JSON.parse(init.body);
    sent.push({ method, params });
  }
  return fetch(input, init);
};

/** A factory whose JSON-RPC transport sends the bearer token through the SDK's auth hook. */
function factory(/** @type {string} */ token) {
  const fetchImpl = createAuthenticatingFetchWithRetry(recordingFetch, {
    headers: async () => ({ Authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined, // dev tokens never need refreshing
  });
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
    }),
  );
}

/**
 * A request as a JavaScript caller writes it: only the fields it means (the SDK's types list every field).
 * @template T
 * @param {Partial<NoInfer<T>>} fields
 * @returns {T}
 */
const partial = (fields) => /** @type {T} */ (fields);

/** Activates the profile extensions for one call (sent as the A2A-Extensions header). */
const withProfile = { serviceParameters: ServiceParameters.create(withA2AExtensions(...PROFILE)) };

/**
 * @param {string} text
 * @param {{messageId?: string, taskId?: string, contextId?: string, metadata?: Record<string, unknown>, extensions?: string[]}} [fields]
 */
function userMessage(text, fields = {}) {
  const { messageId = `m-${crypto.randomUUID()}`, taskId = '', contextId = '', metadata, extensions = [] } = fields;
  return /** @type {Message} */ ({
    messageId, taskId, contextId, metadata, extensions,
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    referenceTaskIds: [],
  });
}

/** @param {import('@a2a-js/sdk').Part} part */
const partText = (part) => (part.content?.$case === 'text' ? part.content.value : '');
/** @param {Message | undefined} message */
const textOf = (message) => (message?.parts ?? []).map(partText).join('');

/** What a caller reads off a task: ids, state, reply, history, artifacts, status metadata. */
function view(/** @type {Task | Message} */ answer) {
  if ('messageId' in answer) return { kind: 'message', text: textOf(answer) };
  return {
    kind: 'task',
    id: answer.id,
    contextId: answer.contextId,
    state: taskStateToJSON(answer.status?.state ?? 0),
    text: textOf(answer.status?.message),
    metadata: answer.status?.message?.metadata ?? null,
    history: answer.history.map((m) => ({ role: roleToJSON(m.role), text: textOf(m) })),
    artifacts: answer.artifacts.map((a) => ({ name: a.name, parts: a.parts.map((p) => p.content?.$case), text: a.parts.map(partText).join('') })),
  };
}

/** What a caller can tell about an error: its class (instanceof the SDK's types), name, code, message. */
function failure(/** @type {unknown} */ error) {
  const e = /** @type {Error & {envelopeCode?: number}} */ (error);
  return {
    name: e?.name,
    message: e?.message,
    code: e?.envelopeCode ?? null,
    a2a: error instanceof A2AError,
    taskNotFound: error instanceof TaskNotFoundError,
    taskNotCancelable: error instanceof TaskNotCancelableError,
  };
}

/** Prints one check's line. */
const emit = (/** @type {string} */ check, /** @type {Record<string, unknown>} */ line) =>
  console.log(JSON.stringify({ check, ...line }));

/**
 * Runs one check and prints its line; returns the result (undefined if it threw).
 * @template T
 * @param {string} check
 * @param {() => Promise<T>} call
 * @param {(value: T) => unknown} [show]
 */
async function attempt(check, call, show = (value) => value) {
  try {
    const value = await call();
    emit(check, { result: show(value) ?? null });
    return value;
  } catch (error) {
    emit(check, { error: failure(error) });
    return undefined;
  }
}

/** Sends and insists on a task: later steps need its id. */
async function sendTask(/** @type {Client} */ client, /** @type {Message} */ message, options = {}) {
  const answer = await client.sendMessage(partial({ message }), options);
  if ('messageId' in answer) throw new Error(`expected a task, got a message: ${JSON.stringify(answer)}`);
  return answer;
}

const cardView = (/** @type {Client} */ client) =>
  client.getAgentCard().then((card) => ({
    name: card.name,
    interfaces: card.supportedInterfaces.map(({ url, protocolBinding, protocolVersion }) => ({ url, protocolBinding, protocolVersion })),
    streaming: card.capabilities?.streaming ?? null,
    pushNotifications: card.capabilities?.pushNotifications ?? null,
    clientProtocolVersion: client.protocolVersion,
  }));

/** @type {Record<string, (args: Record<string, any>, make: ClientFactory) => Promise<void>>} */
const scenarios = {
  async card({ agentUrl }, make) {
    await attempt('card-with-slash', async () => cardView(await make.createFromUrl(`${agentUrl}/`)));
    await attempt('card-url', async () => cardView(await make.createFromUrl(`${agentUrl}/.well-known/agent-card.json`, '')));
    await attempt('card-without-slash', async () => cardView(await make.createFromUrl(agentUrl)));
  },

  async send({ agentUrl }, make) {
    const client = await make.createFromUrl(`${agentUrl}/`);
    const message = userMessage('hi', { messageId: `tck-complete-task-${crypto.randomUUID()}` });
    await attempt('send', () => client.sendMessage(partial({ message })), view);
  },

  async get({ agentUrl }, make) {
    const client = await make.createFromUrl(`${agentUrl}/`);
    const task = await sendTask(client, userMessage('hi', { messageId: `tck-complete-task-${crypto.randomUUID()}` }));
    await attempt('get-full', () => client.getTask(partial({ id: task.id })), view);
    await attempt('get-history-1', () => client.getTask(partial({ id: task.id, historyLength: 1 })), view);
    await attempt('get-history-0', () => client.getTask(partial({ id: task.id, historyLength: 0 })), view);
  },

  async list({ agentUrl }, make) {
    const client = await make.createFromUrl(`${agentUrl}/`);
    const contextId = `ctx-js-${crypto.randomUUID()}`;
    const ids = [];
    for (let n = 0; n < 2; n++) {
      ids.push((await sendTask(client, userMessage(`hi ${n}`, { messageId: `tck-complete-task-${crypto.randomUUID()}`, contextId }))).id);
    }
    emit('list-created', { result: { contextId, ids } });
    // Only contextId, as a JavaScript caller writes it: the SDK fills in the rest (its status: "UNRECOGNIZED").
    await attempt('list', () => client.listTasks(partial({ contextId })), (page) => ({
      ids: page.tasks.map((t) => t.id),
      states: page.tasks.map((t) => taskStateToJSON(t.status?.state ?? 0)),
      totalSize: page.totalSize,
      nextPageToken: page.nextPageToken,
    }));
    emit('list-sent', { result: sent.filter((s) => s.method === 'ListTasks').at(-1)?.params });
  },

  async cancel({ agentUrl }, make) {
    const client = await make.createFromUrl(`${agentUrl}/`);
    const task = await sendTask(client, userMessage('hi', { messageId: `tck-input-required-${crypto.randomUUID()}` }));
    emit('cancel-waiting', { result: view(task) });
    await attempt('cancel', () => client.cancelTask(partial({ id: task.id })), view);
    await attempt('cancel-get', () => client.getTask(partial({ id: task.id })), view);
    await attempt('cancel-again', () => client.cancelTask(partial({ id: task.id })), view);
    await attempt('get-unknown', () => client.getTask(partial({ id: `no-such-task-${crypto.randomUUID()}` })), view);
  },

  async 'push-setup'({ agentUrl, hook }, make) {
    const client = await make.createFromUrl(`${agentUrl}/`);
    const task = await sendTask(client, userMessage('hi', { messageId: `tck-input-required-${crypto.randomUUID()}` }));
    const config = partial({
      taskId: task.id, url: hook, token: 'js-token', authentication: { scheme: 'Bearer', credentials: 'js-hook-secret' },
    });
    const created = await attempt('push-create', () => client.createTaskPushNotificationConfig(config));
    const id = created?.id ?? '';
    await attempt('push-get', () => client.getTaskPushNotificationConfig(partial({ taskId: task.id, id })));
    await attempt('push-list', () => client.listTaskPushNotificationConfig(partial({ taskId: task.id })));
    // Each status change after the config was made is delivered: this answer moves the task on to the end.
    const answer = userMessage('forty-two', { taskId: task.id, contextId: task.contextId });
    await attempt('push-continue', () => client.sendMessage(partial({ message: answer })), view);
  },

  async 'push-delete'({ agentUrl, taskId, id }, make) {
    const client = await make.createFromUrl(`${agentUrl}/`);
    await attempt('push-delete', () => client.deleteTaskPushNotificationConfig(partial({ taskId, id })));
    await attempt('push-list-after', () => client.listTaskPushNotificationConfig(partial({ taskId })));
    await attempt('push-get-after', () => client.getTaskPushNotificationConfig(partial({ taskId, id })));
  },

  async support({ agentUrl }, make) {
    const client = await make.createFromUrl(`${agentUrl}/`);
    /** Sends with the profile extensions active (the A2A-Extensions header, per call). */
    const step = async (/** @type {string} */ check, /** @type {Message} */ message) =>
      attempt(check, () => sendTask(client, message, withProfile), view);
    const openInteraction = (/** @type {Task | undefined} */ task) => task?.status?.message?.metadata?.[INTERACTIONS]?.interactionId ?? '';
    /** An interactions/v1 answer: the metadata, and the extension named on the message too. */
    const approve = (/** @type {Task | undefined} */ task) =>
      userMessage('ok', {
        taskId: task?.id ?? '',
        extensions: [INTERACTIONS],
        metadata: { [INTERACTIONS]: { interactionId: openInteraction(task), approved: true } },
      });

    const asked = await step('support-ask', userMessage('I want a refund'));
    const connect = await step('support-order', userMessage('A-1001', { taskId: asked?.id ?? '' }));
    // docs/writing/connections.md: the person connects in a browser (the test does, beside this client); the
    // turn resumes by itself, so the client reads the task until it asks for the approval.
    const approval = await attempt('support-connected', async () => {
      for (let i = 0; i < 600; i += 1) {
        const task = await client.getTask(partial({ id: connect?.id ?? '' }), withProfile);
        if (task?.status?.message?.metadata?.[INTERACTIONS]?.kind === 'approval') return task;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error('the turn did not resume after the connection');
    }, view);
    await step('support-text-yes', userMessage('yes', { taskId: approval?.id ?? '' }));
    await step('support-approved', approve(approval));
  },
};

const [scenario, rawArgs = '{}'] = process.argv.slice(2);
const run = scenarios[scenario ?? ''];
if (!run) {
  console.error(`unknown scenario ${scenario}; one of: ${Object.keys(scenarios).join(', ')}`);
  process.exit(2);
}
await run(JSON.parse(rawArgs), factory(process.env.A2A_TOKEN ?? ''));
