"""Weekly utilization and energy reports from Slurm accounting.

:func:`~slurmkit.report.pipeline.weekly_report` (:mod:`slurmkit.report.pipeline`) makes one from its inputs to written
files; it is imported on first use, so importing a light module of this package (``window``)
pulls in no pandas.
"""

__all__ = ["WeeklyOptions", "WeeklyResult", "weekly_report"]


def __getattr__(name):
    if name in __all__:
        from slurmkit.report import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'slurmkit.report' has no attribute {name!r}")
