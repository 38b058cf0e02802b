// The live event stream (server-sent events of verified pushes), and what the page does while it is down: it says
// so and refreshes the open task with GetTask every 2 s, so a page whose live connection fails is never left stale.
export const REFRESH_MS = 2000;
export const DOWN_NOTE = "Live updates unavailable: refreshing every 2 s";

// onDelivery(data) for each push; onDown() while the stream fails (it retries by itself); onUp() once it works
// again; onClosed() when it stops for good (the console answered it with an error).
export function openStream({ onDelivery, onDown, onUp, onClosed }) {
  const events = new EventSource("api/events");
  events.onmessage = (event) => onDelivery(JSON.parse(event.data));
  events.onopen = () => onUp();
  events.onerror = () => {
    if (events.readyState === EventSource.CLOSED) onClosed();
    else onDown();
  };
  return events;
}

// Calls refresh() every 2 s from start() to stop(); start() again while running changes nothing.
export function refresher(refresh) {
  let timer = null;
  return {
    start() { if (timer === null) timer = setInterval(refresh, REFRESH_MS); },
    stop() { clearInterval(timer); timer = null; },
  };
}
