// Pit console: renders the server's JSON view models with DOM nodes and textContent only.
// No string from a table ever reaches innerHTML, an attribute handler or a URL unescaped.
"use strict";

(function () {
  const body = document.body;
  const view = body.dataset.view;
  const tableId = body.dataset.table || "";
  const myActions = new Set(JSON.parse(body.dataset.actions || "[]"));
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const app = document.getElementById("app");
  const SUITS = { c: "♣", d: "♦", h: "♥", s: "♠" };
  const RANKS = { T: "10", J: "J", Q: "Q", K: "K", A: "A" };

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function cardNode(code, slot, hand) {
    const node = el("div", "card");
    const suit = String(code).slice(-1);
    const rank = String(code).slice(0, -1);
    if (suit === "h" || suit === "d") node.classList.add("red");
    node.dataset.card = String(code);
    node.dataset.slot = String(slot);
    node.dataset.hand = String(hand);
    node.appendChild(el("span", "rank", RANKS[rank] || rank));
    node.appendChild(el("span", "suit", SUITS[suit] || suit));
    return node;
  }

  function tableHref(prefix, id) {
    return prefix + encodeURIComponent(id);
  }

  // ------------------------------------------------------------------ floor
  function renderFloor(model) {
    const table = el("table", "floor");
    table.id = "floor";
    const head = el("tr");
    ["Table", "Status", "Hand", "Last result", "Alerts", "Held", "Backlog", "Signatures", ""].forEach((h) =>
      head.appendChild(el("th", null, h)));
    table.appendChild(head);
    for (const row of model.tables) {
      const tr = el("tr", "sev-" + row.severity);
      tr.dataset.table = row.table_id;
      const id = el("td", "table-id");
      if (row.valid_id) {
        const link = el("a", null, row.table_id);
        link.href = tableHref("/table/", row.table_id);
        id.appendChild(link);
      } else {
        id.appendChild(el("span", "invalid-id", row.table_id));
        id.appendChild(el("span", "note", " (id not valid by the contract: no actions)"));
      }
      tr.appendChild(id);
      tr.appendChild(el("td", "status status-" + row.status, row.status));
      tr.appendChild(el("td", null, row.hand === null ? "-" : row.hand));
      tr.appendChild(el("td", "result " + (row.last_result || ""), row.last_result || "-"));
      tr.appendChild(el("td", null, row.open_alerts));
      tr.appendChild(el("td", null, row.held_rounds));
      tr.appendChild(el("td", null, row.backlog === null ? "-" : row.backlog));
      tr.appendChild(el("td", "trust " + row.trust + (row.refused ? " refused" : ""),
        row.trust + (row.refused ? ", " + row.refused + " refused" : "")));
      const dealer = el("td");
      if (row.valid_id) {
        const link = el("a", null, "dealer display");
        link.href = tableHref("/dealer/", row.table_id);
        dealer.appendChild(link);
      }
      tr.appendChild(dealer);
      table.appendChild(tr);
    }
    const wrap = el("section");
    wrap.appendChild(el("h1", null, "Pit floor"));
    if (!model.tables.length) wrap.appendChild(el("p", null, "No table has published yet."));
    wrap.appendChild(table);
    return wrap;
  }

  // ------------------------------------------------------------------ table
  function sideBox(model, side) {
    const box = el("div", "box " + side);
    box.id = side + "-box";
    const slots = side === "player" ? ["P1", "P2", "P3"] : ["B1", "B2", "B3"];
    const title = el("h2", null, side === "player" ? "Player" : "Banker");
    box.appendChild(title);
    const cards = el("div", "cards");
    for (const slot of slots) {
      const code = model.round.cards[slot];
      if (code) cards.appendChild(cardNode(code, slot, model.round.hand));
      else if (model.round.next_slot === slot) cards.appendChild(el("div", "card next", slot));
    }
    box.appendChild(cards);
    const total = model.round[side + "_total"];
    box.appendChild(el("div", "total", total === null ? "–" : total));
    return box;
  }

  function layout(model, large) {
    const section = el("section", "layout" + (large ? " large" : ""));
    section.id = "layout";
    const r = model.round;
    section.appendChild(el("h2", "round-title", r.hand === null ? "No round yet" : "Round " + r.hand));
    const boxes = el("div", "boxes");
    boxes.appendChild(sideBox(model, "player"));
    boxes.appendChild(sideBox(model, "banker"));
    section.appendChild(boxes);
    const next = el("p", "next", r.open ? r.next_text : r.result ? "" : r.next_text);
    next.id = "next-card";
    section.appendChild(next);
    if (r.result) {
      const result = el("p", "result " + r.result, r.result === "tie" ? "Tie" : r.result === "player" ? "Player wins" : "Banker wins");
      result.id = "result";
      section.appendChild(result);
    }
    return section;
  }

  function road(name, title, cells, cellClass, cellText) {
    const section = el("section", "road");
    section.appendChild(el("h3", null, title));
    const grid = el("div", "grid " + name);
    grid.id = "road-" + name;
    let columns = 1;
    for (const cell of cells) columns = Math.max(columns, cell.col + 1);
    grid.style.gridTemplateColumns = "repeat(" + Math.max(columns, 12) + ", var(--cell))";
    for (const cell of cells) {
      const node = el("div", "cell " + cellClass(cell), cellText(cell));
      node.style.gridColumn = String(cell.col + 1);
      node.style.gridRow = String(cell.row + 1);
      node.dataset.col = String(cell.col);
      node.dataset.row = String(cell.row);
      grid.appendChild(node);
    }
    section.appendChild(grid);
    return section;
  }

  function roads(model) {
    const wrap = el("section", "roads");
    wrap.id = "roads";
    const rd = model.roads;
    wrap.appendChild(road("bead_plate", "Bead plate", rd.bead_plate, (c) => c.result, (c) => c.result));
    const big = road("big_road", "Big road", rd.big_road.cells,
      (c) => (c.winner === "player" ? "P" : "B") + (c.ties ? " ties" : ""),
      (c) => (c.ties ? String(c.ties) : ""));
    if (rd.big_road.leading_ties) big.appendChild(el("p", "note", "ties before the first decision: " + rd.big_road.leading_ties));
    wrap.appendChild(big);
    const names = { big_eye_boy: "Big eye boy", small_road: "Small road", cockroach_pig: "Cockroach pig" };
    for (const key of Object.keys(names)) {
      wrap.appendChild(road(key, names[key], rd[key], (c) => c.colour, () => ""));
    }
    return wrap;
  }

  function shoeFigures(model) {
    const s = model.shoe;
    const dl = el("dl", "shoe");
    dl.id = "shoe";
    const items = [["Shoe", s.shoe_id || "-"], ["Cards out", s.cards_out], ["Hands", s.hands],
      ["Player", s.player], ["Banker", s.banker], ["Tie", s.tie],
      ["Player pairs", s.player_pairs], ["Banker pairs", s.banker_pairs]];
    if (s.ended) items.push(["Shoe ended", s.ended]);
    for (const [k, v] of items) {
      const d = el("div");
      d.appendChild(el("dt", null, k));
      const dd = el("dd", null, v);
      dd.dataset.figure = k;
      d.appendChild(dd);
      dl.appendChild(d);
    }
    return dl;
  }

  function actionButton(label, action, args, fields, model) {
    const button = el("button", "action", label);
    button.dataset.action = action;
    if (!myActions.has(action)) {
      button.disabled = true;
      button.title = "your role may not " + action;
    }
    button.addEventListener("click", () => confirmAndSend(action, args, fields, model));
    return button;
  }

  // The hand an alert holds: its own number, or for "next_round" the round after the one the
  // alert is about (else the round being dealt; null lets the table pick its one held round).
  function holdHand(alert, model) {
    if (typeof alert.holds === "number") return alert.holds;
    if (alert.holds !== "next_round") return null;
    if (typeof alert.hand === "number") return alert.hand + 1;
    return model.round.open ? model.round.hand : null;
  }

  function holdsAndAlerts(model) {
    const wrap = el("section", "holds");
    wrap.id = "holds";
    wrap.appendChild(el("h2", null, "Holds and alerts"));
    if (!model.holds.length && !model.alerts.length) wrap.appendChild(el("p", "quiet", "Nothing open."));
    for (const held of model.holds) {
      const item = el("div", "hold");
      item.dataset.hand = String(held.hand);
      item.appendChild(el("h3", null, "Held round " + held.hand));
      item.appendChild(el("p", null, "Blocked by: " + (held.blocked_by.join("; ") || "-")));
      const cards = el("div", "cards small");
      for (const slot of Object.keys(held.cards)) cards.appendChild(cardNode(held.cards[slot], slot, held.hand));
      item.appendChild(cards);
      item.appendChild(holdActions(held.hand, held.cards, model));
      wrap.appendChild(item);
    }
    for (const alert of model.alerts) {
      const item = el("div", "alert");
      item.dataset.alertId = alert.alert_id;
      item.dataset.code = alert.code;
      item.appendChild(el("h3", "code", alert.code));
      item.appendChild(el("p", "message", alert.message));
      const hand = holdHand(alert, model);
      const where = el("p", "where", (alert.hand ? "hand " + alert.hand : "") +
        (alert.holds !== null ? " · holds " + (hand === null ? alert.holds : "round " + hand) : ""));
      item.appendChild(where);
      const buttons = el("div", "buttons");
      if (alert.holds !== null) {
        const cards = hand !== null && model.round.hand === hand ? model.round.cards : {};
        buttons.appendChild(holdActions(hand, cards, model));
      }
      buttons.appendChild(actionButton("Acknowledge", "acknowledge_alert", { alert_id: alert.alert_id }, [], model));
      item.appendChild(buttons);
      wrap.appendChild(item);
    }
    return wrap;
  }

  function holdActions(hand, cards, model) {
    const args = hand === null ? {} : { hand: hand };
    const box = el("span", "hold-actions");
    box.appendChild(actionButton("Confirm (resolve hold)", "resolve_hold", args, [], model));
    box.appendChild(actionButton("Correct a card", "rearrange", Object.assign({ cards: cards }, args),
      [{ name: "slot", label: "Slot", options: ["P1", "B1", "P2", "B2", "P3", "B3"] },
       { name: "card", label: "Card (e.g. 8s, Th)" }], model));
    box.appendChild(actionButton("Void round", "void_round", args, [{ name: "reason", label: "Reason" }], model));
    return box;
  }

  function history(model) {
    const wrap = el("section", "history");
    wrap.id = "history";
    wrap.appendChild(el("h2", null, "Who did what"));
    const list = el("ol");
    for (const line of model.history) {
      const when = line.ts ? new Date(line.ts * 1000).toLocaleTimeString() : "";
      list.appendChild(el("li", line.outcome, when + " " + line.actor + " " + line.action + ": " +
        line.outcome + (line.reason ? " (" + line.reason + ")" : "")));
    }
    wrap.appendChild(list);
    return wrap;
  }

  let lastReply = null;

  function replyPanel() {
    const panel = el("section", "reply");
    panel.id = "reply";
    if (lastReply) {
      panel.classList.add(lastReply.ok ? "ok" : "bad");
      panel.appendChild(el("h2", null, "Table's reply"));
      panel.appendChild(el("pre", null, lastReply.text));
      panel.dataset.status = lastReply.status;
    }
    return panel;
  }

  // Where the data comes from: verified by the table's key, or unverified (no key configured);
  // messages that failed verification are counted here and never shown.
  function trustNotes(model) {
    const box = el("div", "trust-notes");
    const trust = el("p", "trust " + model.trust, model.trust === "verified"
      ? "Signatures verified with the table's key."
      : "Unverified: no key is configured for this table, so anyone able to publish on its topics could have sent what is shown.");
    trust.id = "trust";
    trust.dataset.trust = model.trust;
    box.appendChild(trust);
    if (model.refused.count) {
      const last = model.refused.last || {};
      const refused = el("p", "refused", model.refused.count + " message(s) refused: they did not verify and are not shown" +
        (last.topic ? " (last: " + last.topic + ", " + last.reason + ")" : ""));
      refused.id = "refused";
      refused.dataset.count = String(model.refused.count);
      box.appendChild(refused);
    }
    return box;
  }

  function renderTable(model) {
    const wrap = el("div", "table-view");
    const title = el("h1", null, "Table " + model.table_id);
    title.id = "table-title";
    wrap.appendChild(title);
    wrap.appendChild(el("p", "status status-" + model.status, model.status));
    wrap.appendChild(trustNotes(model));
    wrap.appendChild(layout(model, false));
    wrap.appendChild(shoeFigures(model));
    wrap.appendChild(replyPanel());
    wrap.appendChild(holdsAndAlerts(model));
    wrap.appendChild(roads(model));
    wrap.appendChild(history(model));
    return wrap;
  }

  function renderDealer(model) {
    const wrap = el("div", "dealer");
    wrap.appendChild(el("h1", null, model.table_id));
    if (model.trust !== "verified") wrap.appendChild(el("p", "trust unverified", "unverified"));
    wrap.appendChild(layout(model, true));
    const alert = el("p", "last-alert", model.last_alert || "");
    alert.id = "last-alert";
    wrap.appendChild(alert);
    return wrap;
  }

  // ------------------------------------------------------------------ actions
  function confirmAndSend(action, args, fields, model) {
    const dialog = document.getElementById("confirm");
    const fieldBox = document.getElementById("confirm-fields");
    const text = document.getElementById("confirm-text");
    document.getElementById("confirm-title").textContent = "Send " + action + " to table " + model.table_id + "?";
    fieldBox.replaceChildren();
    const inputs = {};
    for (const f of fields) {
      const label = el("label", null, f.label + " ");
      let input;
      if (f.options) {
        input = el("select");
        for (const o of f.options) input.appendChild(el("option", null, o));
      } else {
        input = el("input");
      }
      input.name = f.name;
      input.id = "field-" + f.name;
      label.appendChild(input);
      fieldBox.appendChild(label);
      inputs[f.name] = input;
    }
    const build = () => {
      const out = JSON.parse(JSON.stringify(args));
      if (action === "rearrange") {
        out.cards = Object.assign({}, out.cards || {});
        if (inputs.card.value) out.cards[inputs.slot.value] = inputs.card.value.trim();
      } else {
        for (const name of Object.keys(inputs)) out[name] = inputs[name].value;
      }
      return out;
    };
    const show = () => { text.textContent = action + " " + JSON.stringify(build()); };
    for (const name of Object.keys(inputs)) inputs[name].addEventListener("input", show);
    show();
    dialog.returnValue = "";
    dialog.onclose = () => {
      if (dialog.returnValue === "send") send(model.table_id, action, build());
    };
    dialog.showModal();
  }

  function send(table, action, args) {
    lastReply = { ok: false, status: "sending", text: "Sending " + action + "…" };
    redraw();
    fetch("/api/command", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ table_id: table, action: action, args: args }),
    }).then((r) => r.json().then((b) => [r.status, b])).then(([status, b]) => {
      if (b.reply) {
        const r = b.reply;
        lastReply = { ok: r.status === "accepted", status: r.status,
          text: action + ": " + r.status + (r.code ? " (" + r.code + ")" : "") + (r.reason ? ": " + r.reason : "") +
            (b.reply_trust === "verified" ? "" : " [unverified reply]") };
      } else {
        lastReply = { ok: false, status: "error", text: action + ": " + (b.error || "HTTP " + status) };
      }
      redraw();
    }).catch((e) => { lastReply = { ok: false, status: "error", text: String(e) }; redraw(); });
  }

  // ------------------------------------------------------------------ stream
  let current = null;

  function redraw() {
    if (!current) return;
    if (document.getElementById("confirm").open) return; // never redraw under an open dialog
    let node;
    if (current.missing) node = el("p", "missing", "Table " + current.table_id + " has not published on the broker.");
    else if (view === "floor") node = renderFloor(current);
    else if (view === "dealer") node = renderDealer(current);
    else node = renderTable(current);
    const status = el("p", current.broker_connected ? "connected" : "disconnected",
      current.broker_connected ? "" : "Console not connected to the broker: what you see may be old.");
    status.id = "connection";
    app.replaceChildren(status, node);
    for (const grid of document.querySelectorAll(".grid")) grid.scrollLeft = grid.scrollWidth;
  }

  const who = document.getElementById("who");
  if (who) who.textContent = body.dataset.user + " (" + body.dataset.role + ")";
  document.getElementById("confirm").addEventListener("close", () => setTimeout(redraw, 0));

  if (view === "dealer") {
    // full screen needs a gesture: the first touch or click on the dealer's screen
    document.addEventListener("click", () => {
      if (!document.fullscreenElement && document.documentElement.requestFullscreen) {
        document.documentElement.requestFullscreen().catch(() => {});
      }
    });
  }

  const url = view === "floor" ? "/stream/floor" : "/stream/" + view + "/" + encodeURIComponent(tableId);
  const source = new EventSource(url);
  source.onmessage = (event) => { current = JSON.parse(event.data); redraw(); };
  source.addEventListener("expired", () => { source.close(); window.location.assign("/login"); });
})();
