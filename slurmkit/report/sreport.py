"""sreport's reports as plain data (pure functions over the text sreport prints).

- :func:`cluster_utilization`: ``sreport -P [-n] [-t Seconds|Minutes|Hours] cluster utilization
  -T cpu,gres/gpu [format=...]`` -> per TRES: Allocated, Down, PLND Down, Idle, Planned
  (``Reserved`` before Slurm 22.05), Reported, Over Comm, TRES Count, in hours
- :func:`account_users`: ``sreport -P [-n] [-t ...] cluster AccountUtilizationByUser -T
  cpu,gres/gpu [format=...]`` -> account rows and user rows, per TRES, in hours
- :func:`gpu_hours`: the user rows' GPU-hours summed (the weekly reconciliation's figure)
- :func:`banner_window`: the window sreport's banner names (``-n`` prints none)

Slurm 22.05's sreport, seen in the sandbox (tests/report/data/sreport/README.md), matches
``format=`` names by prefix, so ``format=...,Planned`` prints PlannedDown a second time (header
``PLND Down``, same values): a repeated column is read once. Its default columns (no
``format=``) hold Planned.
"""

from __future__ import annotations

from slurmkit.errors import InputError

#: sreport's ``-t`` units in seconds (``Percent`` is refused: it carries no time).
UNITS = {"seconds": 1.0, "minutes": 60.0, "hours": 3600.0}
#: What sreport prints when ``-n`` hides the header, by column count (``-T`` adds TRES Name).
_DEFAULT_UTIL = ["cluster", "allocated", "down", "planned_down", "idle", "planned", "reported"]
_DEFAULT_UTIL_TRES = ["cluster", "tres", "allocated", "down", "planned_down", "idle", "planned", "reported"]
_ACCT_SHORT = ["cluster", "account", "login", "used"]     # format=Cluster,Account,Login,Used
_DEFAULT_ACCT = ["cluster", "account", "login", "proper_name", "used"]
_DEFAULT_ACCT_TRES = ["cluster", "account", "login", "proper_name", "tres", "used"]
_NAMES = {"cluster": "cluster", "tres name": "tres", "tresname": "tres", "allocated": "allocated",
          "down": "down", "plnd down": "planned_down", "planneddown": "planned_down", "idle": "idle",
          "planned": "planned", "reserved": "planned", "reported": "reported", "over comm": "overcommitted",
          "overcommitted": "overcommitted", "tres count": "tres_count", "trescount": "tres_count",
          "account": "account", "login": "login", "proper name": "proper_name", "propername": "proper_name",
          "used": "used", "energy": "energy"}
#: The figures of a utilization row that are times (converted to hours).
TIME_FIGURES = ("allocated", "down", "planned_down", "idle", "planned", "reported", "overcommitted")


def unit_of(text: str, default: str = "Minutes") -> str:
    """The ``-t`` unit an output was made with, from sreport's banner ("Usage reported in TRES
    Seconds" / "CPU Minutes" / "Percentage of Total"), else ``default`` (sreport's default is
    Minutes; ``-n`` hides the banner)."""
    import re

    m = re.search(r"Usage reported in (?:TRES |CPU )?(\w+)", text)
    return m.group(1) if m else default


def banner_window(text: str, tz: str = "UTC") -> tuple | None:
    """The window sreport's banner names (``Cluster Utilization 2026-12-02T13:00:00 -
    2026-12-02T13:59:59``, local times of the host sreport ran on) as ``(start, end)``, aware
    UTC ``pandas.Timestamp``, ``end`` exclusive (the banner's last second + 1 s); the times are
    read in ``tz``. None when there is no banner (``-n``)."""
    import re

    import pandas as pd

    m = re.search(r"Utilization (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}) - (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})", text)
    if not m:
        return None
    start, last = (pd.Timestamp(x).tz_localize(tz).tz_convert("UTC") for x in m.groups())
    return start, last + pd.Timedelta(seconds=1)


def _unit(unit: str) -> float:
    u = unit.strip().lower()
    for name, secs in UNITS.items():
        if name.startswith(u) and u:
            return secs
    raise ValueError(f"sreport -t {unit!r}: give Seconds, Minutes or Hours (Percent carries no time)")


