// interactions/v1 as typed forms. The answer goes in message metadata under the URI, with the URI in
// message.extensions (Profile v2): an approval is never sent as text, so "yes" typed in the message box approves nothing.
import { el } from "./api.js";

export const INTERACTIONS = "https://docs.nylorun.com/a2a/interactions/v1";

export function answerMessage(view, fields, text) {
  return {
    messageId: crypto.randomUUID(), role: "ROLE_USER", taskId: view.taskId, contextId: view.contextId,
    parts: [{ text }], extensions: [INTERACTIONS],
    metadata: { [INTERACTIONS]: { interactionId: view.interaction.interactionId, ...fields } },
  };
}

function detailList(detail) {
  const entries = Object.entries(detail || {}).filter(([key]) => key !== "authorizationUrl");
  if (!entries.length) return null;
  return el("dl", { class: "detail" }, ...entries.flatMap(([key, value]) => [
    el("dt", { text: key }), el("dd", { text: typeof value === "string" ? value : JSON.stringify(value) })]));
}

function authorizationUrl(detail) {
  const url = detail && (detail.authorizationUrl || detail.authorization_url);
  return typeof url === "string" && /^https?:\/\//i.test(url) ? url : null;
}

// `send(message)` sends the answer; returns the form for the open interaction, or null.
export function interactionForm(view, send) {
  const open = view.interaction;
  if (!open || !["INPUT_REQUIRED", "AUTH_REQUIRED"].includes((view.state || "").replace("TASK_STATE_", ""))) return null;
  const form = el("form", { class: `interaction ${open.kind}`, "aria-label": `${open.kind} from the Agent` },
    el("h3", { text: open.kind === "approval" ? "Approval needed" : open.kind === "question" ? "Question" : "Connection needed" }),
    el("p", { class: "prompt", text: open.prompt }), detailList(open.detail));
  const button = (label, action, kind = "") => {
    const node = el("button", { type: "button", class: kind, text: label });
    node.addEventListener("click", () => { form.querySelectorAll("button").forEach((b) => { b.disabled = true; }); action(); });
    return node;
  };
  if (open.kind === "approval") {
    form.append(el("div", { class: "buttons" },
      button("Approve", () => send(answerMessage(view, { approved: true }, "approved")), "primary"),
      button("Deny", () => send(answerMessage(view, { approved: false }, "denied")), "danger")));
  } else if (open.kind === "question") {
    const input = el("input", { type: "text", name: "answer", "aria-label": "Your answer", required: "" });
    form.append(el("div", { class: "row" }, input, el("button", { type: "submit", class: "primary", text: "Answer" })));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (input.value.trim()) send(answerMessage(view, { value: input.value }, input.value));
    });
  } else {
    const url = authorizationUrl(open.detail);
    const confirm = () => send(answerMessage(view, { approved: true }, "connected"));
    const buttons = el("div", { class: "buttons" });
    if (url) {
      // The only navigation away from the console, started by the person, in a new tab.
      buttons.append(button("Connect (opens a new tab)", () => {
        window.open(url, "_blank", "noopener,noreferrer");
        form.querySelectorAll("button").forEach((b) => { b.disabled = false; });
      }, "primary"), button("I have connected", confirm));
    } else {
      buttons.append(button("Connect", confirm, "primary"));
    }
    buttons.append(button("Decline", () => send(answerMessage(view, { approved: false }, "not connected")), "danger"));
    form.append(buttons);
  }
  return form;
}
