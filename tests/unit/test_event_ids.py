"""Event ids: python-ulid's ULIDs in canonical form, strictly increasing within a process."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
import ulid
from hypothesis import given
from hypothesis import strategies as st

from dynamodb_outbox import event_ids
from dynamodb_outbox.event_ids import (
    MAX_MILLISECONDS,
    event_id_at,
    event_id_datetime,
    event_id_milliseconds,
    lowest_event_id_at,
    new_event_id,
)

milliseconds = st.integers(min_value=0, max_value=MAX_MILLISECONDS)
randomness = st.binary(min_size=10, max_size=10)


@pytest.fixture
def fresh_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """A generator with no history, so a frozen clock is not below its last reading."""
    monkeypatch.setattr(event_ids, "_generator", event_ids._Generator())


@given(milliseconds, randomness)
def test_an_exact_id_is_python_ulids_encoding(ms: int, random: bytes) -> None:
    expected = str(ulid.ULID.from_bytes(ms.to_bytes(6, "big") + random))
    assert event_id_at(ms, random) == expected
    assert event_id_milliseconds(expected) == ms


@given(milliseconds, randomness, milliseconds, randomness)
def test_string_order_is_numeric_order(ms_a: int, r_a: bytes, ms_b: int, r_b: bytes) -> None:
    a, b = event_id_at(ms_a, r_a), event_id_at(ms_b, r_b)
    as_int_a = ms_a << 80 | int.from_bytes(r_a, "big")
    as_int_b = ms_b << 80 | int.from_bytes(r_b, "big")
    assert (a < b) == (as_int_a < as_int_b)


@given(milliseconds, randomness)
def test_lowest_id_of_a_millisecond_bounds_it(ms: int, random: bytes) -> None:
    assert lowest_event_id_at(ms) <= event_id_at(ms, random)
    if ms:
        assert event_id_at(ms - 1, random) < lowest_event_id_at(ms)


def test_new_ids_are_now_random_and_canonical() -> None:
    before = time.time_ns() // 1_000_000
    made = [new_event_id() for _ in range(200)]
    after = time.time_ns() // 1_000_000
    assert len(set(made)) == 200
    for text in made:
        assert before <= event_id_milliseconds(text) <= after
        assert str(ulid.ULID.from_str(text)) == text


@pytest.mark.usefixtures("fresh_generator")
def test_ids_of_one_process_strictly_increase_within_a_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: 1_700_000_000_000 * 1_000_000)
    made = [new_event_id() for _ in range(50)]
    assert made == sorted(made)
    assert len(set(made)) == 50
    assert {event_id_milliseconds(text) for text in made} == {1_700_000_000_000}


@pytest.mark.usefixtures("fresh_generator")
def test_a_clock_stepping_back_does_not_break_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_800_000_000_000 * 1_000_000]
    monkeypatch.setattr(time, "time_ns", lambda: now[0])
    first = new_event_id()
    now[0] -= 5_000 * 1_000_000
    assert new_event_id() > first


def test_ids_made_by_many_threads_are_distinct() -> None:
    made: list[list[str]] = [[] for _ in range(8)]

    def make(into: list[str]) -> None:
        into.extend(new_event_id() for _ in range(2_000))

    threads = [threading.Thread(target=make, args=(batch,)) for batch in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every_id = [event_id for batch in made for event_id in batch]
    assert len(set(every_id)) == len(every_id) == 16_000
    assert all(batch == sorted(batch) for batch in made)


def test_datetime_is_the_exact_millisecond_in_utc() -> None:
    text = event_id_at(1_700_000_000_123, bytes(10))
    assert event_id_datetime(text) == datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=UTC)


def test_datetime_past_year_9999_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"not a representable date|out of range"):
        event_id_datetime("7" + "Z" * 25)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "26 characters"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FA", "26 characters"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FAVX", "26 characters"),
        ("01arz3ndektsv4rrffq69g5fav", "canonical form"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FAU", "can only consist of"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FAI", "can only consist of"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FA\u00e9", "can only consist of"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FA\ud800", "can only consist of"),
        ("8" + "0" * 25, "overflow"),
        ("Z" * 26, "overflow"),
    ],
)
def test_non_canonical_text_is_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        event_id_milliseconds(text)


def test_the_largest_ulid_is_accepted() -> None:
    assert event_id_milliseconds("7" + "Z" * 25) == MAX_MILLISECONDS


def test_non_strings_are_refused() -> None:
    with pytest.raises(ValueError, match="a ULID is a string, got int"):
        event_id_milliseconds(12)


@pytest.mark.parametrize(
    ("ms", "random", "why"),
    [
        (-1, bytes(10), "ULID time must be"),
        (MAX_MILLISECONDS + 1, bytes(10), "ULID time must be"),
        (0, bytes(9), "randomness must be 10 bytes, got 9"),
    ],
)
def test_out_of_range_parts_are_refused(ms: int, random: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        event_id_at(ms, random)
