"""The project's ULID codec, checked against python-ulid (a test-only dependency) as the oracle."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
import ulid
from hypothesis import given
from hypothesis import strategies as st

from dynamodb_outbox import ulid_codec
from dynamodb_outbox.ulid_codec import (
    MAX_MILLISECONDS,
    lowest_ulid_of,
    new_ulid,
    ulid_datetime,
    ulid_milliseconds,
    ulid_of,
)

milliseconds = st.integers(min_value=0, max_value=MAX_MILLISECONDS)
randomness = st.binary(min_size=10, max_size=10)


@given(milliseconds, randomness)
def test_encoding_matches_python_ulid_bit_for_bit(ms: int, random: bytes) -> None:
    expected = str(ulid.ULID.from_bytes(ms.to_bytes(6, "big") + random))
    assert ulid_of(ms, random) == expected
    assert ulid_milliseconds(expected) == ms


@given(milliseconds, randomness, milliseconds, randomness)
def test_string_order_is_numeric_order(ms_a: int, r_a: bytes, ms_b: int, r_b: bytes) -> None:
    a, b = ulid_of(ms_a, r_a), ulid_of(ms_b, r_b)
    as_int_a = ms_a << 80 | int.from_bytes(r_a, "big")
    as_int_b = ms_b << 80 | int.from_bytes(r_b, "big")
    assert (a < b) == (as_int_a < as_int_b)


@given(milliseconds, randomness)
def test_lowest_ulid_of_a_millisecond_bounds_it(ms: int, random: bytes) -> None:
    assert lowest_ulid_of(ms) <= ulid_of(ms, random)
    if ms:
        assert ulid_of(ms - 1, random) < lowest_ulid_of(ms)


def test_new_ulid_is_now_random_and_canonical() -> None:
    before = time.time_ns() // 1_000_000
    made = [new_ulid() for _ in range(200)]
    after = time.time_ns() // 1_000_000
    assert len(set(made)) == 200
    for text in made:
        assert before <= ulid_milliseconds(text) <= after
        assert str(ulid.ULID.from_str(text)) == text


def test_ulids_of_one_process_strictly_increase_within_a_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frozen_ns = 1_700_000_000_000 * 1_000_000
    monkeypatch.setattr(ulid_codec, "_last", 0)  # this process's last ULID, restored after
    monkeypatch.setattr(time, "time_ns", lambda: frozen_ns)
    made = [new_ulid() for _ in range(50)]
    assert made == sorted(made)
    assert len(set(made)) == 50
    assert {ulid_milliseconds(text) for text in made} == {1_700_000_000_000}


def test_a_clock_stepping_back_does_not_break_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_800_000_000_000 * 1_000_000]
    monkeypatch.setattr(ulid_codec, "_last", 0)
    monkeypatch.setattr(time, "time_ns", lambda: now[0])
    first = new_ulid()
    now[0] -= 5_000 * 1_000_000
    assert new_ulid() > first


def test_datetime_is_the_exact_millisecond_in_utc() -> None:
    text = ulid_of(1_700_000_000_123, bytes(10))
    assert ulid_datetime(text) == datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=UTC)
    assert ulid_datetime(text) == ulid.ULID.from_str(text).datetime


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "26 characters, got 0"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FA", "26 characters, got 25"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FAVX", "26 characters, got 27"),
        ("01arz3ndektsv4rrffq69g5fav", "'a' is not an upper-case character"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FAU", "'U' is not an upper-case character"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FAI", "'I' is not an upper-case character"),
        ("8" + "0" * 25, "at most '7'"),
        ("Z" * 26, "at most '7'"),
    ],
)
def test_non_canonical_text_is_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        ulid_milliseconds(text)


def test_the_largest_ulid_is_accepted() -> None:
    assert ulid_milliseconds("7" + "Z" * 25) == MAX_MILLISECONDS


def test_non_strings_are_refused() -> None:
    with pytest.raises(ValueError, match="a ULID is a string, got int"):
        ulid_milliseconds(12)  # type: ignore[arg-type]


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
        ulid_of(ms, random)
