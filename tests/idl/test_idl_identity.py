"""``idl.type_identity``: the same for the same wire structure, different for any other."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import idl
from idl import IdlError
from tests.support.peers.channels_types import Msg


class Color(idl.Enum, typename="ident::Color"):
    RED = 0
    GREEN = 1


class Color2(idl.Enum, typename="ident::Color"):
    RED = 0
    GREEN = 2


class Job(idl.Struct, typename="ident::Job"):
    id: idl.key[idl.int32]
    name: idl.string
    color: Color
    samples: idl.sequence[idl.float32]


class SameJob(idl.Struct, typename="ident::Job"):
    """Another class with Job's exact structure."""

    id: idl.key[idl.int32]
    name: idl.string
    color: Color
    samples: idl.sequence[idl.float32]


class WiderId(idl.Struct, typename="ident::Job"):
    id: idl.key[idl.int64]
    name: idl.string
    color: Color
    samples: idl.sequence[idl.float32]


class Unkeyed(idl.Struct, typename="ident::Job"):
    id: idl.int32
    name: idl.string
    color: Color
    samples: idl.sequence[idl.float32]


class Renamed(idl.Struct, typename="ident::Job"):
    id: idl.key[idl.int32]
    title: idl.string
    color: Color
    samples: idl.sequence[idl.float32]


class OtherEnum(idl.Struct, typename="ident::Job"):
    id: idl.key[idl.int32]
    name: idl.string
    color: Color2
    samples: idl.sequence[idl.float32]


class Bounded(idl.Struct, typename="ident::Job"):
    id: idl.key[idl.int32]
    name: idl.string
    color: Color
    samples: idl.sequence[idl.float32, 8]


class OtherName(idl.Struct, typename="ident::Task"):
    id: idl.key[idl.int32]
    name: idl.string
    color: Color
    samples: idl.sequence[idl.float32]


class TestTypeIdentity:
    def test_it_names_the_type(self) -> None:
        """The identity starts with the IDL type name, then 16 hex digits."""
        name, _, digest = idl.type_identity(Job).partition("@")
        assert name == "ident::Job"
        assert len(digest) == 16
        int(digest, 16)

    def test_the_same_structure_has_the_same_identity(self) -> None:
        """Two classes declaring the same wire structure share one identity."""
        assert idl.type_identity(SameJob) == idl.type_identity(Job)

    @pytest.mark.parametrize("other", [WiderId, Unkeyed, Renamed, OtherEnum, Bounded, OtherName])
    def test_any_change_of_structure_changes_it(self, other: type) -> None:
        """Width, key, member name, enum values, bounds or type name: another identity."""
        assert idl.type_identity(other) != idl.type_identity(Job)

    def test_it_is_stable_across_processes(self) -> None:
        """Another interpreter (another hash seed) computes the same identity."""
        code = (
            "import idl\n"
            "from tests.support.peers.channels_types import Msg\n"
            "print(idl.type_identity(Msg))\n"
        )
        seen = set()
        for seed in ("1", "2"):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
            )
            seen.add(done.stdout.strip())
        assert seen == {idl.type_identity(Msg)}

    def test_a_class_that_is_no_topic_type_is_refused(self) -> None:
        """Anything but a topic struct raises IdlError."""
        with pytest.raises(IdlError):
            idl.type_identity(int)
