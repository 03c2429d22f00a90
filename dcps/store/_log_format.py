"""The store file's format: its name, schema, version checks, migrations and errors.

Everything here is about the file, not about using it: which name it has in a
data directory, how a file is recognised (magic, version) and verified
(``PRAGMA quick_check``), how older versions are migrated, and how SQLite's
errors become typed :class:`~dcps.DcpsError` s naming the path. The format is
documented in ``docs/store-format.md``.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from dcps.wire._batches import ELEMENT_STEP_NS, PackedPayloads
from idl._errors import (
    BadParameterError,
    DcpsError,
    OutOfResourcesError,
    PreconditionNotMetError,
    UnsupportedError,
)

__all__ = [
    "COMMITS_BY_CHANNEL",
    "FORMAT_MAGIC",
    "FORMAT_VERSION",
    "OLDEST_READABLE_VERSION",
    "SEGMENTS_VERSION",
    "STORE_FILE",
    "check_writable",
    "create_schema",
    "first_stamp",
    "inspect_file",
    "migrate",
    "os_error",
    "prepare_dir",
    "sql_error",
]

#: The log's file name inside a store's data directory.
STORE_FILE = "channels.db"
FORMAT_MAGIC = "dcps-channel-store"
#: Version 13 keeps the durability service's numbering mark (``durability_sequence``: a
#: restarted service never numbers a sample as one it gave before);
#: Version 12 lets a staged chunk's body sit in a segment file (``staged.segment``, ``pos``,
#: ``crc``), so a commit moves the reference into ``batches`` instead of copying the body;
#: 11 keeps JMS temporary topics (owner, lease, grants) across a restart;
#: Version 10 keeps per durable channel the highest offset delivered (a first delivery writes
#: no count of its own); 9 keeps delivery counts (durables' and queues' redelivery counts survive a
#: restart); 8 keeps large batch bodies in segment files and gives every element its own
#: timestamp; 7 added the staging tables (two-phase commit); 6 key-value maps and
#: queues; 5 the durability service's tables; 4 the durables'; 3
#: ``topics.type_identity``; 2 stored batches as rows.
FORMAT_VERSION = 13
#: The first version whose elements each have their own timestamp (a batch's
#: ``ts`` plus ``ELEMENT_STEP_NS`` per element) and whose bodies may be in segments.
SEGMENTS_VERSION = 8
#: The oldest version a read-only reader (:class:`LogReader`) reads as it is.
OLDEST_READABLE_VERSION = 2
#: Largest batch a version-1 file's elements are regrouped into when it is migrated.
_MIGRATED_BATCH_MAX = 65536

# One row per stored batch (a rowid table: rows are large, see docs/store-format.md),
# as version 2 created it; version 4 adds the columns of _SEGMENT_COLUMNS.
_BATCHES = """
CREATE TABLE batches (
    topic_id INTEGER NOT NULL,
    channel INTEGER NOT NULL,
    first_offset INTEGER NOT NULL,
    count INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    sizes BLOB NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (topic_id, channel, first_offset)
);
CREATE INDEX batches_ts ON batches (topic_id, channel, ts, first_offset);
"""
# Durable subscriptions (version 4; see dcps/store/_durables.py). A durable's floor per
# channel is the commit of its log group (named DURABLE_GROUP_PREFIX + name), so retention
# keeps what it has not acknowledged; these tables hold the rest.
_DURABLES = """
CREATE TABLE IF NOT EXISTS durables (
    name TEXT PRIMARY KEY,
    topic_id INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    persistent INTEGER NOT NULL,
    filter TEXT NOT NULL,
    ttl_ms INTEGER NOT NULL,
    created_ns INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS durable_acks (
    name TEXT NOT NULL,
    channel INTEGER NOT NULL,
    "offset" INTEGER NOT NULL,
    PRIMARY KEY (name, channel, "offset")
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS durable_values (
    name TEXT NOT NULL,
    topic TEXT NOT NULL,
    channel INTEGER NOT NULL,
    "offset" INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (name, topic)
) WITHOUT ROWID;
"""

# The durability service's PERSISTENT samples (version 5, dcps/store/_durability_history.py).
_DURABILITY = """
CREATE TABLE durability_topics (
    topic TEXT NOT NULL,
    partition TEXT NOT NULL,
    limits TEXT NOT NULL,
    PRIMARY KEY (topic, partition)
) WITHOUT ROWID;
CREATE TABLE durability_instances (
    topic TEXT NOT NULL,
    partition TEXT NOT NULL,
    key BLOB NOT NULL,
    disposed_ns INTEGER,
    PRIMARY KEY (topic, partition, key)
) WITHOUT ROWID;
CREATE TABLE durability_samples (
    seq INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    partition TEXT NOT NULL,
    key BLOB NOT NULL,
    writer BLOB NOT NULL,
    ts INTEGER NOT NULL,
    flags INTEGER NOT NULL,
    payload BLOB NOT NULL
);
"""

# The durability service's numbering mark (version 13): at or above every sample number
# (seq) given that durability_samples does not hold; one row.
_DURABILITY_SEQUENCE = """
CREATE TABLE IF NOT EXISTS durability_sequence (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    high INTEGER NOT NULL
)"""

# Key-value maps and queues (format version 6; docs/store-format.md).
_MAPS_AND_QUEUES = """
CREATE TABLE maps (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    type_name TEXT NOT NULL DEFAULT '',
    type_identity TEXT NOT NULL DEFAULT '',
    revision INTEGER NOT NULL,
    dropped_revision INTEGER NOT NULL DEFAULT 0,
    created_ns INTEGER NOT NULL
);
CREATE TABLE map_entries (
    map_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    revision INTEGER NOT NULL,
    value BLOB,
    PRIMARY KEY (map_id, key)
) WITHOUT ROWID;
CREATE INDEX map_entries_revision ON map_entries (map_id, revision);
CREATE TABLE map_changes (
    map_id INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    key TEXT NOT NULL,
    value BLOB,
    PRIMARY KEY (map_id, revision)
) WITHOUT ROWID;
CREATE TABLE queues (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    type_identity TEXT NOT NULL DEFAULT '',
    next_seq INTEGER NOT NULL,
    created_ns INTEGER NOT NULL
);
CREATE TABLE queue_elements (
    queue_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (queue_id, seq)
);
"""

# Staged publishing (format version 7; the two-phase commit of _staging.py): chunks staged
# by task attempts (invisible until committed) and the transactions committed (for
# idempotent commits).
_STAGING = """
CREATE TABLE IF NOT EXISTS staged (
    topic_id INTEGER NOT NULL,
    query TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    stage TEXT NOT NULL,
    seq INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    channel INTEGER NOT NULL,
    count INTEGER NOT NULL,
    staged_ns INTEGER NOT NULL,
    sizes BLOB NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (topic_id, query, epoch, stage, seq)
);
CREATE INDEX IF NOT EXISTS staged_age ON staged (staged_ns);
CREATE TABLE IF NOT EXISTS staged_commits (
    topic_id INTEGER NOT NULL,
    query TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    elements INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    committed_ns INTEGER NOT NULL,
    PRIMARY KEY (topic_id, query, epoch)
) WITHOUT ROWID;
"""
# Format version 9: delivery counts (how often an element not acknowledged yet was
# delivered, for persistent durables a row per delivered element, for queues a column) and
# the commit records of transactions over durables (dcps/store/_transactions.py).
_DELIVERY_TABLE = (
    "CREATE TABLE IF NOT EXISTS durable_deliveries (name TEXT NOT NULL, channel INTEGER NOT NULL,"
    ' "offset" INTEGER NOT NULL, times INTEGER NOT NULL,'
    ' PRIMARY KEY (name, channel, "offset")) WITHOUT ROWID'
)
_QUEUE_DELIVERIES = "ALTER TABLE queue_elements ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0"
_TRANSACTION_TABLE = (
    "CREATE TABLE IF NOT EXISTS durable_transactions (query TEXT NOT NULL,"
    " epoch INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (query, epoch)) WITHOUT ROWID"
)
# Format version 10: per persistent durable and channel, the highest offset ever delivered
# (an unacknowledged element at or below it without a durable_deliveries row went out once).
_DELIVERED_TABLE = (
    "CREATE TABLE IF NOT EXISTS durable_delivered (name TEXT NOT NULL, channel INTEGER NOT NULL,"
    ' "offset" INTEGER NOT NULL, PRIMARY KEY (name, channel)) WITHOUT ROWID'
)
_DELIVERIES = (_DELIVERY_TABLE, _QUEUE_DELIVERIES, _TRANSACTION_TABLE, _DELIVERED_TABLE)
# Format version 11: temporary topics (JMS) with their owner, lease and granted consumers
# outlive a store restart (dcps/store/_temporaries.py).
_TEMPORARIES = (
    "CREATE TABLE IF NOT EXISTS temporary_topics (topic TEXT PRIMARY KEY, owner TEXT NOT NULL,"
    " lease_ms INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS temporary_grants (topic TEXT NOT NULL, subscriber TEXT NOT NULL,"
    " PRIMARY KEY (topic, subscriber)) WITHOUT ROWID",
)
# Format version 12: where a staged chunk's body is when it is not inline in ``data`` (then
# empty): a segment file of its topic, as for ``batches`` (dcps/store/_staging.py).
_STAGED_SEGMENT_COLUMNS = (
    ("segment", "ALTER TABLE staged ADD COLUMN segment INTEGER"),  # NULL: inline in ``data``
    ("pos", "ALTER TABLE staged ADD COLUMN pos INTEGER NOT NULL DEFAULT 0"),
    ("crc", "ALTER TABLE staged ADD COLUMN crc INTEGER NOT NULL DEFAULT 0"),
)
#: The lowest commit of a channel over every group (retention, ``ChannelLog._trim``) without
#: reading every group's commits: durables run that trim every 50 ms per topic, and 1,000
#: durables of a 256-channel topic kept the store's service thread busy (30-40 s per
#: answer) without it. Created at every open (IF NOT EXISTS): older files get it too.
COMMITS_BY_CHANNEL = (
    "CREATE INDEX IF NOT EXISTS commits_by_channel ON commits (topic_id, channel, committed)"
)
_SCHEMA = (
    """
CREATE TABLE dcps_format (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE topics (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    channel_count INTEGER NOT NULL,
    retain_consumed INTEGER NOT NULL,
    type_name TEXT NOT NULL DEFAULT '',
    created_ns INTEGER NOT NULL,
    type_identity TEXT NOT NULL DEFAULT ''
);
CREATE TABLE channels (
    topic_id INTEGER NOT NULL REFERENCES topics(id),
    channel INTEGER NOT NULL,
    head INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    last_ts INTEGER NOT NULL,
    PRIMARY KEY (topic_id, channel)
) WITHOUT ROWID;
CREATE TABLE groups (
    topic_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    PRIMARY KEY (topic_id, name)
) WITHOUT ROWID;
CREATE TABLE commits (
    topic_id INTEGER NOT NULL,
    grp TEXT NOT NULL,
    channel INTEGER NOT NULL,
    committed INTEGER NOT NULL,
    explicit INTEGER NOT NULL,
    PRIMARY KEY (topic_id, grp, channel)
) WITHOUT ROWID;
"""
    + COMMITS_BY_CHANNEL
    + ";"
    + _BATCHES
    + _DURABLES
    + _DURABILITY
    + _DURABILITY_SEQUENCE
    + ";"
    + _MAPS_AND_QUEUES
    + _STAGING
)

# Version 4: where a batch's body is when it is not inline in ``data`` (then empty).
_SEGMENT_COLUMNS = (
    "ALTER TABLE batches ADD COLUMN segment INTEGER",  # NULL: the body is inline in ``data``
    "ALTER TABLE batches ADD COLUMN pos INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE batches ADD COLUMN crc INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX batches_segment ON batches (topic_id, segment) WHERE segment IS NOT NULL",
)


def first_stamp(now_ns: int, last_ns: int) -> int:
    """The timestamp of a batch's first element: the clock rounded up to a whole
    step (microsecond), and at least one step after the channel's last element."""
    return max(-(-now_ns // ELEMENT_STEP_NS) * ELEMENT_STEP_NS, last_ns + ELEMENT_STEP_NS)


# SQLite primary result codes (the low byte of an extended code).
_SQLITE_PERM = 3
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26
#: The -shm file could not be grown: SQLite's word for a full disk at open.
_SQLITE_IOERR_SHMSIZE = _SQLITE_IOERR | (19 << 8)


def sql_error(exc: sqlite3.Error, path: Path, doing: str) -> DcpsError:
    """The typed error for a SQLite failure on the store file ``path`` while ``doing``.

    A full disk becomes :class:`~dcps.OutOfResourcesError`; a damaged file a
    :class:`~dcps.PreconditionNotMetError` (the file must be repaired or
    restored); a file or directory that cannot be written or opened a
    :class:`~dcps.PreconditionNotMetError`. Each names the path. (Raise it
    ``from exc``.)
    """
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    detail = f"{exc}" + (f" [{exc.sqlite_errorname}]" if code is not None else "")
    if primary == _SQLITE_FULL or code == _SQLITE_IOERR_SHMSIZE:
        return OutOfResourcesError(f"{path}: the disk is full ({doing}; {detail})")
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return PreconditionNotMetError(
            f"{path} is damaged ({doing}; {detail}); restore it from a copy "
            "or repair it (e.g. sqlite3 .recover)"
        )
    if primary in (_SQLITE_READONLY, _SQLITE_PERM, _SQLITE_CANTOPEN):
        return PreconditionNotMetError(
            f"{path}: cannot write or open the store file ({doing}; {detail}); "
            "check that its directory is writable"
        )
    if primary == _SQLITE_IOERR:
        return PreconditionNotMetError(f"{path}: I/O error ({doing}; {detail})")
    return DcpsError(f"{path}: {doing} failed: {detail}")


def os_error(exc: OSError, path: Path, doing: str) -> DcpsError:
    """The typed error for an ``OSError`` on ``path`` while ``doing`` (see :func:`sql_error`)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return OutOfResourcesError(f"{path}: the disk is full ({doing}; {exc.strerror})")
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return BadParameterError(f"{path}: a path component is not a directory ({doing})")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return PreconditionNotMetError(f"{path} is not writable ({doing}; {exc.strerror})")
    return PreconditionNotMetError(f"{path}: {doing} failed ({exc.strerror or exc})")


def prepare_dir(data_dir: str | os.PathLike[str]) -> Path:
    """Create a store's data directory if needed; return the log file's path in it.

    A path under a regular file, or a directory that cannot be created or
    written, raises one typed error naming the path.
    """
    directory = Path(data_dir)
    if directory.exists() and not directory.is_dir():
        raise BadParameterError(f"the store data directory {directory} is not a directory")
    for parent in directory.parents:
        if parent.exists() and not parent.is_dir():
            raise BadParameterError(
                f"the store data directory {directory} is under {parent}, which is a regular file"
            )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc, directory, "creating the store data directory") from exc
    return directory / STORE_FILE


def check_writable(path: Path) -> None:
    """Refuse (one typed error naming it) a store file or directory the store cannot write."""
    directory = path.parent
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PreconditionNotMetError(
            f"the store data directory {directory} is read-only or not writable; "
            f"a store needs to write {path.name} and its -wal/-shm files there"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise PreconditionNotMetError(f"the store file {path} is read-only or not writable")


def create_schema(db: sqlite3.Connection) -> None:
    """Create the tables of an empty file, in one transaction."""
    db.executescript(
        "BEGIN IMMEDIATE;"
        + _SCHEMA
        + "".join(f"{statement};" for statement in _SEGMENT_COLUMNS)
        + "".join(f"{statement};" for statement in _DELIVERIES)
        + "".join(f"{statement};" for statement in _TEMPORARIES)
        + "".join(f"{statement};" for _, statement in _STAGED_SEGMENT_COLUMNS)
        + f"INSERT INTO dcps_format VALUES ('magic', '{FORMAT_MAGIC}');"
        + f"INSERT INTO dcps_format VALUES ('version', '{FORMAT_VERSION}');"
        + "COMMIT;"
    )


def inspect_file(db: sqlite3.Connection, path: Path, *, verify: bool) -> int:
    """The format version of the file open in ``db``; 0 for an empty SQLite file.

    Refuses what is not a dcps store with one typed error naming ``path``:
    not SQLite or damaged (``BadParameterError``), another application's file
    (``BadParameterError``), a newer format (``UnsupportedError``). With
    ``verify``, ``PRAGMA quick_check`` must pass too (it reads the whole
    file: skip it for huge files whose integrity is known).
    """
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        raise _unreadable(exc, path) from exc
    if not tables:
        return 0
    if "dcps_format" not in tables:
        raise BadParameterError(
            f"{path} is a SQLite file of something else (no dcps_format table); "
            "refusing to use it as a dcps store"
        )
    try:
        meta = dict(db.execute("SELECT key, value FROM dcps_format").fetchall())
    except sqlite3.DatabaseError as exc:
        raise _unreadable(exc, path) from exc
    if meta.get("magic") != FORMAT_MAGIC:
        raise BadParameterError(f"{path} is not a dcps channel store (magic {meta.get('magic')!r})")
    try:
        version = int(meta.get("version", ""))
    except ValueError as exc:
        raise BadParameterError(f"{path}: bad format version {meta.get('version')!r}") from exc
    if version > FORMAT_VERSION:
        raise UnsupportedError(
            f"{path} has store format version {version}, newer than the "
            f"{FORMAT_VERSION} this dcps reads; upgrade dcps to open it"
        )
    if version < 1:
        raise BadParameterError(f"{path}: bad format version {version}")
    if verify:
        try:
            problems = [str(r[0]) for r in db.execute("PRAGMA quick_check(5)")]
        except sqlite3.DatabaseError as exc:
            problems = [str(exc)]
        if problems != ["ok"]:
            raise BadParameterError(
                f"{path} is damaged (PRAGMA quick_check: {'; '.join(problems)}); "
                "it was left untouched: restore it from a copy or repair it"
            )
    return version


def _unreadable(exc: sqlite3.DatabaseError, path: Path) -> DcpsError:
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB, None):
        return BadParameterError(
            f"{path} is corrupt or not a SQLite file ({exc}); it was left untouched"
        )
    return sql_error(exc, path, "reading the store file")


def migrate(db: sqlite3.Connection, version: int) -> None:
    """Bring a file of an older ``version`` up to :data:`FORMAT_VERSION`, in one transaction.

    Version 1 -> 2 regroups elements into stored batches; 2 -> 3 adds
    ``topics.type_identity`` (empty: the identity is recorded by the next
    client that names one); 3 -> 4 adds the durables' tables (empty); 4 -> 5
    the durability service's empty ``durability_*`` tables; 5 -> 6 the (empty)
    tables of maps and queues; 6 -> 7 the (empty) staging tables; 7 -> 8 adds the segment
    columns and gives every element its own timestamp (:func:`_migrate_v4`); 8 -> 9 adds
    the delivery counts (``durable_deliveries``, ``queue_elements.deliveries``) and
    ``durable_transactions``; 9 -> 10 the (empty) ``durable_delivered``; 10 -> 11 the
    (empty) tables ``temporary_topics`` and ``temporary_grants``; 11 -> 12 adds
    ``staged.segment``, ``pos`` and ``crc`` (existing staged chunks stay inline); 12 -> 13
    the (empty) ``durability_sequence`` (the service numbers after its kept samples). On
    failure the file keeps its old version.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        if version < 2:
            _migrate_v1(db)
        if version < 3:
            db.execute("ALTER TABLE topics ADD COLUMN type_identity TEXT NOT NULL DEFAULT ''")
        if version < 4:
            for statement in _DURABLES.split(";"):
                if statement.strip():
                    db.execute(statement)
        if version < 5:
            for statement in _DURABILITY.split(";"):
                if statement.strip():  # IF NOT EXISTS: a file may have been downgraded by hand
                    db.execute(statement.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
        if version < 6:
            for statement in _MAPS_AND_QUEUES.split(";"):
                if statement.strip():  # IF NOT EXISTS: a file may have been downgraded by hand
                    db.execute(
                        statement.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS").replace(
                            "CREATE INDEX", "CREATE INDEX IF NOT EXISTS"
                        )
                    )
        if version < 7:
            for statement in _STAGING.split(";"):
                if statement.strip():
                    db.execute(statement)
        if version < SEGMENTS_VERSION:
            _migrate_v4(db)
        if version < 9:
            db.execute(_DELIVERY_TABLE)
            db.execute(_TRANSACTION_TABLE)
            columns = {row[1] for row in db.execute("PRAGMA table_info(queue_elements)")}
            if "deliveries" not in columns:  # (a file may have been downgraded by hand)
                db.execute(_QUEUE_DELIVERIES)
        if version < 10:
            db.execute(_DELIVERED_TABLE)  # (IF NOT EXISTS: a file downgraded by hand)
        if version < 11:
            for statement in _TEMPORARIES:  # IF NOT EXISTS: idempotent
                db.execute(statement)
        if version < 12:
            columns = {row[1] for row in db.execute("PRAGMA table_info(staged)")}
            for column, statement in _STAGED_SEGMENT_COLUMNS:
                if column not in columns:  # (a file may have been downgraded by hand)
                    db.execute(statement)
        if version < 13:
            db.execute(_DURABILITY_SEQUENCE)  # (IF NOT EXISTS: idempotent)
        db.execute("UPDATE dcps_format SET value = ? WHERE key = 'version'", (str(FORMAT_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _migrate_v1(db: sqlite3.Connection) -> None:
    """Rewrite a version-1 file's elements (one row each) as stored batches.

    Consecutive elements of a channel with one accept timestamp become one
    stored batch (at most ``_MIGRATED_BATCH_MAX`` elements each).
    """
    for statement in _BATCHES.split(";"):
        if statement.strip():
            db.execute(statement)
    cur = db.execute(
        'SELECT topic_id, channel, "offset", ts, data FROM elements'
        ' ORDER BY topic_id, channel, "offset"'
    )
    batch: list[tuple[int, int, int, int, bytes]] = []

    def flush() -> None:
        if batch:
            tid, channel, first, ts, _ = batch[0]
            packed = PackedPayloads.of([bytes(b[4]) for b in batch])
            db.execute(
                "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?)",
                (tid, channel, first, len(batch), ts, packed.check(), packed.blob),
            )
            batch.clear()

    for row in cur:
        if batch:
            last = batch[-1]
            if (
                row[0] != last[0]
                or row[1] != last[1]
                or row[2] != last[2] + 1
                or row[3] != last[3]
                or len(batch) >= _MIGRATED_BATCH_MAX
            ):
                flush()
        batch.append(row)
    flush()
    db.execute("DROP TABLE elements")


def _migrate_v4(db: sqlite3.Connection) -> None:
    """Version 3 -> 4: segment columns, and one timestamp per element.

    Stored bodies stay inline (the reader reads both forms; retention
    releases them as usual), so the step writes nothing outside this
    transaction. Each batch's ``ts`` becomes :func:`first_stamp` of its old
    value and its channel's previous element, so timestamps are whole
    microseconds and strictly increasing along the offsets; ``last_ts`` and
    the ``publish_keys`` rows follow. A batch whose ``ts`` is already right
    is not rewritten.
    """
    for statement in _SEGMENT_COLUMNS:
        db.execute(statement)
    has_keys = (
        db.execute("SELECT 1 FROM sqlite_master WHERE name = 'publish_keys'").fetchone() is not None
    )
    channels = db.execute("SELECT topic_id, channel, last_ts FROM channels").fetchall()
    for tid, channel, last_ts in channels:
        last = 0
        moved: list[tuple[int, int, int, int]] = []
        for first, count, ts in db.execute(
            "SELECT first_offset, count, ts FROM batches WHERE topic_id = ? AND channel = ?"
            " ORDER BY first_offset",
            (tid, channel),
        ):
            new = first_stamp(int(ts), last)
            last = new + (int(count) - 1) * ELEMENT_STEP_NS
            if new != ts:
                moved.append((new, tid, channel, first))
        db.executemany(
            "UPDATE batches SET ts = ? WHERE topic_id = ? AND channel = ? AND first_offset = ?",
            moved,
        )
        if has_keys:
            db.executemany(
                "UPDATE publish_keys SET ts = ? WHERE topic_id = ? AND channel = ? AND first = ?",
                moved,
            )
        if last_ts:  # the last element may have been released: keep its time, rounded up
            last = max(last, first_stamp(int(last_ts), 0))
        db.execute(
            "UPDATE channels SET last_ts = ? WHERE topic_id = ? AND channel = ?",
            (last, tid, channel),
        )
