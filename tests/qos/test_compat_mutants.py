"""Exact messages and group QoS of the compatibility check (found by mutation testing).

A user reads these messages to fix a mismatch; each must name both sides' values,
and check_compatible must judge Presentation with the publisher and subscriber given.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from idl._errors import IncompatibleQosError
from qos import (
    DataReaderQos,
    DataWriterQos,
    Durability,
    Liveliness,
    Presentation,
    PresentationAccessScope,
    PublisherQos,
    Reliability,
    SubscriberQos,
    check_compatible,
    compatibility,
)

SECOND = timedelta(seconds=1)
COHERENT = Presentation(PresentationAccessScope.TOPIC, True, False)


class TestMessages:
    def test_lease_mismatch_names_both_leases(self) -> None:
        """A lease mismatch says the reader's and the writer's lease durations."""
        [found] = compatibility(
            DataWriterQos(Liveliness.automatic(2 * SECOND)),
            DataReaderQos(Liveliness.automatic(SECOND)),
        )
        assert found.policy is Liveliness
        assert found.reason == (
            "reader requests lease_duration 0:00:01, writer offers 0:00:02 (must be no longer)"
        )

    def test_check_compatible_message_is_every_reason_in_order(self) -> None:
        """The error's message is a fixed lead followed by each reason, '; '-separated."""
        with pytest.raises(IncompatibleQosError) as caught:
            check_compatible(
                DataWriterQos(Reliability.BEST_EFFORT),
                DataReaderQos(Reliability.RELIABLE, Durability.TRANSIENT_LOCAL),
            )
        assert str(caught.value) == (
            "writer and reader QoS are incompatible: "
            "Durability: reader requests TRANSIENT_LOCAL, writer offers VOLATILE; "
            "Reliability: reader requests RELIABLE, writer offers BEST_EFFORT"
        )


class TestGroupQos:
    def test_check_compatible_uses_the_publisher_given(self) -> None:
        """A publisher offering coherent access satisfies a subscriber requesting it."""
        check_compatible(
            DataWriterQos(),
            DataReaderQos(),
            PublisherQos(COHERENT),
            SubscriberQos(COHERENT),
        )

    def test_check_compatible_uses_the_subscriber_given(self) -> None:
        """A subscriber requesting coherent access fails a default publisher."""
        with pytest.raises(IncompatibleQosError, match="coherent_access"):
            check_compatible(DataWriterQos(), DataReaderQos(), None, SubscriberQos(COHERENT))
