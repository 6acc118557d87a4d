"""``submit``: render job templates into topology-aware sbatch scripts and submit them.

Modules: ``escape`` (#SBATCH and shell quoting), ``site`` (facts from the site profile),
``placement`` (CPUs per GPU, leaf switches), ``nccl`` (fabric presets), ``templates`` (catalog
and declared parameters), ``render`` (plan, script, explain), ``backend`` (the :class:`~slurmkit.submit.backend.Backend`
interface; sbatch/squeue/sacct here), ``api`` (``slurmkit.submit(...)`` -> ``Job``).

This package is callable: once ``slurmkit.submit`` (the package) has been imported it shadows
the lazy ``slurmkit.submit`` function, so calling the package calls :func:`api.submit`.
"""

import sys
import types


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from slurmkit.submit.api import submit

        return submit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
