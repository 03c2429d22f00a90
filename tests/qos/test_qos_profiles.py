"""Named QoS profiles: the shipped built-ins and user TOML files."""

import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

import qos
from idl._errors import BadParameterError, InconsistentPolicyError
from qos import (
    INFINITE,
    DataRepresentation,
    DataRepresentationId,
    Deadline,
    Durability,
    History,
    Liveliness,
    LivelinessKind,
    Partition,
    Presentation,
    PresentationAccessScope,
    Profile,
    Properties,
    Reliability,
    SubscriptionKeys,
    TimeBasedFilter,
    UserData,
    check_compatible,
    load_profiles,
    profile,
    to_cyclone,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    return path


class TestBuiltins:
    def test_sensor_data(self) -> None:
        """sensor_data is best effort, keep last 5, volatile."""
        p = profile("sensor_data")
        for qos_set in (p.topic, p.writer, p.reader):
            assert qos_set[Reliability] == Reliability.BEST_EFFORT
            assert qos_set[History] == History.keep_last(5)
            assert qos_set[Durability] == Durability.VOLATILE

    @pytest.mark.parametrize("name", ["reliable_state", "parameters"])
    def test_state_profiles(self, name: str) -> None:
        """reliable_state and parameters are reliable, transient-local, keep last 1."""
        p = profile(name)
        for qos_set in (p.topic, p.writer, p.reader):
            assert qos_set[Reliability].kind is Reliability.RELIABLE.kind
            assert qos_set[Durability] == Durability.TRANSIENT_LOCAL
            assert qos_set[History] == History.keep_last(1)

    def test_event_stream(self) -> None:
        """event_stream is reliable and keeps all samples."""
        p = profile("event_stream")
        assert p.writer[Reliability] == Reliability.RELIABLE
        assert p.reader[History] == History.KEEP_ALL
        assert p.reader[Durability] == Durability.VOLATILE

    def test_command(self) -> None:
        """command is reliable, volatile, keep last."""
        p = profile("command")
        assert p.reader[Reliability] == Reliability.RELIABLE
        assert p.reader[Durability] == Durability.VOLATILE
        assert p.reader[History].depth == 10

    def test_every_builtin_matches_itself_and_describes_itself(self) -> None:
        """Each built-in profile's writer and reader are compatible, and it has a description."""
        for name, p in qos.builtin_profiles().items():
            assert p.name == name
            assert p.description
            check_compatible(p.writer, p.reader, p.publisher, p.subscriber)

    def test_unknown_profile(self) -> None:
        """An unknown profile name raises naming it and the known ones."""
        with pytest.raises(BadParameterError, match=r"'sensor'.*sensor_data"):
            profile("sensor")

    def test_profiles_file_is_packaged(self) -> None:
        """The built-ins come from qos/profiles.toml inside the package."""
        import importlib.resources

        assert importlib.resources.files("qos").joinpath("profiles.toml").is_file()


@dataclass
class Event(IdlStruct, typename="qos_test.Event"):
    n: int


class TestBuiltinsOnCyclone:
    @pytest.mark.parametrize("name", sorted(qos.builtin_profiles()))
    def test_profile_creates_real_entities(
        self, domain_id: int, topic_name: str, name: str
    ) -> None:
        """Every built-in profile is accepted by Cyclone and its endpoints exchange data."""
        p = profile(name)
        participant = DomainParticipant(domain_id)
        topic = Topic(participant, topic_name, Event, qos=to_cyclone(p.topic))
        partition = Partition(topic_name)
        publisher = Publisher(participant, qos=to_cyclone(p.publisher.with_(partition)))
        subscriber = Subscriber(participant, qos=to_cyclone(p.subscriber.with_(partition)))
        reader = DataReader(subscriber, topic, qos=to_cyclone(p.reader))
        writer = DataWriter(publisher, topic, qos=to_cyclone(p.writer))
        deadline = time.monotonic() + 10
        received: list[int] = []
        while not received and time.monotonic() < deadline:
            writer.write(Event(1))
            received = [e.n for e in reader.take(N=10)]
            time.sleep(0.02)
        assert received
        assert received[0] == 1


class TestUserFiles:
    def test_full_user_file(self, tmp_path: Path) -> None:
        """A user file gives per-entity sections, a base profile, and every value syntax."""
        path = write(
            tmp_path,
            """
            [telemetry]
            description = "Robot telemetry"
            base = "sensor_data"
            [telemetry.writer]
            deadline = { period = "100ms" }
            liveliness = { kind = "manual_by_topic", lease_duration = 2.5 }
            user_data = "hello"
            [telemetry.reader]
            subscription_keys = ["robot", "pose.frame"]
            time_based_filter = 0.05
            data_representation = ["xcdr2"]
            deadline = "infinite"
            [telemetry.publisher]
            partition = ["robots", "fleet*"]
            presentation = { access_scope = "topic", coherent_access = true }
            [telemetry.subscriber]
            partition = "robots"
            [telemetry.reader.properties]
            site = "lab"
            """,
        )
        library = load_profiles(path)
        assert list(library) == ["telemetry"]
        assert library.source == str(path)
        p = library["telemetry"]
        assert isinstance(p, Profile)
        assert p.description == "Robot telemetry"
        assert p.writer[Reliability] == Reliability.BEST_EFFORT  # from the base
        assert p.writer[History] == History.keep_last(5)
        assert p.writer[Deadline].period == timedelta(milliseconds=100)
        assert p.writer[Liveliness] == Liveliness(
            LivelinessKind.MANUAL_BY_TOPIC, timedelta(seconds=2.5)
        )
        assert p.writer[UserData].value == b"hello"
        assert p.reader[SubscriptionKeys] == SubscriptionKeys.of("robot", "pose.frame")
        assert p.reader[TimeBasedFilter].minimum_separation == timedelta(milliseconds=50)
        assert p.reader[DataRepresentation].values == (DataRepresentationId.XCDR2,)
        assert p.reader[Deadline].period == INFINITE
        assert p.publisher[Partition].names == ("robots", "fleet*")
        assert p.publisher[Presentation] == Presentation(PresentationAccessScope.TOPIC, True)
        assert p.subscriber[Partition].names == ("robots",)
        assert p.reader[Properties]["site"] == "lab"
        assert profile("telemetry", library) is p
        assert profile("telemetry", path) == p
        assert profile("command", library) == profile("command")

    def test_common_section_applies_where_it_fits(self, tmp_path: Path) -> None:
        """common policies go to topic, writer and reader, each taking what applies to it."""
        path = write(
            tmp_path,
            """
            [p.common]
            reliability = { kind = "reliable", max_blocking_time = "1s" }
            time_based_filter = "10ms"
            history = "keep_all"
            [p.reader]
            history = 3
            """,
        )
        p = load_profiles(path)["p"]
        assert p.topic[Reliability] == Reliability.reliable(timedelta(seconds=1))
        assert p.writer[Reliability] == Reliability.reliable(timedelta(seconds=1))
        assert p.reader[TimeBasedFilter].minimum_separation == timedelta(milliseconds=10)
        assert p.writer[History] == History.KEEP_ALL
        assert p.reader[History] == History.keep_last(3)

    def test_base_within_the_same_file(self, tmp_path: Path) -> None:
        """A base profile may be defined later in the same file."""
        path = write(
            tmp_path,
            """
            [child]
            base = "parent"
            [child.reader]
            history = 2
            [parent.common]
            durability = "transient_local"
            """,
        )
        library = load_profiles(path)
        assert library["child"].reader[Durability] == Durability.TRANSIENT_LOCAL
        assert library["child"].reader[History].depth == 2


BAD_FILES = [
    (
        "[p.reader]\nhistroy = 3\n",
        BadParameterError,
        r"profile 'p': reader: unknown policy 'histroy'",
    ),
    (
        "[p.writer]\nhistory = { kind = 'keep_last', dept = 3 }\n",
        BadParameterError,
        r"profile 'p': writer\.history: unknown field 'dept'",
    ),
    ("[p]\nreliabilty = 'reliable'\n", BadParameterError, r"profile 'p': unknown key 'reliabilty'"),
    (
        "[p.reader]\nreliability = 'sometimes'\n",
        BadParameterError,
        r"profile 'p': reader\.reliability: expected one of best_effort, reliable",
    ),
    (
        "[p.writer]\ndeadline = { period = 'soon' }\n",
        BadParameterError,
        r"profile 'p': writer\.deadline\.period: expected a duration",
    ),
    (
        "[p.writer]\nhistory = 0\n",
        BadParameterError,
        r"profile 'p': writer\.history: History\.depth",
    ),
    (
        "[p.writer]\ntime_based_filter = 1\n",
        BadParameterError,
        r"profile 'p': writer: 'time_based_filter' does not apply to a DataWriter",
    ),
    (
        "[p.reader]\nownership_strength = 1\n",
        BadParameterError,
        r"profile 'p': reader: 'ownership_strength' does not apply",
    ),
    (
        "[p]\nbase = 'nowhere'\n",
        BadParameterError,
        r"profile 'p': base profile 'nowhere' not found",
    ),
    ("[a]\nbase = 'b'\n[b]\nbase = 'a'\n", BadParameterError, r"cycle"),
    (
        "[p.writer]\nhistory = 5\nresource_limits = { max_samples_per_instance = 2 }\n",
        InconsistentPolicyError,
        r"profile 'p': History\.depth \(5\) exceeds",
    ),
    ("[p.reader\nhistory = 5\n", BadParameterError, r"not a valid TOML file"),
    (
        "[p.reader]\nuser_data = 5\n",
        BadParameterError,
        r"profile 'p': reader\.user_data: expected a string",
    ),
    (
        "[p.reader]\nreliability = { kind = 'reliable', max_blocking_time = -1 }\n",
        BadParameterError,
        r"reader\.reliability\.max_blocking_time: duration must not be negative",
    ),
]


class TestMalformedFiles:
    @pytest.mark.parametrize(("text", "error", "message"), BAD_FILES)
    def test_error_names_file_profile_and_key(
        self, tmp_path: Path, text: str, error: type[Exception], message: str
    ) -> None:
        """A malformed profile file raises naming the file, the profile and the offending key."""
        path = write(tmp_path, text)
        with pytest.raises(error, match=message) as caught:
            load_profiles(path)
        assert str(caught.value).startswith(str(path))

    def test_missing_file(self, tmp_path: Path) -> None:
        """A file that cannot be read raises BadParameterError naming it."""
        with pytest.raises(BadParameterError, match=r"missing\.toml"):
            load_profiles(tmp_path / "missing.toml")

    def test_library_must_be_a_library_or_path(self) -> None:
        """profile() rejects a library argument of another type."""
        with pytest.raises(BadParameterError, match="ProfileLibrary"):
            profile("command", library=42)  # type: ignore[arg-type]
