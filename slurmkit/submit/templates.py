"""The job template catalog: ``job_templates/*.sbatch.j2`` and the parameters each declares.

A template starts with a jinja comment holding TOML::

    {#- slurmkit
    description = "one line"
    tasks = "per-node"          # per-node | per-gpu | single: the launch shape
    [params.python]
    default = "python3"
    help = "interpreter on the nodes"
    [runtime_env]
    MASTER_ADDR = "what the script computes at run time, and from what"
    -#}

An optional ``checkpoint_signal = "USR1"`` in the header is the template's default checkpoint
signal (``slurmkit submit --checkpoint-signal``); the shipped templates set none.

``--set key=value`` accepts only the declared params; the value is converted to the type of
the default (int, float, bool, str; lists/tables as JSON).
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources

from slurmkit.errors import InputError

SUFFIX = ".sbatch.j2"
_HEADER = re.compile(r"\A\{#-?\s*slurmkit\s*\n(.*?)\n\s*-?#\}", re.S)
TASK_SHAPES = ("per-node", "per-gpu", "single")
#: Parameters every template takes through ``--set`` besides its header's own: the renderer
#: reads them (``slurmkit.submit.render``), not the template. Name -> help.
JOB_PARAMS = {"max_restarts": "times a job requeues itself (time limit, node failure) before it fails "
                              "(default: the site profile's submit.max_restarts)"}


class TemplateError(InputError):
    """A template is unknown or malformed, or a ``--set`` is invalid: ``file`` is the template
    file (``line`` in it), the option (``--set``, ``--nodes``) or the template name, and the
    message says what is wrong. CLI exit status 2."""


@dataclass(frozen=True)
class Param:
    """A declared template parameter: ``name``, ``default`` (its type is the param's type), ``help``."""

    name: str
    default: object
    help: str = ""

    def convert(self, text: str):
        """``text`` (from ``--set``) as this parameter's type; raises :class:`TemplateError`."""
        d = self.default
        try:
            if isinstance(d, bool):
                low = text.strip().lower()
                if low in ("1", "true", "yes", "on"):
                    return True
                if low in ("0", "false", "no", "off"):
                    return False
                raise ValueError("expected true/false")
            if isinstance(d, int):
                return int(text)
            if isinstance(d, float):
                return float(text)
            if isinstance(d, (list, dict)):
                value = json.loads(text)
                if not isinstance(value, type(d)):
                    raise ValueError(f"expected a JSON {type(d).__name__}")
                return value
        except ValueError as exc:
            raise TemplateError(f"--set {self.name}={text!r}", None, str(exc)) from None
        return text


@dataclass(frozen=True)
class Template:
    """A job template: ``name``, ``path``, ``description``, ``tasks`` shape, ``params`` by name,
    ``runtime_env`` (variable -> how the script computes it), ``source`` (the jinja text),
    ``checkpoint_signal`` (the header's default checkpoint signal, "" = none)."""

    name: str
    path: str
    description: str
    tasks: str
    params: dict = field(default_factory=dict)
    runtime_env: dict = field(default_factory=dict)
    source: str = ""
    #: the header's ``checkpoint_signal`` ("" = none): its default --checkpoint-signal
    checkpoint_signal: str = ""

    def param_names(self) -> list[str]:
        """Every name ``--set`` takes for this template, sorted: its header's parameters and
        :data:`JOB_PARAMS`."""
        return sorted({*self.params, *JOB_PARAMS})

    def resolve(self, sets: dict[str, str] | None = None, values: dict | None = None) -> dict:
        """Parameter values: defaults, then ``values`` (typed, from the API), then ``sets``
        (text from ``--set``). An undeclared name raises :class:`TemplateError` naming the valid ones."""
        out = {name: p.default for name, p in self.params.items()}
        given = [("params", k, v) for k, v in (values or {}).items()]
        given += [("--set", k, v) for k, v in (sets or {}).items()]
        for where, key, value in given:
            if key in JOB_PARAMS and where == "params":
                raise TemplateError(where, None, f"{key} is not a template parameter: give it as "
                                                 f"the keyword {key}=", key)
            if key not in self.params:
                names = self.param_names()
                close = difflib.get_close_matches(key, names, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise TemplateError(where, None, f"template {self.name!r} has no such parameter{hint}; "
                                                 f"valid: {', '.join(names)}", key)
            out[key] = self.params[key].convert(value) if isinstance(value, str) else value
        return out


def parse_header(name: str, text: str, path: str = "") -> Template:
    """A :class:`Template` from a template's source text (header as in the module docstring)."""
    m = _HEADER.match(text)
    if not m:
        raise TemplateError(path or name, 1, "template lacks the '{#- slurmkit' TOML header")
    try:
        meta = tomllib.loads(m.group(1))
    except tomllib.TOMLDecodeError as exc:
        raise TemplateError(path or name, None, f"header: {exc}") from None
    tasks = meta.get("tasks", "single")
    if tasks not in TASK_SHAPES:
        raise TemplateError(path or name, None, f"header: tasks = {tasks!r}; expected one of {TASK_SHAPES}")
    params = {}
    for pname, spec in (meta.get("params") or {}).items():
        if not isinstance(spec, dict) or "default" not in spec:
            raise TemplateError(path or name, None, f"header: params.{pname} needs a default")
        params[pname] = Param(pname, spec["default"], str(spec.get("help", "")))
    return Template(name=name, path=path, description=str(meta.get("description", "")), tasks=tasks,
                    params=params, runtime_env=dict(meta.get("runtime_env") or {}), source=text,
                    checkpoint_signal=str(meta.get("checkpoint_signal", "")))


def templates_dir():
    """The shipped job templates' directory (``slurmkit/job_templates``, an importlib
    resources Traversable)."""
    return resources.files("slurmkit.job_templates")


def names() -> list[str]:
    """Names of the shipped templates (``torchrun``, ``srun``, ...), sorted."""
    return sorted(p.name[: -len(SUFFIX)] for p in templates_dir().iterdir() if p.name.endswith(SUFFIX))


def get(name: str) -> Template:
    """The shipped template ``name``; unknown names raise :class:`TemplateError` listing the known."""
    if name not in names():
        raise TemplateError(name, None, f"unknown template; known: {', '.join(names())}")
    res = templates_dir() / f"{name}{SUFFIX}"
    return parse_header(name, res.read_text(encoding="utf-8"), str(res))
