// Pit console: one live stream for every console page of this browser (a shared worker).
// A browser opens at most six connections to one host: with one stream per page, six open
// pages would leave none for a seventh page or for an action. Here each page names the views
// it shows; the worker holds a single EventSource carrying all of them and hands each page
// the models of its own views.
"use strict";

const pages = new Map(); // port -> {views: [...], seen: ms}
const latest = new Map(); // view -> its newest model
let source = null;
let sourceKey = "";
const PAGE_SILENT_MS = 15000; // a page pings every 5 s; one silent this long is gone

function wanted() {
  const views = new Set();
  for (const page of pages.values()) for (const v of page.views) views.add(v);
  return Array.from(views).sort();
}

function reconnect() {
  const views = wanted();
  const key = views.join("\n");
  if (key === sourceKey && source) return;
  for (const v of Array.from(latest.keys())) if (!views.includes(v)) latest.delete(v);
  if (source) source.close();
  source = null;
  sourceKey = key;
  if (!views.length) return;
  const next = new EventSource("/stream?" + views.map((v) => "v=" + encodeURIComponent(v)).join("&"));
  next.onmessage = (event) => {
    const message = JSON.parse(event.data);
    latest.set(message.view, message.model);
    for (const [port, page] of pages) {
      if (page.views.includes(message.view)) port.postMessage({ type: "model", view: message.view, model: message.model });
    }
  };
  next.onerror = () => {
    // a refused stream (429/503) is not retried by the browser: try again in a few seconds
    if (next.readyState === EventSource.CLOSED && source === next) {
      source = null;
      sourceKey = "";
      setTimeout(reconnect, 5000);
    }
  };
  next.addEventListener("expired", () => {
    next.close();
    source = null;
    sourceKey = "";
    latest.clear();
    for (const port of pages.keys()) port.postMessage({ type: "expired" });
    pages.clear();
  });
  source = next;
}

setInterval(() => {
  const now = Date.now();
  let gone = false;
  for (const [port, page] of pages) {
    if (now - page.seen > PAGE_SILENT_MS) { pages.delete(port); gone = true; }
  }
  if (gone) reconnect();
}, 5000);

self.onconnect = (event) => {
  const port = event.ports[0];
  port.onmessage = (msg) => {
    const data = msg.data || {};
    if (data.type === "views" && Array.isArray(data.views)) {
      const views = data.views.map(String).slice(0, 64);
      pages.set(port, { views: views, seen: Date.now() });
      for (const v of views) if (latest.has(v)) port.postMessage({ type: "model", view: v, model: latest.get(v) });
      reconnect();
    } else if (data.type === "ping") {
      const page = pages.get(port);
      if (page) page.seen = Date.now();
    } else if (data.type === "bye") {
      pages.delete(port);
      reconnect();
    }
  };
  port.start();
};
