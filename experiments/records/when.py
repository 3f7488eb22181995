"""When and where a record was made, read from its fields: the one way to order records
by time and to tell two machines apart."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from experiments.records.schema import Record, parse_time

# A record up to this far ahead of the reader's clock is the writer's clock drifting,
# not a time to come.
CLOCK_SKEW = timedelta(minutes=10)


def recorded_at(record: Record, now: datetime | None = None) -> datetime | None:
    """When `record` was made (its `env.utc_time`), an aware UTC datetime; None when
    the time is missing, unparseable or in the future of `now` (default: this machine's
    clock) by more than CLOCK_SKEW: a record from a machine whose clock said 2099 is
    never "the newest". The one way to order records by time: never their text."""
    when = parse_time(record.env.utc_time)
    if when is None or when > (now or datetime.now(timezone.utc)) + CLOCK_SKEW:
        return None
    return when


_OLDEST = datetime.min.replace(tzinfo=timezone.utc)


def recorded_at_or_oldest(record: Record) -> datetime:
    """recorded_at, with records of no readable time sorting first."""
    return recorded_at(record) or _OLDEST


def machine_id(record: Record) -> str:
    """The machine `record` was made on, the one way to tell two apart: its
    `device.machine` (a hash of the OS machine id and the host name,
    jaxcnn.devices.machine_id) where recorded; else, for older records and kinds that
    do not record it, `host:<env.host>|<env.cpu.model>` (two VMs both named "vm" with
    different CPUs stay two; with the same CPU model they cannot be told apart)."""
    if record.device.machine:
        return record.device.machine
    host = record.env.host or record.device.host or "unknown host"
    cpu = (record.env.cpu.model if record.env.cpu else None) or "unknown CPU"
    return f"host:{host}|{cpu}"
