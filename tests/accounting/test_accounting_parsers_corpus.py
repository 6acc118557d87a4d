"""accounting.parse's column readers are thin wrappers of slurmkit.slurm's scalar readers: on
every TRES string, duration and memory size of the shared corpus's real captures (sacct/,
sacct2/, slurm/; gathered by tests/corpus_values.py with slurmkit's own readers) the column
reader gives what the scalar gives, value by value. And the GPU count of a TRES string is one
function: the former four readers' call sites (submit's sacct poll, accounting's AllocTRES,
report capacity's CfgTRES, report breakdown's reservation TRES) agree on every corpus string."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from corpus_values import durations, memory_sizes, tres_strings

from slurmkit.accounting import parse as P
from slurmkit.errors import InputError
from slurmkit.slurm import duration, memory, tres


def _or_nan(fn, v):
    try:
        got = fn(v)
    except InputError:
        return math.nan
    return math.nan if got is None else float(got)


def _same(col, want):
    np.testing.assert_array_equal(np.asarray(col, dtype=float), np.asarray(want, dtype=float))


def test_tres_column_readers_are_the_scalar_reader(corpus):
    values = sorted(tres_strings(corpus))
    col = pd.Series(values)
    gpus, gtype = P.gpus_from_tres(col)
    _same(gpus, [_or_nan(lambda v: tres.gpu_count(v) or 0, v) for v in values])
    assert list(gtype) == [tres.gpu_type(v) for v in values]
    assert not P.negative_gpus(col).any()
    # the physical view: the scalar reader's value by value; no corpus capture has a MIG type,
    # so on every real string it equals sreport's count
    phys = P.physical_gpus_from_tres(col)
    _same(phys, [_or_nan(lambda v: tres.physical_gpus(v) or 0, v) for v in values])
    _same(phys, gpus)
    keys = {"cpu": None, "billing": None, "node": None, "energy": None, "gres/gpuutil": None,
            "mem": "M", "gres/gpumem": "B", "vmem": "B"}
    both = P.tres_values(col, keys)
    for key, bare in keys.items():
        if bare is None:
            want = [_or_nan(lambda v: tres.number(v, key), v) for v in values]
            _same(P.tres_number(col, key), want)
        else:
            want = [_or_nan(lambda v: tres.mem_mib(v, key, bare), v) for v in values]
            _same(P.tres_mem_mib(col, key, bare), want)
        _same(both[key], want)
    assert np.isfinite(both["cpu"]).sum() > 100 and np.isfinite(both["gres/gpumem"]).sum() > 0


def test_duration_column_readers_are_the_scalar_reader(corpus):
    found = durations(corpus)
    secs = sorted(found["s"])
    _same(P.parse_duration_s(pd.Series(secs)),
          [_or_nan(lambda v: (lambda s: math.nan if s == math.inf else s)(duration.seconds(v, "s")), v) for v in secs])
    limits = sorted(found["min"])
    _same(P.parse_timelimit_s(pd.Series(limits)), [_or_nan(lambda v: duration.seconds(v, "min"), v) for v in limits])
    raw = ["60", "4294967295", "0", ""]       # TimelimitRaw: whole minutes
    _same(P.parse_timelimit_s(pd.Series(raw), raw_minutes=True), [3600, math.inf, 0, math.nan])


def test_memory_column_reader_is_the_scalar_reader(corpus):
    for bare, values in memory_sizes(corpus).items():
        values = sorted(values) + ["5KK", "1.5G", ""]
        mib, per = P.parse_mem_mib(pd.Series(values), bare=bare)
        want = [memory.mib(v, bare) if v not in ("5KK",) else None for v in values]
        _same(mib, [math.nan if w is None else w[0] for w in want])
        assert list(per.fillna("")) == [("" if w is None else w[1]) for w in want]


def test_the_former_tres_readers_agree_on_every_corpus_string(corpus):
    from slurmkit.report.breakdown import parse_reservations
    from slurmkit.report.capacity import gpus_per_node_scontrol
    from slurmkit.submit.backend import parse_sacct

    values = sorted(tres_strings(corpus))
    acc, _ = P.gpus_from_tres(pd.Series(values))
    for v, a in zip(values, acc):
        want = tres.gpu_count(v) or 0
        submit = parse_sacct(f"7|COMPLETED|n1|{v}|\n")["7"].gpus
        capacity = gpus_per_node_scontrol(f"NodeName=n1 CPUTot=8 CfgTRES={v} State=IDLE\n")["n1"]
        resv = parse_reservations("Name|Flags|NodeNames|TRES|TimeStart|TimeEnd\n"
                                  f"r1|MAINT|n1|{v}|1700000000|1700003600\n")[0]["tres"].get("gres/gpu", 0)
        assert (submit, capacity, resv, a) == (want, want, want, want), v


@pytest.mark.parametrize("text, want", [("gres/gpu:a100_3g.20gb=2", 2), ("cpu=1,gres/gpu:nvidia_a100_1g.5gb=1,gres/gpu=1", 1)])
def test_the_former_tres_readers_agree_on_mig_strings(text, want):
    from slurmkit.report.capacity import gpus_per_node_scontrol
    from slurmkit.submit.backend import parse_sacct

    assert P.gpus_from_tres(pd.Series([text]))[0][0] == want
    assert parse_sacct(f"7|COMPLETED|n1|{text}|\n")["7"].gpus == want
    assert gpus_per_node_scontrol(f"NodeName=n1 CPUTot=8 CfgTRES={text}\n")["n1"] == want
    assert tres.numbers(text)["gres/gpu"] == want
    # the physical view weighs the instance (A100 40GB: 3g.20gb 3/7, 1g.5gb 1/7); the default stays sreport's
    assert P.physical_gpus_from_tres(pd.Series([text]))[0] == pytest.approx(
        {"gres/gpu:a100_3g.20gb=2": 6 / 7}.get(text, 1 / 7))
