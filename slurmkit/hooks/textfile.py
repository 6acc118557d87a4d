"""A small Prometheus text-format writer for node_exporter's textfile collector.

Our own (about 40 lines) because importing prometheus_client costs ~130 ms per hook run. Output
follows the text exposition format 0.0.4: ``# HELP`` / ``# TYPE`` per family, one sample per
line, label values escaped (backslash, double quote, newline). Files are written atomically
(:func:`slurmkit.atomicfile.atomic_write`; a hook run's files together, :func:`write_all`) so
node_exporter never reads half a file.

Metrics written by the hooks (file ``<textfile_dir>/slurmkit_<node>_<hook>.prom``):

- ``slurmkit_health_check_status{node,hook,check,gpu,device,port}`` gauge: the worst result of
  the run per check, GPU and port for the results that did not pass, 1 warn, 2 fail (one series
  each: :func:`slurmkit.hooks.metrics.check_samples`; ``device``/``port``: a fabric result's);
- ``slurmkit_health_checks_passed{node,hook}`` gauge: how many (check, GPU, port) passed;
- ``slurmkit_hook_duration_seconds{node,hook}`` gauge: wall time of the last run (s);
- ``slurmkit_hook_last_run_timestamp_seconds{node,hook}`` gauge: Unix time of the last run;
- ``slurmkit_hook_exit_code{node,hook}`` gauge: 0 or 1;
- ``slurmkit_hook_own_errors_total{node,hook}`` counter: runs that hit slurmkit's own trouble;
- ``slurmkit_hook_own_error_last_timestamp_seconds{node,hook}`` gauge: Unix time of the last;
- ``slurmkit_hook_deadline_seconds{node,hook}`` gauge: the run's NVML deadline (``deadline_s``).

Node-level and per-GPU series (drains, Xids, ECC, energy, running jobs, ...) go to the node's
own files, one per node, so no series is in two files: see :mod:`slurmkit.hooks.metrics`.
"""

from __future__ import annotations

from slurmkit.atomicfile import atomic_write, atomic_write_all


def _esc(value) -> str:
    text = str(value)
    if "\\" in text or "\n" in text or '"' in text:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return text


def _fmt(v: float) -> str:
    if v != v:
        return "NaN"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


def render(families: list) -> str:
    """``families``: ``[(name, type, help, [(labels dict, value), ...]), ...]`` -> exposition text.

    ``type`` is ``gauge`` or ``counter``; values are numbers. Raises ValueError for a family
    named twice or a series (name and label set) given twice: node_exporter would keep one of
    them and drop the other on every scrape (a lost ``fail``), logging "was collected before with
    the same name and label values".
    """
    out = []
    names = set()
    for name, mtype, help_text, samples in families:
        if name in names:
            raise ValueError(f"metric family {name} given twice")
        names.add(name)
        out.append(f"# HELP {name} {help_text.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}")
        out.append(f"# TYPE {name} {mtype}")
        seen = set()
        for labels, value in samples:
            pairs = [(k, _esc(v)) for k, v in labels.items()]
            key = frozenset(pairs)  # escaping is one-to-one: equal escaped values, equal values
            if key in seen:
                shown = sorted((str(k), str(v)) for k, v in labels.items())
                raise ValueError(f"duplicate series {name}{{{', '.join(f'{k}={v!r}' for k, v in shown)}}}")
            seen.add(key)
            if pairs:
                lab = ",".join([k + '="' + v + '"' for k, v in pairs])
                out.append(f"{name}{{{lab}}} {_fmt(value)}")
            else:
                out.append(f"{name} {_fmt(value)}")
    return "\n".join(out) + "\n"


def write(path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, mode 0644 (node_exporter reads it). Raises
    ``OSError``; ``path`` is then left as it was."""
    atomic_write(path, text, 0o644)


def write_all(files: list) -> None:
    """Write each ``(path, text)`` of ``files`` atomically, mode 0644, renamed into place in
    the given order, with one fsync per directory (:func:`slurmkit.atomicfile.atomic_write_all`:
    a hook run's files in one batch). Raises ``OSError``; see there for what is then replaced."""
    atomic_write_all([(p, text, 0o644) for p, text in files])
