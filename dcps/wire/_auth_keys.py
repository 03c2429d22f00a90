"""Store namespace keys: reading, validating and creating key files.

A store namespace is protected by a shared secret kept in a key file; the
store and every client of the namespace read the same file (or a copy). The
key is the file's bytes with surrounding ASCII whitespace removed, so both raw
random bytes and text keys work (``openssl rand -hex 32 > ns.key``), and an
editor's trailing newline changes nothing. A separate admin key, in its own
file, authorises destructive and administrative operations.

The environment names the files: :data:`KEY_FILE_ENV` for the namespace key,
:data:`ADMIN_KEY_FILE_ENV` for the admin key, :data:`ACCEPTED_KEY_FILES_ENV`
for extra keys still accepted during a key rotation (``os.pathsep``
separated). See ``docs/security.md``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

import attrs

from idl._errors import BadParameterError

__all__ = [
    "ACCEPTED_KEY_FILES_ENV",
    "ADMIN_KEY_FILE_ENV",
    "KEY_FILE_ENV",
    "MAX_KEY_BYTES",
    "MIN_KEY_BYTES",
    "KeyFileError",
    "StoreKey",
    "accepted_keys_from_environment",
    "key_from_environment",
    "load_key",
    "write_key_file",
]

_log = logging.getLogger("dcps.wire.auth")

#: Environment variable naming the namespace key file.
KEY_FILE_ENV = "DCPS_STORE_KEY_FILE"
#: Environment variable naming the admin key file.
ADMIN_KEY_FILE_ENV = "DCPS_STORE_ADMIN_KEY_FILE"
#: Environment variable naming older key files still accepted while a rotation runs.
ACCEPTED_KEY_FILES_ENV = "DCPS_STORE_ACCEPTED_KEY_FILES"

#: Shortest key accepted, in bytes (32 hex digits carry 128 bits).
MIN_KEY_BYTES = 32
#: Longest key accepted, in bytes: a bigger file is not a key file.
MAX_KEY_BYTES = 4096


class KeyFileError(BadParameterError):
    """A key file is missing, unreadable, not a regular file, or holds no usable key.

    ``path`` is the file named (as given).
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(f"key file {path}: {message}")
        self.path = path


@attrs.frozen(repr=False)
class StoreKey:
    """A secret key and where it came from.

    ``key_id`` (4 bytes, derived one-way from the secret) travels in each
    message trailer so a receiver holding several keys (admin key, keys of a
    rotation) knows which one to check; it reveals nothing usable about the
    secret.
    """

    secret: bytes = attrs.field(validator=attrs.validators.instance_of(bytes))
    source: str = "<memory>"
    key_id: bytes = attrs.field(init=False)

    @key_id.default
    def _key_id(self) -> bytes:
        return hashlib.sha256(b"dcps-key-id/v1\x00" + self.secret).digest()[:4]

    def __repr__(self) -> str:  # never show the secret
        return f"StoreKey(source={self.source!r}, key_id={self.key_id.hex()})"


def load_key(path: str | os.PathLike[str]) -> StoreKey:
    """Read and validate the key in the file at ``path``.

    Raises :class:`KeyFileError` (naming the path) when the file does not
    exist, is a directory or not a regular file, cannot be read, or holds fewer
    than :data:`MIN_KEY_BYTES` or more than :data:`MAX_KEY_BYTES` bytes. Logs a
    warning when group or others may read the file.
    """
    name = os.fspath(path)
    try:
        info = os.stat(name)
    except FileNotFoundError:
        raise KeyFileError("does not exist", path=name) from None
    except OSError as exc:
        raise KeyFileError(f"cannot be examined: {exc.strerror}", path=name) from exc
    if stat.S_ISDIR(info.st_mode):
        raise KeyFileError("is a directory, not a key file", path=name)
    if not stat.S_ISREG(info.st_mode):
        raise KeyFileError("is not a regular file", path=name)
    if info.st_size > 2 * MAX_KEY_BYTES:
        raise KeyFileError(
            f"holds {info.st_size} bytes, more than a key (at most {MAX_KEY_BYTES})", path=name
        )
    try:
        raw = Path(name).read_bytes()
    except OSError as exc:
        raise KeyFileError(f"cannot be read: {exc.strerror}", path=name) from exc
    secret = raw.strip()
    if len(secret) < MIN_KEY_BYTES:
        raise KeyFileError(
            f"holds a {len(secret)}-byte key; at least {MIN_KEY_BYTES} bytes are needed "
            "(e.g. `openssl rand -hex 32`)",
            path=name,
        )
    if len(secret) > MAX_KEY_BYTES:
        raise KeyFileError(
            f"holds {len(secret)} bytes, more than a key (at most {MAX_KEY_BYTES})", path=name
        )
    if os.name == "posix" and info.st_mode & 0o077:
        _log.warning(
            "key file %s can be read by group or others (mode %o): chmod 600 it",
            name,
            stat.S_IMODE(info.st_mode),
        )
    return StoreKey(secret, source=name)


def key_from_environment(
    variable: str = KEY_FILE_ENV, environ: Mapping[str, str] | None = None
) -> StoreKey | None:
    """The key in the file named by environment variable ``variable``, or None when unset.

    A variable that is set but empty is an error (:class:`KeyFileError`
    naming the variable), so a broken deployment script cannot silently turn
    authentication off.
    """
    env = os.environ if environ is None else environ
    if variable not in env:
        return None
    path = env[variable]
    if not path.strip():
        raise KeyFileError(f"environment variable {variable} is set but empty", path=path)
    return load_key(path)


def accepted_keys_from_environment(
    variable: str = ACCEPTED_KEY_FILES_ENV, environ: Mapping[str, str] | None = None
) -> tuple[StoreKey, ...]:
    """Keys still accepted in a rotation: files named by ``variable``, split at ``os.pathsep``."""
    env = os.environ if environ is None else environ
    return tuple(load_key(p) for p in env.get(variable, "").split(os.pathsep) if p.strip())


def write_key_file(path: str | os.PathLike[str]) -> StoreKey:
    """Create a new key file at ``path`` (mode 600, 32 random bytes as 64 hex digits).

    Refuses to overwrite an existing file (:class:`KeyFileError`).
    """
    name = os.fspath(path)
    text = secrets.token_hex(32).encode("ascii")
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyFileError("already exists; not overwritten", path=name) from None
    except OSError as exc:
        raise KeyFileError(f"cannot be created: {exc.strerror}", path=name) from exc
    with os.fdopen(fd, "wb") as file:
        file.write(text + b"\n")
    return StoreKey(text, source=name)
