"""This computer and this boot, each named by a hash, for every record (its `device`
field's `machine` and `boot`): which runs shared a machine, and a sitting. Imports no
JAX, so the JAX-free peer benchmarks (benchmarks/peers.py) name theirs the same way."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

_MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def machine_id() -> str:
    """This computer, as a 16-hex-digit hash of its OS machine id (systemd's, made once
    per installation; absent in some containers) and its host name. Host names repeat
    across computers ("localhost", a default VM name) and container images can ship one
    machine id to every container, but the pair rarely does; a fresh VM (a new Colab
    session) is a new machine. Hashed: a record names the machine without exposing it."""
    found = ""
    for candidate in _MACHINE_ID_FILES:
        try:
            found = Path(candidate).read_text().strip()
        except OSError:
            continue
        if found:
            break
    text = f"{found}\n{socket.gethostname()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def boot_id(path: str = "/proc/sys/kernel/random/boot_id") -> str | None:
    """This boot of the machine, as a 16-hex-digit hash of the kernel's boot id (Linux:
    new at every boot), or None where the OS gives none. VMs cloned from one image share
    a machine id and a host name; two leases of such VMs differ in their boots."""
    try:
        found = Path(path).read_text().strip()
    except OSError:
        return None
    return hashlib.sha256(found.encode()).hexdigest()[:16] if found else None
