"""Alerts in the pit's words: what happened and what to do, instead of the rule's code name.

The table publishes a code (``unneeded_card``) and its own message; a supervisor reads the
phrase here first, the table's message under it. A code this console does not know yet is
shown as its name with spaces.
"""

from __future__ import annotations

PIT_WORDS: dict[str, str] = {
    "unneeded_card": "A card was drawn that the tableau did not call for",
    "rescan_needed": "A card must be scanned again before the round can go on",
    "over_composition": "More of one card than the shoe can hold: check the shoe",
    "card_after_last_round": "A card came out after the shoe's last round",
    "no_shoe": "Cards are being dealt with no shoe opened",
    "device_disagreement": "The reader and the second reader disagree on a card",
    "verdict_disagreement": "The table's result and the game server's disagree",
    "camera_disagreement": "The camera sees a different card than the reader",
    "camera_slot_mismatch": "The camera sees a card in another box than the reader",
    "ambiguous_rescan": "A rescanned card could fit more than one place",
    "missing_card": "A card the round needs is missing",
    "reader_disconnected": "The card reader is disconnected",
    "reader_error": "The card reader reports an error",
    "reader_redeal": "The reader asks for the round to be dealt again",
    "forced_quit": "The shoe was forced to end",
    "unexpected_cut_card": "The cut card came out at an unexpected place",
    "invalid_input": "The table received input it could not use",
    "card_outside_game": "A card came out between rounds",
    "reader_command_refused": "The card reader refused a command",
    "shoe_settings_differ": "The shoe's settings differ from the table's",
    "journal_full_card_refused": "A card was refused: the table's record is full",
    "card_exposed_during_betting": "A card was exposed while bets were still open",
    "card_before_betting_closed": "A card was drawn before betting closed",
    "round_id_out_of_sequence": "The game server's round number is out of order",
    "betting_out_of_order": "Betting opened or closed out of order",
    "shoe_not_locked": "Dealing from a shoe that is not locked",
    "rescan_unconfirmed": "A rescan was not confirmed",
    "shoe_signal_unexpected": "The shoe sent a signal out of turn",
    "restart_gap": "The table restarted: cards may have been missed",
    "round_cut_short": "A round ended with cards missing",
    "reader_gap": "The card reader dropped out during a round",
    "empty_betting_window": "Betting closed but no card came",
    "shoe_silent": "No card has come from the shoe for a while",
    "clock_unsynchronised": "The table's clock is not synchronised: betting cannot open",
    "clock_gate_closed": "Betting was refused: the table's clock cannot be trusted",
    "shoe_count_mismatch": "The shoe's cards do not add up: cards are missing or extra",
    "shoe_irregular": "The shoe's order looks unshuffled or repeated: check the shuffle",
    "mqtt_dead_letter": "Some events could not be delivered to the game server",
    "mqtt_delivery_failing": "Events are not reaching the game server",
    "journal_nearly_full": "The table's record is nearly full",
    "journal_full": "The table's record is full",
    "journal_recovered": "The table's record was recovered after a fault",
    "journal_rolled_back": "The table's record went back in time",
    "journal_continuity_unproven": "The table cannot prove its record is complete",
    "engine_error": "The table's game logic stopped on an error",
    "server_ack_lagging": "The game server is slow to confirm events",
    "tls_certificate_dates": "A certificate is expired or not yet valid",
    "integrity_failed": "The table's software differs from what was shipped",
}


def pit_words(code: str) -> str:
    """The pit's phrase for an alert code (the code with spaces when unknown)."""
    return PIT_WORDS.get(code, code.replace("_", " ").capitalize()[:120])
