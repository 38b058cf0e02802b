// Draws what views.py read out of a task: state, plan, components, artifacts, telemetry. Text only, via DOM nodes.
import { el } from "./api.js";

const MARKS = { done: "✓", active: "▶", pending: "○", todo: "○", failed: "✗", skipped: "–" };

export function short(state) {
  return (state || "").replace("TASK_STATE_", "");
}

export function checks(card, list) {
  const box = document.getElementById("card");
  box.replaceChildren(
    el("h2", { text: `${card.name || "(no name)"} ${card.version ? "v" + card.version : ""}` }),
    el("p", { text: card.description || "" }),
    el("details", { class: "card-checks" }, el("summary", { text: summary(list) }),
      el("ul", { class: "checks" }, ...list.map((check) => el("li", { class: `check ${check.status}` },
      el("strong", { text: `${check.status === "pass" ? "✓" : check.status === "warn" ? "!" : "✗"} ${check.name}` }),
      el("span", { text: ` — ${check.lookedAt}` }))))),
  );
  box.hidden = false;
}

function summary(list) {
  const count = (status) => list.filter((check) => check.status === status).length;
  return `Card checks against A2A 1.0 and Profile v2: ${count("pass")} pass, ${count("warn")} warn, ${count("fail")} fail`;
}

export function component(item) {
  const props = item.props || {};
  const figure = el("figure", { class: `component ${item.component}` });
  if (item.title) figure.append(el("figcaption", { text: item.title }));
  if (item.component === "table") {
    const head = el("tr", {}, ...props.columns.map((c) => el("th", { scope: "col", text: String(c) })));
    const rows = props.rows.map((row) => el("tr", {}, ...row.map((cell) => el("td", { text: cellText(cell) }))));
    figure.append(el("div", { class: "scroll" }, el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows))));
  } else if (item.component === "keyvalue") {
    figure.append(el("dl", {}, ...props.items.flatMap((i) => [el("dt", { text: i.label }), el("dd", { text: cellText(i.value) })])));
  } else if (item.component === "timeline") {
    figure.append(el("ol", { class: "timeline" }, ...props.steps.map((s) => el("li", { class: s.state || "todo" },
      el("span", { class: "mark", text: MARKS[s.state || "todo"] || "○" }), el("span", { text: ` ${s.label}` }),
      s.note ? el("span", { class: "note", text: ` — ${s.note}` }) : null))));
  } else if (item.component === "code-ref") {
    let where = props.path + (props.line ? `:${props.line}` : "") + (props.endLine && props.endLine !== props.line ? `-${props.endLine}` : "");
    figure.append(el("code", { text: props.label ? `${props.label}: ${where}` : where }));
  }
  return figure;
}

function cellText(value) {
  if (value === true) return "yes";
  if (value === false) return "no";
  return value === null || value === undefined ? "" : String(value);
}

function plan(steps) {
  return el("ol", { class: "plan", "aria-label": "Plan" }, ...steps.map((step) => el("li", { class: `step ${step.state}` },
    el("span", { class: "mark", text: MARKS[step.state] || "○" }),
    el("span", { text: ` ${step.label} ` }), el("span", { class: "step-state", text: `(${step.state})` }),
    step.note ? el("span", { class: "note", text: ` — ${step.note}` }) : null)));
}

function artifact(item) {
  const box = el("article", { class: "artifact" }, el("h3", { text: item.name || item.artifactId }));
  if (item.file) {
    box.append(el("dl", { class: "file" },
      el("dt", { text: "version" }), el("dd", { text: String(item.file.version) }),
      el("dt", { text: "size" }), el("dd", { text: `${item.file.size} bytes` }),
      el("dt", { text: "sha256" }), el("dd", { class: "hash", text: item.file.sha256 })));
  }
  for (const url of item.urls || []) {
    if (/^https?:\/\//i.test(url)) {
      box.append(el("a", { href: url, download: "", target: "_blank", rel: "noopener noreferrer", text: `Download ${item.name || "file"}` }));
    }
  }
  if (item.text) box.append(el("pre", { text: item.text }));
  for (const c of item.components || []) box.append(component(c));
  return box;
}

function telemetry(t) {
  return el("dl", { class: "telemetry", "aria-label": "Telemetry" },
    el("dt", { text: "steps" }), el("dd", { text: String(t.steps) }),
    el("dt", { text: "tokens" }), el("dd", { text: String(t.tokens) }),
    el("dt", { text: "cost" }), el("dd", { text: `$${Number(t.costUsd).toFixed(4)}` }),
    el("dt", { text: "trace id" }), el("dd", { class: "hash", text: t.traceId }));
}

export function task(view, { core }) {
  const state = short(view.state);
  document.getElementById("task-state").textContent = state;
  document.getElementById("task-state").className = `state ${state.toLowerCase()}`;
  document.getElementById("task-id").textContent = `task ${view.taskId} · context ${view.contextId}`;
  const body = document.getElementById("task-body");
  body.replaceChildren();
  if (state === "SUBMITTED") body.append(el("p", { class: "queued", text: "Queued: the task waits its turn." }));
  if (view.text) body.append(el("p", { class: "status-text", text: view.text }));
  if (view.uncertain) {
    body.append(el("div", { class: "warning", role: "alert" },
      el("strong", { text: "Outcome unknown: " }),
      el("span", { text: `the effect ${view.uncertain} may or may not have happened. An operator must resolve it before the task goes on (nylorun admin).` })));
  }
  if (view.plan && view.plan.length) body.append(el("h3", { text: "Plan" }), plan(view.plan));
  for (const c of view.components || []) body.append(component(c));
  if (view.artifacts && view.artifacts.length) body.append(el("h3", { text: "Artifacts" }), ...view.artifacts.map(artifact));
  if (view.telemetry) body.append(el("h3", { text: "Telemetry" }), telemetry(view.telemetry));
  if (!view.interaction && state === "AUTH_REQUIRED") {
    body.append(el("p", { class: "note", text: core
      ? "This Agent asks in text only (core tier). A text reply never approves anything."
      : "The Agent waits for an authorization it did not describe as an interaction." }));
  }
  document.getElementById("cancel").disabled = ["COMPLETED", "FAILED", "CANCELED", "REJECTED"].includes(state);
  const history = document.getElementById("history");
  history.replaceChildren(...(view.history || []).map((m) => el("li", { class: m.role },
    el("strong", { text: m.role === "you" ? "You: " : "Agent: " }), el("span", { text: m.text }))));
}

export function message(view) {
  document.getElementById("task-state").textContent = "MESSAGE";
  document.getElementById("task-id").textContent = `a direct answer · context ${view.contextId}`;
  document.getElementById("task-body").replaceChildren(
    el("p", { class: "status-text", text: view.text }), ...(view.components || []).map(component));
}
