"""SubscriptionKeys bookkeeping, unit level: the ranks DDS defines over the collection a
read returns, when that collection is part of an instance spanning generations.

The cache is fed directly (as the reader feeds it from Cyclone), so each case is exact
and fast; tests/dcps/test_subscription_keys.py checks the same rules end to end.
"""

from __future__ import annotations

import dcps
import qos
from dcps._subscription_keys import KeyedCache
from tests.support.qos_spec import reader_qos
from tests.support.topic_types import Reading

ANY = int(dcps.SampleState.ANY) | int(dcps.ViewState.ANY) | int(dcps.InstanceState.ANY)


def cache() -> KeyedCache[Reading]:
    """A KEEP_ALL cache keyed by ``label``."""
    base = reader_qos({"reliable": True, "keep_all": True})
    return KeyedCache(Reading, base.with_(qos.SubscriptionKeys.of("label")))


def three_generations(keyed: KeyedCache[Reading]) -> None:
    """Instance ``a``: 1.0 and 2.0 (write_dispose) in generation 0, 3.0 (write_dispose)
    in generation 1, 4.0 and 5.0 in generation 2."""
    keyed.add_batch(
        [
            (Reading(1, 1.0, "a"), 10, 7, False),
            (Reading(1, 2.0, "a"), 20, 7, True),
            (Reading(1, 3.0, "a"), 30, 7, True),
            (Reading(1, 4.0, "a"), 40, 7, False),
            (Reading(1, 5.0, "a"), 50, 7, False),
        ]
    )


def ranks(samples: list[dcps.Sample[Reading]]) -> list[tuple[float, int, int, int, int]]:
    """(value, disposed generation, sample rank, generation rank, absolute generation rank)."""
    return [
        (
            s.data.value,
            s.info.disposed_generation_count,
            s.info.sample_rank,
            s.info.generation_rank,
            s.info.absolute_generation_rank,
        )
        for s in samples
    ]


class TestGenerationRanks:
    def test_whole_collection_ranks(self) -> None:
        """Read whole, the ranks count down to the latest sample, which is generation 2."""
        keyed = cache()
        three_generations(keyed)
        assert ranks(keyed.access(False, 10, ANY)) == [
            (1.0, 0, 4, 2, 2),
            (2.0, 0, 3, 2, 2),
            (3.0, 1, 2, 1, 1),
            (4.0, 2, 1, 0, 0),
            (5.0, 2, 0, 0, 0),
        ]

    def test_partial_collection_ranks_are_relative_to_its_own_last_sample(self) -> None:
        """A read of the first 3 samples: generation rank counts up to the collection's last
        sample (generation 1), absolute generation rank up to the instance's (generation 2)."""
        keyed = cache()
        three_generations(keyed)
        assert ranks(keyed.access(False, 3, ANY)) == [
            (1.0, 0, 2, 1, 2),
            (2.0, 0, 1, 1, 2),
            (3.0, 1, 0, 0, 1),
        ]

    def test_partial_take_then_the_rest(self) -> None:
        """Taking the first 2 samples, then reading the rest: each collection ranks itself."""
        keyed = cache()
        three_generations(keyed)
        assert ranks(keyed.access(True, 2, ANY)) == [(1.0, 0, 1, 0, 2), (2.0, 0, 0, 0, 2)]
        assert ranks(keyed.access(False, 10, ANY)) == [
            (3.0, 1, 2, 1, 1),
            (4.0, 2, 1, 0, 0),
            (5.0, 2, 0, 0, 0),
        ]
