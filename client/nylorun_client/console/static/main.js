// The console page: connect, converse, follow the task live (push via SSE, else GetTask with backoff), list tasks.
import { el, post, recordPush, showError } from "./api.js";
import { DOWN_NOTE, openStream, refresher } from "./events.js";
import { interactionForm } from "./forms.js";
import * as render from "./render.js";

const state = { agent: null, core: false, live: "", view: null, following: 0, events: null, listing: 0, listed: null };
const WAITING = ["INPUT_REQUIRED", "AUTH_REQUIRED"];
const TERMINAL = ["COMPLETED", "FAILED", "CANCELED", "REJECTED"];
const $ = (id) => document.getElementById(id);

async function rpc(method, params) {
  const answer = await post("api/rpc", { agent: state.agent, method, params });
  showError(answer.error ? `${method}: ${answer.error}` : "");
  return answer;
}

function show(view) {
  state.view = view;
  $("task").hidden = false;
  render.task(view, { core: state.core });
  const form = interactionForm(view, (message) => sendMessage(message));
  $("interaction").replaceChildren(...(form ? [form] : []));
  const waiting = WAITING.includes(render.short(view.state));
  $("message").placeholder = waiting && !view.interaction
    ? "Reply to the Agent (text)" : waiting ? "A text reply (it approves nothing)" : "Write to the Agent";
}

async function getTask(taskId) {
  const answer = await rpc("GetTask", { id: taskId, historyLength: 50 });
  if (answer.view) show(answer.view);
  return answer.view;
}

function settled(view) {
  const now = render.short(view.state);
  return !view || TERMINAL.includes(now) || WAITING.includes(now) || Boolean(view.uncertain);
}

async function follow(taskId) {
  const run = ++state.following; // a newer follow stops this one
  if (state.live === "push") {
    await post("api/watch", { agent: state.agent, taskId });
    await getTask(taskId); // whatever happened before the push config existed
    return;
  }
  let wait = 300;
  while (run === state.following) {
    const view = await getTask(taskId);
    if (!view || settled(view)) return;
    await new Promise((done) => setTimeout(done, wait));
    wait = Math.min(wait * 1.5, 5000); // backoff: a long task is not asked about every 300 ms
  }
}

// While the event stream is down: the open task, until it ends or waits for a person. Shown only if it is still
// the open task when GetTask answers (the person may have opened another meanwhile).
const stale = refresher(async () => {
  const view = state.view;
  if (!view || !view.taskId || settled(view)) return;
  const answer = await rpc("GetTask", { id: view.taskId, historyLength: 50 });
  if (answer.view && state.view && state.view.taskId === view.taskId) show(answer.view);
});

function openEvents() {
  if (state.events) return;
  state.events = openStream({
    onDelivery(data) {
      recordPush(data);
      const body = data.delivery || {};
      const update = body.statusUpdate || body.artifactUpdate || body.task || {};
      const taskId = update.taskId || update.id;
      if (state.view && taskId === state.view.taskId) getTask(taskId);
    },
    onDown() {
      $("live-mode").textContent = DOWN_NOTE;
      stale.start();
    },
    onUp() {
      stale.stop();
      $("live-mode").textContent = PUSH_NOTE;
      if (state.view && state.view.taskId && !settled(state.view)) getTask(state.view.taskId); // pushes missed
    },
    onClosed() {
      stale.stop();
      setMode("poll: the event stream closed");
      if (state.view && state.view.taskId && !settled(state.view)) follow(state.view.taskId);
    },
  });
}

const PUSH_NOTE = "Live: pushes from the Agent (signatures verified)";

function setMode(live) {
  state.live = live.startsWith("push") ? "push" : "poll";
  $("live-mode").textContent = state.live === "push" ? PUSH_NOTE : `Live: polling GetTask (${live.replace(/^poll: /, "")})`;
  if (state.live === "push") openEvents();
}

async function sendMessage(message) {
  const answer = await rpc("SendMessage", { message, configuration: { returnImmediately: true } });
  if (!answer.view) return;
  if (answer.view.type === "message") { render.message(answer.view); $("task").hidden = false; return; }
  show(answer.view);
  follow(answer.view.taskId);
}

function textMessage(text) {
  const message = { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }] };
  const view = state.view;
  if (view && view.taskId && WAITING.includes(render.short(view.state))) {
    Object.assign(message, { taskId: view.taskId, contextId: view.contextId }); // a reply into the waiting task
  } else if (view && view.contextId && $("same-context").checked) {
    message.contextId = view.contextId;
  }
  return message;
}

