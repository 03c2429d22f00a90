"""The DDS-side commands, like the ``cyclonedds`` tool's: ls, ps, typeof, sub, pub.

They join the domain as an ordinary participant and never touch the store,
so they see any DDS application, dcps or not, and disturb nothing.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer

from idl._errors import BadParameterError, DcpsError, DcpsTimeoutError

from ._discovery import Endpoint, Scan, lookup_type, scan, topic_pattern
from ._json import sample_from_json, sample_to_json
from ._options import (
    DOMAIN,
    DOMAIN_TAG,
    INTERFACE,
    JSON,
    MULTICAST,
    NETWORK_CONFIG,
    PEER,
    Network,
    check_seconds,
    fail,
)
from ._output import emit_json, emit_line, err_console, out_console, to_jsonable
from ._types import IDL, TYPE, resolve_type

__all__ = ["ls", "ps", "pub", "sub", "topics", "typeof"]

SCAN = typer.Option(2.0, "--timeout", "-r", help="Seconds to listen to discovery.", min=0)
TOPIC_FILTER = typer.Option(
    ".*", "--topic", "-t", help="Only topics whose name matches this regular expression."
)
PARTITION = typer.Option([], "--partition", "-p", help="DDS partition (repeatable).")
QOS_PROFILE = typer.Option(
    "event_stream",
    "--qos",
    help="QoS profile of the endpoint (built-in: sensor_data, reliable_state, event_stream, "
    "command, parameters, default).",
)


@contextmanager
def _participant(command: str, domain: int, network: Network) -> Iterator[Any]:
    """A dcps participant on ``domain``; a dcps error becomes ``dcps COMMAND: ...`` and exit 1."""
    import dcps  # function-local: keep `dcps --help` from loading the DDS entities

    try:
        with dcps.DomainParticipant(domain, network=network.config()) as participant:
            yield participant
    except DcpsError as exc:
        raise fail(command, exc) from None


def _qos_json(qos: Any) -> dict[str, Any]:
    return dict(to_jsonable(qos.asdict()))


def _endpoint_json(e: Endpoint, with_qos: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": e.kind,
        "guid": e.guid,
        "participant": e.participant,
        "name": e.name,
        "type": e.type_name,
        "partitions": list(e.partitions),
    }
    if with_qos:
        out["qos"] = _qos_json(e.qos)
    return out


def _few(items: list[str], shown: int = 3) -> str:
    """``items`` one per line, the first ``shown`` of them and a count of the rest."""
    rest = len(items) - shown
    return "\n".join(items[:shown] + ([f"(+{rest} more)"] if rest > 0 else []))


def _topics_json(found: Scan, with_qos: bool) -> list[dict[str, Any]]:
    result = []
    for name, endpoints in found.topics().items():
        result.append(
            {
                "topic": name,
                "types": sorted({e.type_name for e in endpoints}),
                "partitions": sorted({p for e in endpoints for p in e.partitions}),
                "writers": sum(e.kind == "writer" for e in endpoints),
                "readers": sum(e.kind == "reader" for e in endpoints),
                "endpoints": [_endpoint_json(e, with_qos) for e in endpoints],
            }
        )
    return result


def ls(
    domain: int = DOMAIN,
    topic: str = TOPIC_FILTER,
    show_qos: bool = typer.Option(False, "--qos", "-q", help="Show the QoS of every endpoint."),
    timeout: float = SCAN,
    json_out: bool = JSON,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
) -> None:
    """List the topics of a domain: types, partitions, writers and readers (-q: their QoS)."""
    network = Network(network_config, tuple(interface), tuple(peer), multicast, domain_tag)
    with _participant("ls", domain, network) as participant:
        found = scan(participant, timeout, topics=topic_pattern(topic))
    listing = _topics_json(found, show_qos)
    if json_out:
        emit_json(listing)
        return
    from rich.table import Table

    table = Table("topic", "type", "partitions", "writers", "readers")
    for t in listing:
        table.add_row(
            t["topic"],
            "\n".join(t["types"]),
            _few(t["partitions"]) or "(default)",
            str(t["writers"]),
            str(t["readers"]),
        )
    console = out_console()
    console.print(table)
    if show_qos:
        from rich.tree import Tree

        for name, endpoints in found.topics().items():
            tree = Tree(f"[bold]{name}")
            for e in endpoints:
                branch = tree.add(f"{e.kind} {e.guid}" + (f" ({e.name})" if e.name else ""))
                for policy in e.qos:
                    branch.add(str(policy))
            console.print(tree)


def topics(
    domain: int = DOMAIN,
    seconds: float = typer.Option(2.0, "--seconds", help="How long to listen for discovery."),
    json_out: bool = JSON,
) -> None:
    """List the DDS topics of a domain (as `dcps ls`; the store's own listing comes later)."""
    ls(
        domain=domain,
        topic=".*",
        show_qos=False,
        timeout=seconds,
        json_out=json_out,
        network_config=None,
        interface=[],
        peer=[],
        multicast=None,
        domain_tag=None,
    )


def ps(
    domain: int = DOMAIN,
    topic: str = TOPIC_FILTER,
    timeout: float = SCAN,
    json_out: bool = JSON,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
) -> None:
    """List the applications on a domain: host, process, pid, participants and their topics."""
    network = Network(network_config, tuple(interface), tuple(peer), multicast, domain_tag)
    with _participant("ps", domain, network) as participant:
        found = scan(participant, timeout, topics=topic_pattern(topic))
    topics_of: dict[str, set[str]] = {}
    for e in found.endpoints.values():
        topics_of.setdefault(e.participant, set()).add(e.topic)
    apps: dict[tuple[str, str, str], dict[str, Any]] = {}
    for p in sorted(found.participants.values(), key=lambda p: p.guid):
        key = (p.host or "?", p.process or "?", p.pid or "?")
        app = apps.setdefault(
            key,
            {
                "host": p.host,
                "process": p.process,
                "pid": p.pid,
                "addresses": p.addresses,
                "participants": [],
            },
        )
        app["participants"].append(
            {"guid": p.guid, "name": p.name, "topics": sorted(topics_of.get(p.guid, ()))}
        )
    listing = [apps[k] for k in sorted(apps)]
    if json_out:
        emit_json(listing)
        return
    from rich.table import Table

    table = Table("host", "process", "pid", "participants", "topics")
    for app in listing:
        parts = app["participants"]
        table.add_row(
            app["host"] or "?",
            app["process"] or "?",
            app["pid"] or "?",
            "\n".join(p["guid"] + (f" ({p['name']})" if p["name"] else "") for p in parts),
            "\n".join(sorted({t for p in parts for t in p["topics"]})),
        )
    out_console().print(table)


def typeof(
    topic: str = typer.Argument(..., help="Topic name."),
    domain: int = DOMAIN,
    timeout: float = typer.Option(5.0, "--timeout", "-r", help="Seconds to wait for the type."),
    json_out: bool = JSON,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
) -> None:
    """Print the type of TOPIC as IDL, fetched from its writers/readers by XTypes type lookup."""
    import re

    network = Network(network_config, tuple(interface), tuple(peer), multicast, domain_tag)
    deadline = time.monotonic() + timeout
    with _participant("typeof", domain, network) as participant:
        found = scan(
            participant,
            timeout,
            topics=topic_pattern(re.escape(topic)),
            until=lambda s: any(e.type_id is not None for e in s.endpoints.values()),
        )
        by_id: dict[Any, list[Endpoint]] = {}
        for e in found.endpoints.values():
            if e.type_id is not None:
                by_id.setdefault(e.type_id, []).append(e)
        if not by_id:
            what = "endpoints without type information" if found.endpoints else "no endpoint"
            raise fail(
                "typeof",
                DcpsTimeoutError(f"topic {topic!r}: {what} within {timeout:g} s"),
            )
        types: list[dict[str, Any]] = []
        for type_id, endpoints in by_id.items():
            try:
                _, text = lookup_type(participant, type_id, max(deadline - time.monotonic(), 1.0))
            except DcpsError as exc:
                raise fail("typeof", exc) from None
            types.append(
                {
                    "type_name": endpoints[0].type_name,
                    "idl": text,
                    "participants": sorted({e.participant for e in endpoints}),
                }
            )
    if json_out:
        emit_json({"topic": topic, "types": types})
        return
    from rich.syntax import Syntax

    console = out_console()
    if len(types) > 1:
        err_console().print(f"[yellow]warning: topic {topic!r} has {len(types)} different types")
    for t in types:
        console.print(f"As defined in participant(s) {', '.join(t['participants'])}")
        console.print(Syntax(t["idl"], "omg-idl"))


def _profile(name: str) -> Any:
    import qos

    return qos.profile(name)


def _info_json(info: Any) -> dict[str, Any]:
    return {
        "sample_state": info.sample_state.name,
        "view_state": info.view_state.name,
        "instance_state": info.instance_state.name,
        "valid_data": bool(info.valid_data),
        "source_timestamp_ns": info.source_timestamp_ns,
        "instance_handle": info.instance_handle,
        "publication_handle": info.publication_handle,
    }


def sub(
    topic: str = typer.Argument(..., help="Topic name."),
    type_spec: str | None = TYPE,
    idl_file: Path | None = IDL,
    domain: int = DOMAIN,
    partition: list[str] = PARTITION,
    qos_profile: str = QOS_PROFILE,
    count: int | None = typer.Option(None, "--count", "-n", help="Exit after N samples.", min=1),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Exit after this many seconds (default: until interrupted)."
    ),
    discovery: float = typer.Option(
        5.0, "--discovery-timeout", help="Seconds to wait for the type when discovering it."
    ),
    info: bool = typer.Option(
        False, "--info", help="Print {data, info} with the SampleInfo, disposals included."
    ),
    json_out: bool = JSON,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
) -> None:
    """Print the samples of TOPIC: one JSON line each with --json, else readable text.

    The type comes from --type/--idl or, without them, from the domain (XTypes).
    """
    import dcps

    check_seconds("--timeout", timeout)
    network = Network(network_config, tuple(interface), tuple(peer), multicast, domain_tag)
    printed = 0
    with _participant("sub", domain, network) as participant:
        try:
            profile = _profile(qos_profile)
            data_type = resolve_type(participant, topic, type_spec, idl_file, discovery)
            t: Any = dcps.Topic(participant, topic, data_type, qos=profile.topic)
            parent = dcps.Subscriber(participant, partitions=partition) if partition else None
            reader: Any = dcps.DataReader(parent or participant, t, qos=profile.reader)
        except DcpsError as exc:
            raise fail("sub", exc) from None
        console = None if json_out else out_console()
        waitset = dcps.WaitSet(participant)
        waitset.attach(dcps.ReadCondition(reader))
        err_console().print(f"[green]dcps sub: reading {topic!r} ({data_type.__name__})")
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while count is None or printed < count:
                left = 0.5 if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    waitset.wait(timedelta(seconds=min(left, 0.5)))
                except DcpsTimeoutError:
                    continue
                # a take groups samples by instance: print them in the order they were written
                taken = sorted(reader.take(), key=lambda s: s.info.source_timestamp_ns)
                for sample in taken:
                    if count is not None and printed >= count:
                        break
                    if not sample.info.valid_data and not info:
                        continue
                    data = sample_to_json(sample.data, data_type)
                    document = {"data": data, "info": _info_json(sample.info)} if info else data
                    if console is None:
                        emit_line(document)
                    else:
                        console.print(document if info else sample.data)
                    printed += 1
        except KeyboardInterrupt:
            pass
    err_console().print(f"dcps sub: {printed} sample(s)")


