"""``remote``: run slurmkit's Slurm work on a cluster's login node through the user's SSH setup.

Modules: ``ssh`` (the one place that runs ``ssh`` and ``rsync``: the user's ``-F`` config,
one shared ControlMaster connection, a timeout per step, failures classified by step),
``sync`` (rsync of the project, git's file list, one run folder per submit), ``site`` (the cluster's
site profile: ``--site`` or the login node's ``SLURMKIT_SITE``), ``backend``
(:class:`~slurmkit.remote.backend.RemoteBackend`: sbatch/squeue/sacct/scancel through ssh),
``submit`` (:func:`~slurmkit.remote.submit.submit_remote`: connect, sync, render, submit),
``logs`` (a job's output file, printed or followed).
"""

from slurmkit.remote.ssh import Remote, RemoteError

__all__ = ["Remote", "RemoteError"]
