"""What the multi-process tests share: a free local port and torchrun's environment for a spawned worker."""

from __future__ import annotations

import os
import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the rendezvous of one test's process group)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_env(rank: int, world: int, port: int, **extra: str) -> None:
    """Set the variables ``torchrun`` gives process ``rank`` of ``world`` (what ``distributed.setup`` reads)."""
    os.environ.update(WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), **extra)