def _wait_acknowledged(writer: Any, timeout: float) -> None:
    """Wait for the reliable readers to acknowledge (a timeout is reported by the caller)."""
    with contextlib.suppress(DcpsTimeoutError):
        writer.wait_for_acknowledgments(timeout)


def pub(
    topic: str = typer.Argument(..., help="Topic name."),
    type_spec: str | None = TYPE,
    idl_file: Path | None = IDL,
    domain: int = DOMAIN,
    partition: list[str] = PARTITION,
    qos_profile: str = QOS_PROFILE,
    readers: int = typer.Option(
        0, "--wait-readers", help="Wait for this many matched readers before writing.", min=0
    ),
    timeout: float = typer.Option(
        10.0, "--timeout", help="Seconds to wait for readers and for acknowledgements.", min=0
    ),
    discovery: float = typer.Option(
        5.0, "--discovery-timeout", help="Seconds to wait for the type when discovering it."
    ),
    json_out: bool = JSON,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
) -> None:
    """Write one sample of TOPIC per JSON line read from stdin, until end of input.

    A bad line stops the command with exit code 1, naming the line and the
    member; the lines before it have been written.
    """
    import dcps

    network = Network(network_config, tuple(interface), tuple(peer), multicast, domain_tag)
    written = 0
    with _participant("pub", domain, network) as participant:
        try:
            profile = _profile(qos_profile)
            data_type = resolve_type(participant, topic, type_spec, idl_file, discovery)
            t: Any = dcps.Topic(participant, topic, data_type, qos=profile.topic)
            parent = dcps.Publisher(participant, partitions=partition) if partition else None
            writer: Any = dcps.DataWriter(parent or participant, t, qos=profile.writer)
            if readers:
                writer.wait_for_readers(readers, timeout)
        except DcpsError as exc:
            raise fail("pub", exc) from None
        try:
            for number, line in enumerate(sys.stdin, start=1):
                if not line.strip():
                    continue
                problem: Exception | None = None
                try:
                    writer.write(sample_from_json(json.loads(line), data_type))
                except json.JSONDecodeError as exc:
                    problem = BadParameterError(f"not a JSON object ({exc})")
                except DcpsError as exc:
                    problem = exc
                if problem is not None:
                    # The lines before the bad one were promised delivered: let them arrive
                    # before the writer goes away.
                    _wait_acknowledged(writer, timeout)
                    where = f"stdin line {number} ({written} sample(s) written before it)"
                    raise fail("pub", problem, where)
                written += 1
            writer.wait_for_acknowledgments(timeout)
        except DcpsTimeoutError as exc:
            raise fail("pub", exc) from None
        except KeyboardInterrupt:
            pass
    if json_out:
        emit_json({"topic": topic, "written": written})
    else:
        err_console().print(f"dcps pub: {written} sample(s) written to {topic!r}")
