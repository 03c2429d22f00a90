"""The dcps exception tree: every family, what it also is, and Cyclone's codes mapped onto it."""

from __future__ import annotations

import pytest
from cyclonedds.core import DDSException

import dcps
from dcps._cyclone.binding import entity_ref
from dcps._cyclone.calls import read_take
from dcps._cyclone.retcode import error_for
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

FAMILIES = [
    (dcps.BadParameterError, ValueError, DDSException.DDS_RETCODE_BAD_PARAMETER),
    (dcps.PreconditionNotMetError, RuntimeError, DDSException.DDS_RETCODE_PRECONDITION_NOT_MET),
    (dcps.InconsistentPolicyError, ValueError, DDSException.DDS_RETCODE_INCONSISTENT_POLICY),
    (dcps.ImmutablePolicyError, ValueError, DDSException.DDS_RETCODE_IMMUTABLE_POLICY),
    (dcps.AlreadyClosedError, RuntimeError, DDSException.DDS_RETCODE_ALREADY_DELETED),
    (dcps.DcpsTimeoutError, TimeoutError, DDSException.DDS_RETCODE_TIMEOUT),
    (dcps.NotEnabledError, RuntimeError, DDSException.DDS_RETCODE_NOT_ENABLED),
    (dcps.OutOfResourcesError, RuntimeError, DDSException.DDS_RETCODE_OUT_OF_RESOURCES),
    (dcps.IllegalOperationError, RuntimeError, DDSException.DDS_RETCODE_ILLEGAL_OPERATION),
    (dcps.UnsupportedError, NotImplementedError, DDSException.DDS_RETCODE_UNSUPPORTED),
]


class TestTree:
    @pytest.mark.parametrize(("cls", "builtin", "code"), FAMILIES)
    def test_each_family_is_a_dcps_error_and_its_builtin(self, cls, builtin, code) -> None:
        """Callers can catch by DDS family, by dcps' root, or by the built-in exception."""
        error = error_for(code, "an operation")
        assert type(error) is cls
        assert isinstance(error, dcps.DcpsError)
        assert isinstance(error, builtin)
        assert "an operation failed" in str(error)
        assert "DDS_RETCODE_" in str(error)
        assert not isinstance(error, MemoryError)  # the interpreter's out-of-memory class

    @pytest.mark.parametrize(("cls", "builtin", "code"), FAMILIES)
    def test_each_family_shows_under_its_public_name(self, cls, builtin, code) -> None:
        """Tracebacks and repr name ``dcps.<Error>``, not the private module defining it."""
        assert cls.__module__ == "dcps"
        assert getattr(dcps, cls.__name__) is cls
        assert repr(cls) == f"<class 'dcps.{cls.__name__}'>"

    def test_idl_and_filter_errors_are_bad_parameters(self) -> None:
        """Malformed types, samples and expressions are bad parameters too."""
        assert issubclass(dcps.IdlSyntaxError, dcps.IdlError)
        assert issubclass(dcps.IdlError, dcps.BadParameterError)
        assert issubclass(dcps.FilterSyntaxError, dcps.BadParameterError)
        err = dcps.IdlSyntaxError("unexpected '}'", file="a.idl", line=3, column=7)
        assert (err.file, err.line, err.column) == ("a.idl", 3, 7)
        assert str(err).startswith("a.idl:3:7:")

    def test_an_unknown_code_is_still_a_dcps_error(self) -> None:
        """A code dcps does not know becomes the root class, with the code in the text."""
        error = error_for(-99, "something")
        assert type(error) is dcps.DcpsError
        assert "-99" in str(error)


class TestFromCyclone:
    def test_reading_from_a_writer_is_an_illegal_operation(self, domain_id, topic_name) -> None:
        """Cyclone's ILLEGAL_OPERATION for a read on a writer maps to IllegalOperationError."""
        with dcps.DomainParticipant(domain_id) as participant:
            writer = dcps.DataWriter(participant, dcps.Topic(participant, topic_name, Reading))
            code = read_take(False, entity_ref(writer.handle), 0, 4)
            assert isinstance(code, int)
            assert isinstance(error_for(code, "read"), dcps.IllegalOperationError)

    def test_unknown_instance_handle_is_a_bad_parameter(self, domain_id, topic_name) -> None:
        """Reading an instance handle the reader never had is a bad parameter, naming the handle."""
        with dcps.DomainParticipant(domain_id) as participant:
            reader = dcps.DataReader(participant, dcps.Topic(participant, topic_name, Reading))
            with pytest.raises(dcps.BadParameterError, match="123456"):
                reader.read(instance=123456)

    def test_disposing_an_unregistered_handle_is_a_precondition_error(
        self, domain_id, topic_name
    ) -> None:
        """dispose() of a handle the writer does not know raises PreconditionNotMetError."""
        with dcps.DomainParticipant(domain_id) as participant:
            writer = dcps.DataWriter(participant, dcps.Topic(participant, topic_name, Reading))
            with pytest.raises(dcps.PreconditionNotMetError, match="987"):
                writer.dispose(987)

    def test_acknowledgement_timeout_from_a_stopped_reader(self, domain_id, unique) -> None:
        """A reliable reader whose process is frozen (SIGSTOP) never acks: DcpsTimeoutError."""
        import signal
        import subprocess
        import sys
        from pathlib import Path

        import qos
        from examples.sensors import Kind
        from examples.sensors import Reading as FleetReading

        topic_name = f"acks_{unique}"
        root = Path(__file__).resolve().parents[2]
        monitor = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "examples.monitor",
                "--domain",
                str(domain_id),
                "--topic",
                topic_name,
            ],
            cwd=root,
            stdout=subprocess.DEVNULL,
        )
        try:
            with dcps.DomainParticipant(domain_id) as participant:
                profile = qos.profile("reliable_state")
                topic = dcps.Topic(participant, topic_name, FleetReading, qos=profile.topic)
                writer = dcps.DataWriter(participant, topic, qos=profile.writer)
                writer.wait_for_readers(1, timeout=30)
                writer.write(FleetReading(1, Kind.TEMPERATURE, 19.0, "lab"))
                writer.wait_for_acknowledgments(20)  # the reader is in sync and acking
                monitor.send_signal(signal.SIGSTOP)
                # the signal is delivered asynchronously: write only once every thread of
                # the monitor is stopped, else a still-running thread may acknowledge
                eventually(lambda: _all_threads_stopped(monitor.pid), what="the monitor stopped")
                writer.write(FleetReading(1, Kind.TEMPERATURE, 20.0, "lab"))
                with pytest.raises(dcps.DcpsTimeoutError) as caught:
                    writer.wait_for_acknowledgments(0.3)
                assert isinstance(caught.value, TimeoutError)
                monitor.send_signal(signal.SIGCONT)
                writer.wait_for_acknowledgments(20)  # once it runs again, it acknowledges
        finally:
            monitor.send_signal(signal.SIGCONT)
            monitor.kill()
            monitor.wait()


def _all_threads_stopped(pid: int) -> bool:
    """Every thread of process ``pid`` is in the stopped state (``T`` in /proc)."""
    from pathlib import Path

    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            return False
    return bool(states) and all(state in ("T", "t") for state in states)