def _table(text: str, source: str, defaults: dict[int, list[str]], what: str) -> list[tuple[int, dict]]:
    """The ``|`` rows of sreport's ``-P`` output as dicts (banner lines skipped), named by the
    header line when there is one, else by ``defaults`` (column count -> names)."""
    rows = [(i, ln.rstrip("\r")) for i, ln in enumerate(text.splitlines(), 1) if "|" in ln]
    if not rows:
        return []
    first = [c.strip().lower() for c in rows[0][1].split("|")]
    cols = None
    if first[0] == "cluster":
        cols, seen = [], set()
        for c in first:
            name = _NAMES.get(c)
            if name is None:
                raise InputError(source, rows[0][0], f"unknown {what} column {c!r}")
            cols.append(name if name not in seen else f"_repeat{len(cols)}")
            seen.add(name)
        rows = rows[1:]
    out = []
    for i, ln in rows:
        parts = ln.split("|")
        if parts and parts[-1] == "" and (cols is None or len(parts) == len(cols) + 1):
            parts = parts[:-1]                              # -p: a trailing '|'
        names = cols or defaults.get(len(parts))
        if names is None or len(parts) != len(names):
            want = len(cols) if cols else " or ".join(map(str, sorted(defaults)))
            raise InputError(source, i, f"{len(parts)} columns, expected {want}: not sreport -P {what} output")
        out.append((i, dict(zip(names, (p.strip() for p in parts)))))
    return out


def _number(value: str, source: str, line: int, column: str) -> float:
    """``3200`` or ``3200(25.19%)`` (``-t Seconds/Percent``) -> 3200.0."""
    v = value.split("(", 1)[0].strip()
    try:
        return float(v)
    except ValueError:
        raise InputError(source, line, f"{column} {value!r} is not a number") from None


def cluster_utilization(text: str, unit: str = "Minutes", source: str = "sreport cluster utilization") -> dict:
    """sreport's cluster utilization -> ``{tres: {"allocated", "down", "planned_down", "idle",
    "planned", "reported" (hours), "overcommitted" (hours, when printed), "tres_count" (when
    printed), "cluster"}}``. ``tres``: the TRES Name column (``cpu``, ``gres/gpu``); ``cpu``
    when sreport printed none (no ``-T``). ``unit``: the ``-t`` the output was made with
    (sreport's default Minutes). Several clusters: the figures are summed per TRES. Raises
    :class:`~slurmkit.errors.InputError` (``source``, line) for a row that is not sreport's."""
    k = _unit(unit)
    out: dict[str, dict] = {}
    for i, r in _table(text, source, {7: _DEFAULT_UTIL, 8: _DEFAULT_UTIL_TRES}, "cluster utilization"):
        tres = r.get("tres") or "cpu"
        d = out.setdefault(tres, {"cluster": r.get("cluster", "")})
        for col in TIME_FIGURES:
            if col in r:
                d[col] = d.get(col, 0.0) + _number(r[col], source, i, col) * k / 3600.0
        if "tres_count" in r:
            d["tres_count"] = d.get("tres_count", 0.0) + _number(r["tres_count"], source, i, "tres_count")
    return out


def account_users(text: str, unit: str = "Minutes",
                  source: str = "sreport cluster AccountUtilizationByUser", tres: str = "cpu") -> list[dict]:
    """sreport's AccountUtilizationByUser -> ``[{"cluster", "account", "login" ("" on an account
    row: the sum of the account's users and sub-accounts, plus the idle time of reservations
    given to the whole account), "tres" (``tres`` when sreport printed no TRES Name: the one
    ``-T`` asked for, sreport's default cpu), "used" (hours)}]`` in sreport's order (the account
    hierarchy, depth first). ``unit``: the ``-t`` of the output."""
    k = _unit(unit)
    return [{"cluster": r.get("cluster", ""), "account": r.get("account", ""), "login": r.get("login", ""),
             "tres": r.get("tres") or tres, "used": _number(r["used"], source, i, "used") * k / 3600.0}
            for i, r in _table(text, source, {4: _ACCT_SHORT, 5: _DEFAULT_ACCT, 6: _DEFAULT_ACCT_TRES}, "AccountUtilizationByUser")]


def gpu_hours(text: str, unit: str = "Seconds", source: str = "sreport cluster AccountUtilizationByUser") -> float:
    """The user rows' ``gres/gpu`` Used of an AccountUtilizationByUser output, summed (hours).
    Account rows (empty Login) are their users' sums and are not added again; an output without
    a TRES Name column is taken as ``-T gres/gpu``'s."""
    return sum(r["used"] for r in account_users(text, unit, source, "gres/gpu") if r["login"] and r["tres"] == "gres/gpu")
