"""The stability filter: a card is reported once, after N still, identical, confident frames."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from drivers.camera.stability import SlotObservation, SlotState, StabilityFilter

SEVEN = Card.parse("7h")
KING = Card.parse("Ks")
N = 3


def card(c: Card = SEVEN, confidence: float = 0.9, moving: bool = False) -> SlotObservation:
    return SlotObservation(SlotState.CARD, c, confidence, moving)


EMPTY = SlotObservation(SlotState.EMPTY)
HAND = SlotObservation(SlotState.BUSY, moving=True)
UNKNOWN = SlotObservation(SlotState.UNKNOWN)


def feed(filt: StabilityFilter, frames: list[SlotObservation], slot: str = "P1") -> list[list[str]]:
    return [[f"{r.slot}:{r.card}" for r in filt.update({slot: seen})] for seen in frames]


def test_reported_only_after_n_consecutive_frames() -> None:
    filt = StabilityFilter(("P1",), N, 0.6)
    assert feed(filt, [card(), card(), card(), card()]) == [[], [], ["P1:7h"], []]


def test_one_odd_frame_restarts_the_count() -> None:
    filt = StabilityFilter(("P1",), N, 0.6)
    assert feed(filt, [card(), card(), card(KING), card(), card(), card()]) == [[], [], [], [], [], ["P1:7h"]]


def test_low_confidence_and_unknown_never_report() -> None:
    filt = StabilityFilter(("P1",), N, 0.6)
    frames = [card(confidence=0.5)] * 5 + [UNKNOWN] * 5
    assert all(out == [] for out in feed(filt, frames))


def test_moving_frames_do_not_count() -> None:
    filt = StabilityFilter(("P1",), N, 0.6)
    frames = [card(moving=True)] * 6 + [card(), card(), card()]
    assert feed(filt, frames)[-1] == ["P1:7h"]
    assert sum(len(out) for out in feed(StabilityFilter(("P1",), N, 0.6), [card(moving=True)] * 6)) == 0


def test_a_hand_passing_over_a_reported_card_does_not_report_it_again() -> None:
    filt = StabilityFilter(("P1",), N, 0.6)
    frames = [card()] * N + [HAND, HAND, SlotObservation(SlotState.BUSY)] + [card()] * 6
    reports = [r for out in feed(filt, frames) for r in out]
    assert reports == ["P1:7h"]


def test_the_same_card_placed_again_after_the_slot_emptied_is_a_new_read() -> None:
    filt = StabilityFilter(("P1",), N, 0.6)
    frames = [card()] * N + [EMPTY] * N + [card()] * N
    assert [r for out in feed(filt, frames) for r in out] == ["P1:7h", "P1:7h"]


def test_a_brief_empty_view_is_not_a_removal() -> None:
    filt = StabilityFilter(("P1",), N, 0.6)
    frames = [card()] * N + [EMPTY] * (N - 1) + [card()] * N
    assert [r for out in feed(filt, frames) for r in out] == ["P1:7h"]


def test_a_different_card_on_the_slot_is_reported() -> None:
    filt = StabilityFilter(("P1",), N, 0.6)
    frames = [card()] * N + [card(KING)] * N
    assert [r for out in feed(filt, frames) for r in out] == ["P1:7h", "P1:Ks"]


def test_slots_are_independent_and_missing_slots_count_as_busy() -> None:
    filt = StabilityFilter(("P1", "B1"), N, 0.6)
    outs = [filt.update({"P1": card(), "B1": card(KING)}) for _ in range(N)]
    assert sorted(r.slot for r in outs[-1]) == ["B1", "P1"]
    assert filt.update({}) == []
    assert filt.reported("P1") == SEVEN


observations = st.one_of(
    st.builds(
        SlotObservation,
        st.just(SlotState.CARD),
        st.sampled_from(ALL_CARDS[:3]),
        st.sampled_from([0.3, 0.9]),
        st.booleans(),
    ),
    st.builds(
        SlotObservation,
        st.sampled_from([SlotState.EMPTY, SlotState.BUSY, SlotState.UNKNOWN]),
        st.none(),
        st.just(0.0),
        st.booleans(),
    ),
)


@settings(max_examples=150)
@given(frames=st.lists(observations, max_size=40), needed=st.integers(1, 5))
def test_every_report_is_backed_by_n_still_confident_identical_frames(frames, needed) -> None:
    filt = StabilityFilter(("P1",), needed, 0.6)
    last_report: Card | None = None
    for index, seen in enumerate(frames):
        reads = filt.update({"P1": seen})
        assert len(reads) <= 1
        if not reads:
            continue
        window = frames[index - needed + 1 : index + 1]
        assert len(window) == needed
        assert all(
            f.state is SlotState.CARD and f.card == reads[0].card and f.confidence >= 0.6 and not f.moving
            for f in window
        )
        assert reads[0].confidence >= 0.6
        if last_report == reads[0].card:
            # Re-reporting the same card needs the slot seen empty and still N times in between.
            between = frames[:index]
            assert any(
                all(f.state is SlotState.EMPTY and not f.moving for f in between[k : k + needed])
                for k in range(len(between) - needed + 1)
            )
        last_report = reads[0].card