async function connect(allowOtherHost = false) {
  showError("");
  $("other-host").hidden = true;
  const answer = await post("api/connect", { url: $("url").value, token: $("token").value, allowOtherHost });
  $("token").value = ""; // kept by the console server only, never in the page
  if (answer.card) render.checks(answer.card, answer.checks || []);
  if (answer.otherHost) {
    $("other-host").textContent = `Use ${answer.otherHost} anyway (your token goes there too)`;
    $("other-host").hidden = false;
  }
  if (!answer.agent) { showError(answer.error || "could not connect"); return; }
  Object.assign(state, { agent: answer.agent, core: answer.core, view: null, listed: null });
  $("tier").textContent = answer.core ? "Core tier: the Agent declares no Profile v2 extension" : `Profile v2: ${answer.extensions.length} extensions active`;
  setMode(answer.live);
  $("converse").hidden = false;
  $("tasks").hidden = false;
  $("task").hidden = true;
  $("message").focus();
  listTasks();
}

// ListTasks pages by an opaque cursor (a2a-1.0.md, "ListTasks"): a token belongs to the listing that gave it, so
// "next page" repeats that listing's own filters (not the fields as they are now), and only the newest listing is
// shown: an earlier one answering late (connect's unfiltered list) must not replace it, nor lend its token.
// While a new listing is asked for, the old one is taken away, so its "next page" cannot be clicked.
async function listTasks(next = false) {
  const run = ++state.listing;
  let params = { pageSize: 10, includeArtifacts: false };
  if (next && state.listed && state.listed.nextPageToken) {
    params = { ...state.listed.params, pageToken: state.listed.nextPageToken };
  } else {
    if ($("filter-context").value.trim()) params.contextId = $("filter-context").value.trim();
    if ($("filter-state").value) params.status = $("filter-state").value;
    $("task-list").replaceChildren(); // the list shown is no longer what was asked for
  }
  $("next-page").hidden = true; // until this listing answers: no next page of a listing being replaced
  const answer = await rpc("ListTasks", params);
  if (!answer.view || run !== state.listing) return;
  const filters = { ...params };
  delete filters.pageToken;
  state.listed = { params: filters, nextPageToken: answer.view.nextPageToken || "" };
  $("next-page").hidden = !state.listed.nextPageToken;
  $("task-list").replaceChildren(...answer.view.tasks.map((t) => {
    const button = el("button", { type: "button", class: "task-link", text: `${render.short(t.state)} · ${t.text.slice(0, 80) || t.taskId}` });
    button.addEventListener("click", () => reopen(t.taskId));
    return el("li", {}, button);
  }));
}

async function reopen(taskId) {
  const view = await getTask(taskId);
  if (!view) return;
  if (!settled(view)) follow(taskId);
  const answer = await rpc("ListTasks", { contextId: view.contextId, pageSize: 50 });
  const turns = answer.view ? [...answer.view.tasks].sort((a, b) => (a.timestamp < b.timestamp ? -1 : 1)) : [];
  $("turns").replaceChildren(...turns.map((t) => el("li", {}, el("span", { text: `${render.short(t.state)} · ${t.text.slice(0, 120)}` }))));
}

async function start() {
  const config = await fetch("api/config").then((r) => r.json()).catch(() => ({ agents: [] }));
  $("token-note").textContent = config.defaultToken ? "Empty: the console's own token ($NYLORUN_TOKEN) is used." : "";
  for (const url of config.agents || []) {
    const option = el("button", { type: "button", class: "suggested", text: url });
    option.addEventListener("click", () => { $("url").value = url; connect(); });
    $("suggested").append(el("li", {}, option));
  }
  if (config.agents && config.agents.length) $("url").value = config.agents[0];
  $("connect-form").addEventListener("submit", (event) => { event.preventDefault(); connect(); });
  $("other-host").addEventListener("click", () => connect(true));
  $("send-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("message").value.trim();
    if (!text) return;
    $("message").value = "";
    sendMessage(textMessage(text));
  });
  $("new-conversation").addEventListener("click", () => { state.view = null; $("task").hidden = true; $("message").focus(); });
  $("cancel").addEventListener("click", async () => {
    if (!state.view) return;
    const answer = await rpc("CancelTask", { id: state.view.taskId });
    if (answer.view) show(answer.view);
  });
  $("filters").addEventListener("submit", (event) => { event.preventDefault(); listTasks(); });
  $("next-page").addEventListener("click", () => listTasks(true));
}

start();
