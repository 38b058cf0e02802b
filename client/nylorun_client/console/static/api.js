// Calls to the console's own origin only, and the debug drawer that keeps every JSON-RPC exchange raw.
// Every Agent string is put in the page with textContent: never innerHTML (docs/console.md, "Safe by construction").

const drawer = () => document.getElementById("exchanges");
let count = 0;

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

export function record(exchanges, label) {
  for (const exchange of exchanges || []) {
    count += 1;
    const request = exchange.request;
    const method = request.body && request.body.method ? request.body.method : request.method;
    const status = exchange.response ? `HTTP ${exchange.response.status}` : "no answer";
    const item = el("li", { class: "exchange" },
      el("h3", { text: `${count}. ${label || method} → ${status}` }),
      el("p", { text: `${request.method} ${request.url}` }),
      el("h4", { text: "Request headers" }), el("pre", { text: JSON.stringify(request.headers, null, 2) }),
      el("h4", { text: "Request body" }), el("pre", { text: JSON.stringify(request.body, null, 2) }),
    );
    if (exchange.response) {
      item.append(
        el("h4", { text: "Response headers" }), el("pre", { text: JSON.stringify(exchange.response.headers, null, 2) }),
        el("h4", { text: "Response body" }), el("pre", { text: JSON.stringify(exchange.response.body, null, 2) }),
      );
    }
    if (exchange.error) item.append(el("p", { class: "error", text: exchange.error }));
    drawer().append(item);
  }
  document.getElementById("exchange-count").textContent = String(count);
}

export function recordPush(event) {
  count += 1;
  drawer().append(el("li", { class: "exchange" },
    el("h3", { text: `${count}. push delivery ${event.webhookId} (signature verified)` }),
    el("pre", { text: JSON.stringify(event.delivery, null, 2) })));
  document.getElementById("exchange-count").textContent = String(count);
}

export async function post(path, body) {
  let answer;
  try {
    const response = await fetch(path, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      credentials: "same-origin",
    });
    answer = await response.json().catch(() => ({ error: `the console answered HTTP ${response.status}` }));
  } catch (problem) {
    answer = { error: `the console cannot be reached (${problem.message}): is it still running?` };
  }
  record(answer.exchanges);
  return answer;
}

export function showError(text) {
  const box = document.getElementById("error");
  box.textContent = text || "";
  box.hidden = !text;
}
