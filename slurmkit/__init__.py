"""slurmkit: topology-aware job submission, GPU health hooks and accounting reports for Slurm.

``import slurmkit`` is deliberately light (the prolog/epilog hooks import it on every job on
every node): heavy submodules (pandas, jinja2, matplotlib) load only when an attribute that
needs them is first used.
"""

__version__ = "0.1.0"

#: the Python API (``slurmkit.submit.api``): submit, inspect and wait for jobs
_API = ("submit", "Job", "JobNotFound", "render_script", "explain", "plan", "poll", "wait_all")

__all__ = ["__version__", *_API]


def __getattr__(name):
    # Lazy re-exports: ``slurmkit.submit(...)`` / ``slurmkit.Job`` pull in jinja2 only when used.
    if name in _API:
        from slurmkit.submit import api

        return getattr(api, name)
    raise AttributeError(f"module 'slurmkit' has no attribute {name!r}")
