// Pit console: renders the server's JSON view models with DOM nodes and textContent only.
// No string from a table ever reaches innerHTML, an attribute handler or a URL unescaped.
"use strict";

(function () {
  const root = self;
  const body = document.body;
  const view = body.dataset.view;
  const tableId = body.dataset.table || "";
  const myActions = new Set(JSON.parse(body.dataset.actions || "[]"));
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const app = document.getElementById("app");
  const SUITS = { c: "♣", d: "♦", h: "♥", s: "♠" };
  const RANKS = { T: "10", J: "J", Q: "Q", K: "K", A: "A" };
  const WINNER = { player: "Player wins", banker: "Banker wins", tie: "Tie" };
  const STATUS_SHAPE = { online: "✔", offline: "✖", unknown: "?", silent: "◷" };
  const SILENT_S = 300; // an online table without a card for this long reads "silent"

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // Every string a table sent goes into its own <bdi>: right-to-left or bidi-control text in
  // it cannot reorder the words around it (a table id, an alert, a name).
  function bidi(text) {
    return el("bdi", null, text === null || text === undefined ? "" : text);
  }

  function line(tag, cls, parts) {
    const node = el(tag, cls);
    for (const part of parts) node.appendChild(typeof part === "string" ? document.createTextNode(part) : part);
    return node;
  }

  function age(at) {
    if (typeof at !== "number") return "never";
    const s = Math.max(0, Math.round(Date.now() / 1000 - at));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  // A live age: the ticker rewrites every [data-since] once a second.
  function ageNode(cls, prefix, at) {
    const node = el("span", cls, prefix + age(at));
    if (typeof at === "number") { node.dataset.since = String(at); node.dataset.prefix = prefix; }
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

  // A squeeze slot dealt and not revealed: the back of a card, never a face.
  function faceDownNode(slot, hand) {
    const node = el("div", "card face-down");
    node.dataset.slot = String(slot);
    node.dataset.hand = String(hand);
    node.dataset.faceDown = "1";
    node.setAttribute("aria-label", slot + " face down");
    node.appendChild(el("span", "back", "▒"));
    return node;
  }

  // ------------------------------------------------------------------ squeeze reveals
  // Each reveal of the round shown is checked once (reveal-check.js) against the commitment
  // published at the deal; failures are kept for the page's life, named, on every view.
  const revealVerdicts = new Map(); // key -> verdict (a pending check: status "checking")
  const revealProblems = []; // failed checks, newest first: {table_id, round, slot, card, problem, detail}

  function revealKey(model, slot, reveal) {
    return [model.table_id, model.shoe.shoe_id, model.round.hand, slot, reveal.card, reveal.nonce, reveal.commitment].join("|");
  }

  function checkReveals(model) {
    if (!model || !model.round || !model.round.reveals || !root.BaccaratRevealCheck) return;
    for (const [slot, reveal] of Object.entries(model.round.reveals)) {
      const key = revealKey(model, slot, reveal);
      if (revealVerdicts.has(key)) continue;
      revealVerdicts.set(key, { status: "checking", problem: null, detail: "" });
      const dealt = model.round.commitments ? model.round.commitments[slot] : null;
      root.BaccaratRevealCheck.check({
        table_id: model.table_id, shoe_id: model.shoe.shoe_id, round: model.round.hand, slot: slot,
        card: reveal.card, nonce: reveal.nonce, commitment: reveal.commitment, dealt: dealt || null,
      }).then((verdict) => {
        revealVerdicts.set(key, verdict);
        if (verdict.problem) {
          revealProblems.unshift({ table_id: model.table_id, round: model.round.hand, slot: slot, card: reveal.card,
            problem: verdict.problem, detail: verdict.detail });
        }
        redraw();
      });
    }
  }

  function revealVerdict(model, slot) {
    const reveal = model.round.reveals && model.round.reveals[slot];
    return reveal ? revealVerdicts.get(revealKey(model, slot, reveal)) || null : null;
  }

  // The named problem of every failed reveal of this table: the card shown is not the one dealt.
  function revealAlerts(model) {
    const mine = revealProblems.filter((p) => p.table_id === model.table_id);
    const box = el("section", "reveal-problems");
    box.id = "reveal-problems";
    if (!mine.length) return box;
    box.appendChild(el("h2", null, "▲ Revealed card does not match its commitment"));
    for (const p of mine) {
      const item = line("p", "mark critical reveal-problem", ["▲ ", el("code", null, p.problem), ": round " + p.round +
        " " + p.slot + ", card shown " + p.card + ": ", bidi(p.detail), ". Do not settle this round on it."]);
      item.dataset.problem = p.problem;
      item.dataset.slot = p.slot;
      box.appendChild(item);
    }
    return box;
  }

  function tableHref(prefix, id) {
    return prefix + encodeURIComponent(id);
  }

  // online, offline, unknown, or "silent": online but no card for SILENT_S
  function shownStatus(model) {
    if (model.status !== "online") return model.status === "offline" ? "offline" : "unknown";
    if (typeof model.last_card_at === "number" && Date.now() / 1000 - model.last_card_at > SILENT_S) return "silent";
    return "online";
  }

  function statusNode(model) {
    const status = shownStatus(model);
    const node = el("span", "status status-" + status);
    node.dataset.status = status;
    node.appendChild(el("span", "shape", STATUS_SHAPE[status] + " "));
    node.appendChild(document.createTextNode(status));
    return node;
  }

  function bettingText(phase) {
    return { betting: "bets open", dealing: "dealing", waiting: "waiting" }[phase] || "-";
  }

  function dealerText(dealer) {
    if (!dealer) return null;
    return dealer.name || dealer.dealer_id || "none";
  }

  // ------------------------------------------------------------------ floor
  function floorTile(row) {
    const tile = el("article", "tile sev-" + row.severity);
    tile.dataset.table = row.table_id;
    const head = el("h2", "tile-head");
    head.title = row.table_id; // a long id is cut to two lines: all of it on hover
    if (row.valid_id) {
      const link = el("a", "table-link");
      link.appendChild(bidi(row.table_id));
      link.href = tableHref("/table/", row.table_id);
      link.dataset.focusKey = "tile:" + row.table_id;
      head.appendChild(link);
    } else {
      head.appendChild(line("span", "invalid-id", [bidi(row.table_id)]));
      head.appendChild(el("span", "note", " (id not valid by the contract: no actions)"));
    }
    tile.appendChild(head);
    tile.appendChild(statusNode(row));
    const facts = el("dl", "facts");
    const add = (k, v, cls) => {
      const d = el("div", cls);
      d.appendChild(el("dt", null, k));
      const dd = el("dd");
      dd.appendChild(typeof v === "object" && v !== null ? v : bidi(v === null || v === undefined ? "-" : v));
      dd.dataset.figure = k;
      d.appendChild(dd);
      facts.appendChild(d);
    };
    add("Hand", row.hand);
    add("Last card", ageNode("age", "", row.last_card_at));
    add("Betting", bettingText(row.betting));
    add("Cards left", row.cards_left);
    add("Dealer", dealerText(row.dealer));
    add("Limits", row.limits);
    add("Variant", row.variant);
    add("Backlog", row.backlog);
    add("Rounds/h", row.rounds_per_hour === null ? null : Math.round(row.rounds_per_hour));
    tile.appendChild(facts);
    const marks = el("p", "marks");
    if (row.held_rounds) marks.appendChild(el("span", "mark held", "▲ " + row.held_rounds + " held"));
    if (row.open_alerts) marks.appendChild(el("span", "mark alerts " + (row.critical ? "critical" : "warning"),
      (row.critical ? "▲ " : "◆ ") + row.open_alerts + " alert" + (row.open_alerts > 1 ? "s" : "")));
    marks.appendChild(el("span", "trust " + row.trust + (row.refused ? " refused" : ""),
      (row.trust === "verified" ? "✔ " : "⚠ ") + row.trust + (row.refused ? ", " + row.refused + " refused" : "")));
    tile.appendChild(marks);
    tile.appendChild(miniRoad(row.big_road));
    if (row.valid_id) {
      const link = el("a", "dealer-link", "dealer display");
      link.href = tableHref("/dealer/", row.table_id);
      tile.appendChild(link);
    }
    return tile;
  }

  function miniRoad(cells) {
    const grid = el("div", "grid mini big_road");
    const first = cells.length ? Math.min.apply(null, cells.map((c) => c.col)) : 0;
    for (const cell of cells) {
      const node = el("div", "cell " + (cell.winner === "player" ? "P" : "B"), cell.ties ? String(cell.ties) : "");
      node.style.gridColumn = String(cell.col - first + 1);
      node.style.gridRow = String(cell.row + 1);
      grid.appendChild(node);
    }
    return grid;
  }

  function renderFloor(model) {
    const wrap = el("section", "floor-view");
    wrap.appendChild(el("h1", null, "Pit floor"));
    if (model.refused_unknown) {
      wrap.appendChild(el("p", "refused", "▲ " + model.refused_unknown +
        " message(s) refused on table ids not on the floor (they did not verify)"));
    }
    if (!model.tables.length) wrap.appendChild(el("p", null, "No table has published yet."));
    const tiles = el("div", "tiles");
    tiles.id = "floor";
    for (const row of model.tables) tiles.appendChild(floorTile(row));
    wrap.appendChild(tiles);
    return wrap;
  }

  // ------------------------------------------------------------------ table
  function sideBox(model, side) {
    const box = el("div", "box " + side);
    box.id = side + "-box";
    const slots = side === "player" ? ["P1", "P2", "P3"] : ["B1", "B2", "B3"];
    box.appendChild(el("h2", null, side === "player" ? "Player" : "Banker"));
    const cards = el("div", "cards");
    const hidden = new Set(model.round.hidden || []);
    for (const slot of slots) {
      const code = model.round.cards[slot];
      if (code) {
        const node = cardNode(code, slot, model.round.hand);
        const verdict = revealVerdict(model, slot);
        if (verdict) {
          node.dataset.reveal = verdict.status;
          if (verdict.problem) node.dataset.problem = verdict.problem;
          const mark = { verified: "✔", unchecked: "?", failed: "✖", unavailable: "?", checking: "…" }[verdict.status];
          const tag = el("span", "reveal-mark " + verdict.status, mark);
          tag.title = verdict.status === "verified" ? "matches the commitment made at the deal" : verdict.problem || verdict.detail;
          node.appendChild(tag);
        }
        cards.appendChild(node);
      } else if (hidden.has(slot)) cards.appendChild(faceDownNode(slot, model.round.hand));
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
      const result = el("p", "result " + r.result, (r.result === "tie" ? "= " : r.result === "player" ? "● " : "■ ") + WINNER[r.result]);
      result.id = "result";
      section.appendChild(result);
    }
    return section;
  }

  function road(name, title, cells, cellClass, cellText) {
    const section = el("section", "road");
    section.appendChild(el("h3", null, title));
    const scroller = el("div", "scroller");
    scroller.tabIndex = 0;
    scroller.setAttribute("aria-label", title + " (scrolls; newest column on the right)");
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
    scroller.appendChild(grid);
    section.appendChild(scroller);
    return section;
  }

  function askMarkers(ask) {
    const box = el("div", "ask");
    box.id = "ask";
    box.appendChild(el("h3", null, "Ask: what the next round adds"));
    const names = { big_eye_boy: "Big eye boy", small_road: "Small road", cockroach_pig: "Cockroach pig" };
    for (const winner of ["banker", "player"]) {
      const row = el("p", "ask-" + winner, winner === "banker" ? "Banker ■ → " : "Player ● → ");
      for (const key of Object.keys(names)) {
        const colour = ask[winner][key];
        const mark = el("span", "ask-mark " + key + " " + (colour || "none"), names[key] + " " + (colour || "–"));
        mark.dataset.road = key;
        row.appendChild(mark);
      }
      box.appendChild(row);
    }
    return box;
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
    if (model.ask) wrap.appendChild(askMarkers(model.ask));
    return wrap;
  }

  function shoeFigures(model) {
    const s = model.shoe;
    const dl = el("dl", "shoe");
    dl.id = "shoe";
    const items = [["Shoe", s.shoe_id || "-"], ["Cards out", s.cards_out], ["Cards left", model.cards_left === null ? "-" : model.cards_left],
      ["Hands", s.hands], ["Player", s.player], ["Banker", s.banker], ["Tie", s.tie],
      ["Player pairs", s.player_pairs], ["Banker pairs", s.banker_pairs],
      ["Betting", bettingText(model.betting)], ["Dealer", dealerText(model.dealer) || "-"],
      ["Limits", model.limits || "-"], ["Variant", model.variant || "-"]];
    if (s.ended) items.push(["Shoe ended", s.ended]);
    for (const [k, v] of items) {
      const d = el("div");
      d.appendChild(el("dt", null, k));
      const dd = el("dd");
      dd.appendChild(bidi(v));
      dd.dataset.figure = k;
      d.appendChild(dd);
      dl.appendChild(d);
    }
    const last = el("div");
    last.appendChild(el("dt", null, "Last card"));
    const dd = el("dd");
    dd.appendChild(ageNode("age", "", model.last_card_at));
    dd.dataset.figure = "Last card";
    last.appendChild(dd);
    dl.appendChild(last);
    return dl;
  }

  function actionButton(label, action, args, fields, model, key) {
    const button = el("button", "action", label);
    button.dataset.action = action;
    button.dataset.focusKey = action + ":" + key;
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
    if (!model.holds.length && !model.alerts.length) wrap.appendChild(el("p", "quiet", "✔ Nothing open."));
    for (const held of model.holds) {
      const item = el("div", "hold critical");
      item.dataset.hand = String(held.hand);
      item.dataset.key = "hold:" + held.hand;
      item.appendChild(el("h3", null, "▲ Held round " + held.hand));
      item.appendChild(line("p", null, ["Blocked by: ", bidi(held.blocked_by.join("; ") || "-")]));
      const cards = el("div", "cards small");
      for (const slot of Object.keys(held.cards)) cards.appendChild(cardNode(held.cards[slot], slot, held.hand));
      for (const slot of held.hidden || []) cards.appendChild(faceDownNode(slot, held.hand));
      item.appendChild(cards);
      item.appendChild(holdActions(held.hand, held.cards, model, (held.hidden || []).length > 0));
      wrap.appendChild(item);
    }
    for (const alert of model.alerts) {
      const item = el("div", "alert " + alert.severity);
      item.dataset.alertId = alert.alert_id;
      item.dataset.code = alert.code;
      item.dataset.key = "alert:" + alert.alert_id;
      item.appendChild(line("h3", "words", [alert.severity === "critical" ? "▲ " : "◆ ", bidi(alert.words)]));
      const meta = el("p", "meta");
      meta.appendChild(el("span", "severity", alert.severity));
      meta.appendChild(document.createTextNode(" · "));
      meta.appendChild(ageNode("age", "open ", alert.raised_at));
      meta.appendChild(document.createTextNode(" · "));
      meta.appendChild(line("span", "code", [bidi(alert.code)]));
      item.appendChild(meta);
      item.appendChild(line("p", "message", [bidi(alert.message)]));
      const hand = holdHand(alert, model);
      item.appendChild(el("p", "where", (alert.hand ? "hand " + alert.hand : "") +
        (alert.holds !== null ? " · holds " + (hand === null ? alert.holds : "round " + hand) : "")));
      const buttons = el("div", "buttons");
      if (alert.holds !== null) {
        const cards = hand !== null && model.round.hand === hand ? model.round.cards : {};
        const faceDown = hand !== null && model.round.hand === hand && (model.round.hidden || []).length > 0;
        buttons.appendChild(holdActions(hand, cards, model, faceDown));
      }
      buttons.appendChild(actionButton("Acknowledge", "acknowledge_alert", { alert_id: alert.alert_id }, [], model, alert.alert_id));
      item.appendChild(buttons);
      wrap.appendChild(item);
    }
    return wrap;
  }

  // faceDown: a squeeze round with cards not revealed: the page does not know them, so it cannot
  // send the whole round corrected (rearrange names every card); confirm and void still work.
  function holdActions(hand, cards, model, faceDown) {
    const args = hand === null ? {} : { hand: hand };
    const box = el("span", "hold-actions");
    box.appendChild(actionButton("Confirm (resolve hold)", "resolve_hold", args, [], model, hand));
    if (!faceDown) {
      box.appendChild(actionButton("Correct a card", "rearrange", Object.assign({ cards: cards }, args),
        [{ name: "slot", label: "Slot", options: ["P1", "B1", "P2", "B2", "P3", "B3"] },
         { name: "card", label: "Card (e.g. 8s, Th)" }], model, hand));
    }
    box.appendChild(actionButton("Void round", "void_round", args, [{ name: "reason", label: "Reason" }], model, hand));
    return box;
  }

  function when(ts) {
    return typeof ts === "number" && ts ? new Date(ts * 1000).toLocaleTimeString() + " " : "";
  }

  function history(model) {
    const wrap = el("section", "history");
    wrap.id = "history";
    wrap.appendChild(el("h2", null, "Who did what"));
    const list = el("ol");
    for (const h of model.history) {
      list.appendChild(line("li", h.outcome, [when(h.ts), bidi(h.actor), " ", bidi(h.action), ": " + h.outcome,
        h.reason ? " (" : "", h.reason ? bidi(h.reason) : "", h.reason ? ")" : ""]));
    }
    wrap.appendChild(list);
    return wrap;
  }

  function alertHistory(model) {
    const wrap = el("section", "alert-history");
    wrap.id = "alert-history";
    wrap.appendChild(el("h2", null, "Resolved and acknowledged"));
    const list = el("ol");
    for (const a of model.alert_history || []) {
      list.appendChild(line("li", null, [when(a.ts), "✔ ", bidi(a.words), " — " + a.how + " by ", bidi(a.actor),
        a.open_s !== null ? " after " + a.open_s + " s" : ""]));
    }
    if (!list.children.length) list.appendChild(el("li", "quiet", "none yet"));
    wrap.appendChild(list);
    return wrap;
  }

  function lastRounds(model) {
    const wrap = el("section", "last-rounds");
    wrap.id = "last-rounds";
    wrap.appendChild(el("h2", null, "Last rounds"));
    const table = el("table");
    const head = el("tr");
    for (const h of ["Hand", "Result", "Player", "Banker"]) head.appendChild(el("th", null, h));
    table.appendChild(head);
    for (const r of model.last_rounds || []) {
      const tr = el("tr", "result-" + r.winner);
      tr.appendChild(el("td", null, r.hand));
      tr.appendChild(el("td", "result " + r.winner, WINNER[r.winner] || r.winner));
      for (const [side, prefix] of [["player", "P"], ["banker", "B"]]) {
        const td = el("td");
        const cards = el("span", "cards tiny");
        for (const slot of [prefix + "1", prefix + "2", prefix + "3"]) {
          if (r.cards[slot]) cards.appendChild(cardNode(r.cards[slot], slot, r.hand));
        }
        td.appendChild(cards);
        const total = r[side + "_total"];
        td.appendChild(el("span", "total-small", total === null ? "" : " " + total));
        tr.appendChild(td);
      }
      table.appendChild(tr);
    }
    wrap.appendChild(table);
    return wrap;
  }

  // Pace and accuracy per dealer and for the table (rounds per hour, the split of a round,
  // dealing mistakes per 100 rounds): the table's own, from its journal (its health), else
  // what this console saw of a table that does not report it.
  function pace(model) {
    const wrap = el("section", "pace");
    wrap.id = "pace";
    wrap.dataset.source = model.pace_source;
    wrap.appendChild(el("h2", null, model.pace_source === "table"
      ? "Dealers' pace (from the table's journal)" : "Dealers' pace (since the console started)"));
    const table = el("table");
    const head = el("tr");
    for (const h of ["Dealer", "Rounds", "Per hour", "Bet s", "Deal s", "Settle s", "Mistakes /100"]) head.appendChild(el("th", null, h));
    table.appendChild(head);
    const rows = [["Table", model.pace.table]].concat(Object.entries(model.pace.dealers).map(([d, f]) => [d || "(no dealer named)", f]));
    for (const [name, f] of rows) {
      const tr = el("tr");
      tr.dataset.dealer = name;
      const cell = el("td");
      cell.appendChild(bidi(name));
      tr.appendChild(cell);
      tr.appendChild(el("td", null, f.rounds));
      tr.appendChild(el("td", null, f.rounds_per_hour === null ? "-" : Math.round(f.rounds_per_hour)));
      for (const phase of ["betting", "dealing", "settling"]) tr.appendChild(el("td", null, f.seconds_per_round[phase]));
      const mistakes = Object.entries(f.mistakes_per_100_rounds).map(([k, v]) => (model.mistake_names[k] || k) + " " + v);
      tr.appendChild(el("td", null, mistakes.join(", ") || "none"));
      table.appendChild(tr);
    }
    wrap.appendChild(table);
    return wrap;
  }

  let lastReply = null;

  function replyPanel() {
    const panel = el("section", "reply");
    panel.id = "reply";
    if (lastReply) {
      panel.classList.add(lastReply.ok ? "ok" : "bad");
      panel.appendChild(el("h2", null, (lastReply.ok ? "✔ " : "✖ ") + "Table's reply"));
      panel.appendChild(line("pre", null, [bidi(lastReply.text)]));
      panel.dataset.status = lastReply.status;
    }
    return panel;
  }

  // Where the data comes from: verified by the table's key, or unverified (no key configured);
  // messages that failed verification are counted here and never shown.
  function trustNotes(model) {
    const box = el("div", "trust-notes");
    const trust = el("p", "trust " + model.trust, model.trust === "verified"
      ? "✔ Signatures verified with the table's key."
      : "⚠ Unverified: no key is configured for this table, so anyone able to publish on its topics could have sent what is shown.");
    trust.id = "trust";
    trust.dataset.trust = model.trust;
    box.appendChild(trust);
    if (model.refused.count) {
      const last = model.refused.last || {};
      const refused = line("p", "refused", ["▲ " + model.refused.count + " message(s) refused: they did not verify and are not shown",
        last.topic ? " (last: " : "", last.topic ? bidi(last.topic + ", " + last.reason) : "", last.topic ? ")" : ""]);
      refused.id = "refused";
      refused.dataset.count = String(model.refused.count);
      box.appendChild(refused);
    }
    return box;
  }

  // A dealer takes the table: the supervisor's dealer_changed (the table refuses an id or name
  // outside its safe characters; the name is optional and left out when empty).
  function dealerChange(model) {
    const box = el("div", "dealer-change");
    box.id = "dealer-change";
    box.appendChild(actionButton("Dealer change", "dealer_changed", {},
      [{ name: "dealer_id", label: "Dealer id" }, { name: "name", label: "Name (optional)", optional: true }],
      model, "table"));
    return box;
  }

  function renderTable(model) {
    const wrap = el("div", "table-view");
    const title = line("h1", null, ["Table ", bidi(model.table_id)]);
    title.id = "table-title";
    wrap.appendChild(title);
    const top = el("div", "top");
    top.appendChild(statusNode(model));
    top.appendChild(trustNotes(model));
    wrap.appendChild(top);
    const cols = el("div", "columns");
    const left = el("div", "col-main");
    left.appendChild(layout(model, false));
    left.appendChild(shoeFigures(model));
    left.appendChild(dealerChange(model));
    left.appendChild(roads(model));
    const right = el("div", "col-side");
    right.appendChild(revealAlerts(model));
    right.appendChild(replyPanel());
    right.appendChild(holdsAndAlerts(model));
    right.appendChild(lastRounds(model));
    right.appendChild(alertHistory(model));
    right.appendChild(pace(model));
    right.appendChild(history(model));
    cols.appendChild(left);
    cols.appendChild(right);
    wrap.appendChild(cols);
    return wrap;
  }

  function renderPane(model) {
    const wrap = el("div", "pane");
    wrap.dataset.table = model.table_id;
    const title = line("h2", null, [bidi(model.table_id), " "]);
    title.appendChild(statusNode(model));
    wrap.appendChild(title);
    if (model.missing) { wrap.appendChild(el("p", "missing", "not on the broker")); return wrap; }
    wrap.appendChild(layout(model, false));
    wrap.appendChild(revealAlerts(model));
    const big = model.roads.big_road.cells;
    const newest = big.reduce((m, c) => Math.max(m, c.col), -1);
    wrap.appendChild(miniRoad(big.filter((c) => c.col > newest - 16)));
    for (const held of model.holds) wrap.appendChild(el("p", "mark held", "▲ held round " + held.hand));
    for (const alert of model.alerts) wrap.appendChild(line("p", "mark alerts " + alert.severity,
      [alert.severity === "critical" ? "▲ " : "◆ ", bidi(alert.words)]));
    const link = el("a", null, "open table view");
    link.href = tableHref("/table/", model.table_id);
    wrap.appendChild(link);
    return wrap;
  }

  function renderDealer(model) {
    const wrap = el("div", "dealer");
    wrap.appendChild(line("h1", null, [bidi(model.table_id)]));
    if (model.trust !== "verified") wrap.appendChild(el("p", "trust unverified", "⚠ unverified"));
    wrap.appendChild(layout(model, true));
    wrap.appendChild(revealAlerts(model));
    const alert = line("p", "last-alert", model.last_alert ? ["▲ ", bidi(model.last_alert)] : []);
    alert.id = "last-alert";
    wrap.appendChild(alert);
    return wrap;
  }

  // ------------------------------------------------------------------ new holds: flash and sound
  let knownHolds = null; // keys of the holds and alerts seen; null before the first model
  let audio = null;

  function soundOn() {
    return localStorage.getItem("console-sound") === "on";
  }

  function beep() {
    if (!soundOn()) return;
    try {
      audio = audio || new AudioContext();
      const osc = audio.createOscillator();
      const gain = audio.createGain();
      osc.frequency.value = 880;
      gain.gain.value = 0.2;
      osc.connect(gain).connect(audio.destination);
      osc.start();
      osc.stop(audio.currentTime + 0.4);
    } catch (e) { /* no audio device: the flash still shows */ }
  }

  function flashNew(root) {
    const items = root.querySelectorAll("[data-key]");
    const keys = new Set(Array.from(items, (n) => n.dataset.key));
    if (knownHolds !== null) {
      let fresh = false;
      for (const node of items) {
        if (!knownHolds.has(node.dataset.key)) { node.classList.add("flash"); fresh = true; }
      }
      if (fresh) { beep(); document.title = "▲ " + document.title.replace(/^▲ /, ""); }
    }
    knownHolds = keys;
  }

  // ------------------------------------------------------------------ actions
  function confirmAndSend(action, args, fields, model) {
    const dialog = document.getElementById("confirm");
    const fieldBox = document.getElementById("confirm-fields");
    const text = document.getElementById("confirm-text");
    document.getElementById("confirm-title").replaceChildren(
      document.createTextNode("Send " + action + " to table "), bidi(model.table_id), document.createTextNode("?"));
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
        for (const f of fields) {
          const value = inputs[f.name].value;
          if (!f.optional) out[f.name] = value;
          else if (value.trim()) out[f.name] = value.trim();
        }
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

  // ------------------------------------------------------------------ drawing
  const models = new Map(); // view key -> newest model
  const panes = view === "tables" ? tableId.split(",").filter((t) => t) : [];
  const viewKeys = view === "floor" ? ["floor"] : view === "tables" ? panes.map((t) => "table:" + t) : [view + ":" + tableId];

  function redraw() {
    if (!models.size) return;
    // the page under an open dialog keeps updating: the dialog lives outside #app
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.focusKey : null;
    const scrolled = {};
    for (const s of document.querySelectorAll(".scroller")) {
      const grid = s.querySelector(".grid");
      if (grid && s.scrollLeft + s.clientWidth < s.scrollWidth - 4) scrolled[grid.id] = s.scrollLeft;
    }
    const first = models.get(viewKeys[0]) || models.values().next().value;
    let node;
    if (view === "tables") {
      node = el("div", "panes");
      node.id = "panes";
      for (const key of viewKeys) if (models.has(key)) node.appendChild(renderPane(models.get(key)));
    } else if (first.missing) node = line("p", "missing", ["Table ", bidi(first.table_id), " has not published on the broker."]);
    else if (view === "floor") node = renderFloor(first);
    else if (view === "dealer") node = renderDealer(first);
    else node = renderTable(first);
    const status = el("p", first.broker_connected ? "connected" : "disconnected",
      first.broker_connected ? "" : "✖ Console not connected to the broker: what you see may be old.");
    status.id = "connection";
    app.replaceChildren(status, node);
    flashNew(app);
    // roads show their newest column, unless the person scrolled back to look at older ones
    for (const s of document.querySelectorAll(".scroller")) {
      const grid = s.querySelector(".grid");
      s.scrollLeft = grid && grid.id in scrolled ? scrolled[grid.id] : s.scrollWidth;
    }
    if (focused) {
      const again = Array.from(document.querySelectorAll("[data-focus-key]")).find((n) => n.dataset.focusKey === focused);
      if (again) again.focus();
    }
  }

  setInterval(() => {
    for (const node of document.querySelectorAll("[data-since]")) {
      node.textContent = node.dataset.prefix + age(Number(node.dataset.since));
    }
  }, 1000);

  const who = document.getElementById("who");
  if (who) who.textContent = body.dataset.user + " (" + body.dataset.role + ")";
  const sound = document.getElementById("sound");
  if (sound) {
    const label = () => { sound.textContent = soundOn() ? "♪ Sound on" : "✖ Sound off"; sound.setAttribute("aria-pressed", String(soundOn())); };
    sound.addEventListener("click", () => { localStorage.setItem("console-sound", soundOn() ? "off" : "on"); label(); beep(); });
    label();
  }

  if (view === "dealer") {
    // full screen needs a gesture: the first touch or click on the dealer's screen
    document.addEventListener("click", () => {
      if (!document.fullscreenElement && document.documentElement.requestFullscreen) {
        document.documentElement.requestFullscreen().catch(() => {});
      }
    });
  }

  // ------------------------------------------------------------------ the live data
  function onModel(key, model) { models.set(key, model); if (key !== "floor") checkReveals(model); redraw(); }
  function onExpired() { window.location.assign("/login"); }

  if (typeof SharedWorker !== "undefined") {
    // one stream for all of this browser's console pages (see console-worker.js)
    const worker = new SharedWorker("/static/console-worker.js");
    const port = worker.port;
    port.onmessage = (event) => {
      const msg = event.data || {};
      if (msg.type === "model") onModel(msg.view, msg.model);
      else if (msg.type === "expired") onExpired();
    };
    port.start();
    const hello = () => port.postMessage({ type: "views", views: viewKeys });
    hello();
    setInterval(() => port.postMessage({ type: "ping" }), 5000);
    window.addEventListener("pagehide", () => port.postMessage({ type: "bye" }));
    window.addEventListener("pageshow", (e) => { if (e.persisted) hello(); });
  } else {
    const source = new EventSource("/stream?" + viewKeys.map((v) => "v=" + encodeURIComponent(v)).join("&"));
    source.onmessage = (event) => { const m = JSON.parse(event.data); onModel(m.view, m.model); };
    source.addEventListener("expired", () => { source.close(); onExpired(); });
  }
})();
