// Squeeze reveal check in the browser: the rules of daemon/mqtt/reveal_check.py, with WebCrypto.
//
// A squeeze table publishes each card face down: card_dealt carries a commitment, no card. The
// reveal (card_revealed) carries the card and its nonce. The commitment (scheme sha256-nonce-v1)
// is the lowercase hex SHA-256 of the UTF-8 bytes of
//   "baccarat-edge card commitment v1\n" + table_id + "\n" + shoe_id + "\n" + round + "\n"
//   + slot + "\n" + card + "\n" + nonce
// check() recomputes it and compares it with the commitment published at the deal:
//   verified   the revealed card is the card committed at the deal
//   unchecked  the deal was not seen here; the reveal agrees with the commitment it names
//   failed     with problem reveal_mismatch (another card, or another nonce, than committed),
//              reveal_commitment_changed (the reveal names another commitment than the deal),
//              reveal_malformed, reveal_unknown_scheme
//   unavailable  this page cannot hash (WebCrypto needs https or localhost)
"use strict";

(function (root) {
  const SCHEME = "sha256-nonce-v1";
  const DOMAIN = "baccarat-edge card commitment v1\n";
  const HEX64 = /^[0-9a-f]{64}$/;
  const NONCE = /^[0-9a-f]{32}$/;
  const CARD = /^[2-9TJQKA][cdhs]$/;
  const SLOTS = new Set(["P1", "P2", "P3", "B1", "B2", "B3", "burn"]);

  function commitmentText(tableId, shoeId, round, slot, card, nonce) {
    return DOMAIN + tableId + "\n" + shoeId + "\n" + String(round) + "\n" + slot + "\n" + card + "\n" + nonce;
  }

  async function commitment(tableId, shoeId, round, slot, card, nonce) {
    const bytes = new TextEncoder().encode(commitmentText(tableId, shoeId, round, slot, card, nonce));
    const digest = new Uint8Array(await root.crypto.subtle.digest("SHA-256", bytes));
    return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function malformed(r) {
    if (typeof r.shoe_id !== "string") return "no shoe id";
    if (!Number.isInteger(r.round)) return "the round is not an integer";
    if (!SLOTS.has(r.slot)) return "the slot is not P1..B3 or burn";
    if (typeof r.card !== "string" || !CARD.test(r.card)) return "the card is not a card code";
    if (typeof r.nonce !== "string" || !NONCE.test(r.nonce)) return "the nonce is not 32 lowercase hex characters";
    if (typeof r.commitment !== "string" || !HEX64.test(r.commitment)) return "the commitment is not 64 lowercase hex characters";
    return null;
  }

  // r: {table_id, shoe_id, round, slot, card, nonce, commitment (the reveal's), scheme,
  //     dealt (the commitment of the slot's card_dealt, or null when not seen)}
  async function check(r) {
    const bad = malformed(r);
    if (bad) return { status: "failed", problem: "reveal_malformed", detail: bad };
    if ((r.scheme || SCHEME) !== SCHEME) {
      return { status: "failed", problem: "reveal_unknown_scheme", detail: "scheme " + String(r.scheme).slice(0, 40) + " is not " + SCHEME };
    }
    if (!root.crypto || !root.crypto.subtle) {
      return { status: "unavailable", problem: null, detail: "this page cannot check reveals: open the console over https or on localhost" };
    }
    const recomputed = await commitment(r.table_id, r.shoe_id, r.round, r.slot, r.card, r.nonce);
    if (typeof r.dealt !== "string") {
      if (recomputed !== r.commitment) {
        return { status: "failed", problem: "reveal_mismatch", detail: "card " + r.card + " with its nonce does not hash to the commitment the reveal names" };
      }
      return { status: "unchecked", problem: null, detail: "its deal was before this page saw the round" };
    }
    if (r.dealt !== r.commitment) {
      return { status: "failed", problem: "reveal_commitment_changed", detail: "the reveal names another commitment than the deal published" };
    }
    if (recomputed !== r.dealt) {
      return { status: "failed", problem: "reveal_mismatch", detail: "card " + r.card + " is not the card committed at the deal" };
    }
    return { status: "verified", problem: null, detail: "" };
  }

  root.BaccaratRevealCheck = Object.freeze({ SCHEME, commitmentText, commitment, check });
})(self);
