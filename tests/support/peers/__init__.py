"""Programs the tests start as other processes (run by path, so each imports its neighbours)."""

from pathlib import Path

#: the folder of the peer programs
PEERS_DIR = Path(__file__).resolve().parent
