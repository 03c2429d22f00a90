"""One timeout convention: every blocking call takes a timedelta or seconds, None for forever."""

from __future__ import annotations

import math
import time
import typing
from datetime import timedelta

import pytest

import dcps
import qos
from dcps._timeout import INFINITE_NS, timeout_ns, timeout_seconds
from tests.support.topic_types import Reading


class TestConversion:
    @pytest.mark.parametrize(
        ("value", "seconds"),
        [
            (timedelta(milliseconds=250), 0.25),
            (0.25, 0.25),
            (2, 2.0),
            (0, 0.0),
            (None, None),
            (timedelta.max, None),
            (qos.INFINITE, None),
        ],
    )
    def test_timedelta_seconds_and_forever_agree(self, value, seconds) -> None:
        """A timedelta and the same seconds convert alike; None and INFINITE mean no deadline."""
        assert timeout_seconds(value) == seconds
        expected_ns = INFINITE_NS if seconds is None else round(seconds * 1e9)
        assert timeout_ns(value) == expected_ns

    @pytest.mark.parametrize("value", [-1, timedelta(seconds=-1), math.nan, "1", True])
    def test_bad_timeouts_are_refused_by_name(self, value) -> None:
        """Negative, NaN and non-numeric timeouts raise BadParameterError naming the argument."""
        with pytest.raises(dcps.BadParameterError, match="max wait"):
            timeout_seconds(value, "max wait")


class TestEntities:
    def test_every_blocking_call_takes_both_forms(self, domain_id, topic_name) -> None:
        """wait_for_readers, WaitSet.wait and wait_for_acknowledgments accept both forms alike."""
        with dcps.DomainParticipant(domain_id) as participant:
            topic = dcps.Topic(participant, topic_name, Reading)
            writer = dcps.DataWriter(participant, topic)
            reader = dcps.DataReader(participant, topic)
            for timeout in (timedelta(seconds=10), 10.0, 10):
                writer.wait_for_readers(timeout=timeout)
                reader.wait_for_writers(timeout=timeout)
                writer.wait_for_acknowledgments(timeout)
            with dcps.WaitSet(participant) as waitset, dcps.GuardCondition(participant) as guard:
                waitset.attach(guard)
                for timeout in (timedelta(milliseconds=20), 0.02):
                    started = time.monotonic()
                    with pytest.raises(dcps.DcpsTimeoutError):
                        waitset.wait(timeout)
                    assert time.monotonic() - started >= 0.015
            with pytest.raises(dcps.BadParameterError, match="timeout"):
                reader.wait_for_writers(timeout=-1)
            with pytest.raises(dcps.BadParameterError, match="timeout"):
                writer.publisher.wait_for_acknowledgments("soon")  # type: ignore[arg-type]


class TestPublicAlias:
    def test_dcps_timeout_is_what_blocking_calls_take(self) -> None:
        """``dcps.Timeout`` is public, is ``timedelta | float``, and is what the core's
        blocking calls declare (so user code can annotate its own timeouts with it)."""
        assert typing.get_args(dcps.Timeout) == (timedelta, float)
        for call in (
            dcps.DataReader.wait_for_data,
            dcps.DataWriter.wait_for_acknowledgments,
            dcps.WaitSet.wait,
        ):
            assert typing.get_type_hints(call)["timeout"] == dcps.Timeout | None, call
