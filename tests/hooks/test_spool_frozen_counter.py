"""A spool record whose GPU energy counter did not advance over a job of seconds is not a
measurement (slurmkit/hooks/spool.py ``record``): a plain sandbox's replayed snapshot gave a 10 s
job on 8 GPUs ``energy_mj_total: 0``, which the report then summed as 0 kWh measured. The
readings below are that record's (start = end on every GPU) and, for the moving counter, the
spool format's documented example (``start_energy_mj`` 100 -> ``end_energy_mj`` 61828)."""

from __future__ import annotations

from slurmkit.hooks import spool as S


def _gpu(i, start, end):
    return S.GpuEnergy(index=i, nvml_index=i, start_energy_mj=start, end_energy_mj=end)


def test_a_counter_that_did_not_move_over_ten_seconds_is_no_measurement():
    rec = S.record("2", "n1", "root", 0, 1796600000.0, 1796600010.0,
                   [_gpu(i, 5_000_000, 5_000_000) for i in range(8)], "slurm")
    assert rec.source == S.EnergySource.UNAVAILABLE and rec.energy_mj_total is None
    assert rec.reason == ("the energy counter of GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7 did not advance "
                          "over the job's 10 s (a frozen counter or a replayed snapshot): not a measurement")


def test_a_moving_counter_and_a_short_job_are_measured():
    rec = S.record("3", "n1", "root", 0, 1796600000.0, 1796600010.0, [_gpu(0, 100, 61828)], "slurm")
    assert rec.source == S.EnergySource.MEASURED and rec.energy_mj_total == 61728
    # under FROZEN_COUNTER_S a counter may not have ticked yet: 0 J is then what was read
    short = S.record("4", "n1", "root", 0, 1796600000.0, 1796600002.0, [_gpu(0, 100, 100)], "slurm")
    assert short.source == S.EnergySource.MEASURED and short.energy_mj_total == 0
