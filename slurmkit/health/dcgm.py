"""DCGM's outputs read into per-test, per-entity results: one reader per format, here only.

- :func:`read_diag`: ``dcgmi diag -j`` JSON, as DCGM's own writer (``dcgmi/Diag.cpp``) and schema
  (``testing/python3/dcgm_diag_schema.json``) have it:

  - DCGM 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
    "results": [{"gpu_id": "1", "status": "Pass|Fail|Skip", "warnings": [{"warning",
    "error_id", "error_category", "error_severity"}], "info"}]}]}]}, "version", "Driver Version
    Detected", ...}``; the Deployment tests have one result for all GPUs (``gpu_id`` only when an
    error names one, its warnings' text under ``"warnings"``: 3.x's writer used that key);
  - DCGM 4.x: ``{"DCGM Diagnostic": {"test_categories": [... "results": [{"entity_group": "GPU",
    "entity_group_id": 1, "entity_id": 0, "status", "warnings", "info"}], "test_summary":
    {"status"}]}, "entity_groups": [...], "metadata": {"version", "Driver Version Detected"}}``;
    ``{"DCGM Diagnostic": {"runtime_error": ...}}`` when the diag could not run; ``{"iterations":
    [...]}`` for ``-n``.

  DCGM writes a warned result as ``Fail`` and a result it did not run not at all (or ``Not
  Run``); the severity of each warning (``dcgmErrorSeverity_t`` in ``dcgm_errors.h``) says what
  it means: a failed result whose warnings are all ``DCGM_ERROR_CONFIG`` (5, "this error can be
  configured": persistence mode disabled, CUDA environment variables, ECC off) is a setting of
  the node, so it warns naming the setting; any other severity (``ISOLATE`` 2, ``RESET`` 6, ...)
  or none stays a fail.
- :func:`read_diag_table`: the text table ``dcgmi diag -r 1|2|3|4`` prints without ``-j``
  (``Diag.cpp``'s ``DIAG_HEADER`` / ``DIAG_DATA`` stencil: a 26-character name column and a
  46-character result column; messages cut into 45-character pieces, one per row):

  - DCGM 3.x (3.3.9's ``HelperDisplayGpuResults``): a test row ``Pass - All``, ``Skip - All``,
    ``Fail - GPU: 0``, ``Pass - GPUs: 1, 2, 3`` (one row per status), then ``Warning`` /
    ``Info`` rows; Deployment tests ``Pass`` / ``Fail`` with ``Error`` / ``Info`` rows. The text
    names a warning's GPU only inside its words (``GPU 0 Thermal violations ...``).
  - DCGM 4.x (``HelperDisplayGlobalResult`` / ``HelperDisplayEntityResults``): a test row
    ``Pass|Fail|Warn|Skip`` ("" when not run), one row per entity ``GPU0: Pass``, warnings
    ``Warning: GPU0`` (an entity's) or ``Warning`` (the test's), ``Info[: GPU0]``.

  The table carries no severity: a failed result stays a fail unless each of its warnings is
  one of DCGM's ``DCGM_ERROR_CONFIG`` messages (persistence mode off, a CUDA environment
  variable, ECC off), which warns as in the JSON. A table that stops before its closing border is judged on the rows it holds and
  says so in ``notes``.
- :func:`read_health`: ``dcgmi health -c -j`` (``dcgmi/Health.cpp`` through
  ``DcgmiOutputJson``): ``{"header": ["Health Monitor Report"], "body": {"Overall Health":
  {"value": "Healthy|Warning|Failure"}, "GPU": {"children": {"0": {"value", "children":
  {"Errors": {"children": {"PCIe system": {"value", "overflow": [message pieces]}}}}}}}}}``.
- :func:`read_nvlink_status`: ``dcgmi nvlink --link-status`` (``dcgmi/Nvlink.cpp``): per GPU
  (``gpuId N:``) and NVSwitch (``physicalId N:``) one letter per link, ``Key: Up=U, Down=D,
  Disabled=X, Not Supported=_``.
- :func:`read_dcgm`: which of them the text is (:func:`kind_of`), then that reader.

Every reader raises :class:`DcgmFormatError` (an :class:`~slurmkit.errors.InputError`, a
ValueError) naming the file and, where there is one, the line. Standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from slurmkit.errors import InputError


class DcgmFormatError(InputError):
    """A DCGM output that cannot be read: ``file:line: message`` (line None when not about one
    line). CLI exit status 2."""


#: The status words of a :class:`~slurmkit.health.active.DiagReport` beyond the checks' pass / warn / fail.
SKIP, ERROR = "skip", "error"
_STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": SKIP, "skipped": SKIP,
           "not run": SKIP}

#: ``dcgmErrorSeverity_t`` (DCGM ``dcgmlib/dcgm_errors.h``): severity number -> name.
SEVERITIES = {0: "NONE", 1: "MONITOR", 2: "ISOLATE", 3: "UNKNOWN", 4: "TRIAGE", 5: "CONFIG", 6: "RESET"}
SEVERITY_CONFIG = 5  # DCGM_ERROR_CONFIG: "This error can be configured"


@dataclass
class DiagTest:
    """One test result: ``name`` (``GPU Memory``, ``pcie``, ``software``...), ``entity``
    (``GPU1``, ``Switch0``: DCGM's entity group and id; ``*`` for a result about every GPU),
    ``status`` (pass | warn | fail | skip, after :func:`read_diag`'s severity rule), the
    ``warnings`` dcgmi gave (text), their ``severities`` (``error_severity``, None where dcgmi
    gave none) and ``error_ids`` (``dcgmError_t``), and ``dcgm_status`` (the status word dcgmi
    printed, e.g. ``Fail`` for a configuration warning)."""

    name: str
    entity: str
    status: str
    warnings: list[str] = field(default_factory=list)
    severities: list = field(default_factory=list)
    error_ids: list = field(default_factory=list)
    dcgm_status: str = ""

    @property
    def gpu_index(self) -> int | None:
        """The GPU's DCGM id (NVML index) for a ``GPU<n>`` entity, else None."""
        return int(self.entity[3:]) if self.entity.startswith("GPU") and self.entity[3:].isdigit() else None

    @property
    def config_only(self) -> bool:
        """True when every warning carries DCGM_ERROR_CONFIG severity (a setting of the node)."""
        return bool(self.severities) and all(s == SEVERITY_CONFIG for s in self.severities)

    def describe(self) -> str:
        where = f"{self.entity} " if self.entity != "*" else ""
        text = f"{where}{self.name}: {self.status}"
        if self.status == "warn" and self.config_only:
            return text + f" (setting, DCGM severity CONFIG: {self.warnings[0]})"
        return text + (f" ({self.warnings[0]})" if self.warnings else "")


@dataclass
class DiagRun:
    """What one DCGM output holds: its ``tests`` (:class:`DiagTest`, one per result and
    entity), ``version`` (DCGM's, from ``metadata`` / the 3.x top level / the table's ``DCGM
    Version`` row; "" when absent), ``driver_version`` ("Driver Version Detected"), ``entities``
    (``GPU0`` -> ``{"device_id", "serial_num"}`` from DCGM 4's ``entity_groups``), ``kind`` (which
    output: :data:`KINDS`) and ``notes`` (what the reader left out or could not see: ``file:line:
    ...`` lines)."""

    tests: list[DiagTest]
    version: str = ""
    driver_version: str = ""
    entities: dict = field(default_factory=dict)
    kind: str = ""
    notes: list = field(default_factory=list)




def _warnings(r: dict) -> tuple[list[str], list, list]:
    """(texts, severities, error ids) of a result's ``warnings``."""
    texts, sevs, ids = [], [], []
    for w in r.get("warnings") or []:
        sev = eid = None
        if isinstance(w, dict):
            sev, eid = w.get("error_severity"), w.get("error_id")
            # 4.x and 3.x per-GPU tests: "warning"; 3.x Deployment tests: "warnings" (its writer's key)
            text = w.get("warning", w.get("warnings", w.get("message")))
            w = text if isinstance(text, str) else json.dumps(w)
        texts.append(" ".join(str(w).split()))
        sevs.append(sev if isinstance(sev, int) and not isinstance(sev, bool) else None)
        ids.append(eid if isinstance(eid, int) and not isinstance(eid, bool) else None)
    return texts, sevs, ids


def _entity(r: dict) -> str:
    if "entity_id" in r:
        return f"{r.get('entity_group', 'GPU')}{r['entity_id']}"
    ids = str(r.get("gpu_ids", r.get("gpu_id", "*")))
    return f"GPU{ids}" if ids.isdigit() else "*"


def _one_doc(doc: dict, origin: str, out: DiagRun) -> None:
    diag = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))
    if not isinstance(diag, dict):
        raise DcgmFormatError(origin, None, "not dcgmi diag output (no 'DCGM Diagnostic' or 'DCGM GPU Diagnostic')")
    if diag.get("runtime_error"):
        raise DcgmFormatError(origin, None, f"dcgmi diag could not run: {' '.join(str(diag['runtime_error']).split())}")
    cats = diag.get("test_categories")
    if not isinstance(cats, list):
        raise DcgmFormatError(origin, None, "no 'test_categories' in the diag output")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else doc
    out.version = out.version or str(meta.get("version") or diag.get("version") or "")
    out.driver_version = out.driver_version or str(meta.get("Driver Version Detected") or "")
    for grp in doc.get("entity_groups") or []:
        for e in (grp.get("entities") or []) if isinstance(grp, dict) else []:
            if isinstance(e, dict) and "entity_id" in e:
                out.entities[f"{grp.get('entity_group', 'GPU')}{e['entity_id']}"] = {
                    k: e[k] for k in ("device_id", "serial_num") if k in e}
    for cat in cats:
        for t in (cat.get("tests") or []) if isinstance(cat, dict) else []:
            name = str(t.get("name", "?"))
            for r in t.get("results") or []:  # a test DCGM did not run has no results
                word = str(r.get("status", "")).strip()
                status = _STATUS.get(word.lower())
                if status is None:
                    raise DcgmFormatError(origin, None, f"test {name!r}: unknown status {r.get('status')!r}")
                texts, sevs, ids = _warnings(r)
                test = DiagTest(name, _entity(r), status, texts, sevs, ids, word)
                if status == "fail" and test.config_only:
                    test.status = "warn"  # a setting of the node (DCGM_ERROR_CONFIG), not the hardware
                out.tests.append(test)


def read_diag(text: str, origin: str = "dcgmi") -> DiagRun:
    """The results, DCGM version and entities in ``dcgmi diag -j`` output ``text`` (DCGM 3.x or
    4.x, any text around the JSON ignored; see the module docstring; ``kind`` "diag-json"). Raises :class:`DcgmFormatError`
    (a ValueError) naming ``origin`` for output without such a document: no JSON, bad JSON, another document, an
    unknown status word, or DCGM's ``runtime_error`` (the diag did not run)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise DcgmFormatError(origin, None, f"no JSON in the output: {' '.join(text.split())[:160]!r}")
    try:
        doc = json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise DcgmFormatError(origin, None, f"bad JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise DcgmFormatError(origin, None, "want a JSON object")
    out = DiagRun([], kind="diag-json")
    docs = doc.get("iterations") if isinstance(doc.get("iterations"), list) else [doc]  # dcgmi diag -n N
    for d in docs:
        if not isinstance(d, dict):
            raise DcgmFormatError(origin, None, "an iteration is not a JSON object")
        _one_doc(d, origin, out)
    return out


def parse_diag(text: str, origin: str = "dcgmi") -> list[DiagTest]:
    """The test results of :func:`read_diag` (raises as it does)."""
    return read_diag(text, origin).tests


# ---- dcgmi diag -r N (text table) -------------------------------------------------------------

#: The result column's width for a message piece (``Diag.cpp`` ``DATA_INFO_TAG_LEN``).
_PIECE = 45
_STATUS_ROW = re.compile(r"(Pass|Fail|Warn|Skip)(?:\s*-\s*(?:(All)|GPUs?:\s*([\d,\s]+)))?$")
_ENTITY_ROW = re.compile(r"([A-Za-z_]+?)(\d+):\s*(Pass|Fail|Warn|Skip)?$")
_CODE_ROW = re.compile(r"Code: \(\d+\)$")  # 3.x's Diagnostic test under "Warn - All": its return code
_SECTION = re.compile(r"[+|]-----\s+(.+?)\s+-+\+")
_BORDER = re.compile(r"\+[-=]+\+[-=]+\+$")
#: The messages of DCGM's ``DCGM_ERROR_CONFIG`` errors a table may hold (``dcgm_errors.h``
#: ``DCGM_FR_PERSISTENCE_MODE_MSG``, ``DCGM_FR_BAD_CUDA_ENV_MSG``, ``DCGM_FR_ECC_DISABLED_MSG``;
#: their severity from ``dcgm_errors.c``): the table prints no severity, these words say it.
_CONFIG_MSG = re.compile(r"(?:Persistence Mode: )?Persistence mode for GPU \d+ is disabled\."
                         r"|Found CUDA performance-limiting environment variable '"
                         r"|Skipping test \S+ because ECC is not enabled on GPU \d+")


class _Test:
    """One test of a table as its rows give it (turned into :class:`DiagTest` at the end)."""

    def __init__(self, name: str, line: int):
        self.name, self.line = name, line
        self.glob: DiagTest | None = None   # the test's own row (4.x; 3.x Deployment)
        self.per: dict = {}                 # entity -> DiagTest (3.x GPU lists, 4.x entity rows)

    def results(self) -> list[DiagTest]:
        if not self.per:
            return [self.glob] if self.glob else []
        out = list(self.per.values())
        if self.glob and self.glob.warnings:  # a warning about the test, not one entity
            out.append(self.glob)
        return out


def _cell(line: str) -> tuple[str, str] | None:
    """(name, result piece) of a table row ``| name | result |``; the piece keeps a leading
    space (a message cut before one) and loses the padding; None for any other line."""
    if not line.startswith("|") or line.count("|") < 2:
        return None
    name, _, rest = line[1:].partition("|")
    if rest.endswith("|"):
        rest = rest[:-1]
    return name.strip(), (rest[1:] if rest.startswith(" ") else rest).rstrip()


def _gpus_in(text: str) -> list[str]:
    """The GPUs a message names (``GPU 0``, ``GPU0``), each once, in order."""
    return list(dict.fromkeys(f"GPU{g}" for g in re.findall(r"\bGPU ?(\d+)", text)))


class _TableReader:
    """The state of reading one table: the section, the test being read, the message (a
    ``Warning`` / ``Error`` / ``Info`` row and its continuation pieces) being read."""

    def __init__(self, origin: str):
        self.origin, self.out = origin, DiagRun([], kind="diag-table")
        self.tests: list[_Test] = []
        self.section, self.cur, self.msg = "", None, None  # msg: [kind, entity, pieces, line]
        self.rows = self.closed = self.last_n = 0

    def message_text(self) -> tuple[str, str, str, int]:
        kind, entity, pieces, n = self.msg
        self.msg = None
        text = prev = ""
        for p in pieces:  # pieces are 45-character cuts: a shorter one lost a trailing space
            text = text + p if not text or len(prev) >= _PIECE else text + " " + p.lstrip()
            prev = p
        return kind, entity, " ".join(text.split()), n

    def flush(self) -> None:
        """Give the message being read to the result(s) it is about."""
        if self.msg is None:
            return
        kind, entity, text, n = self.message_text()
        if kind == "Info" or not text:
            return
        cur = self.cur
        if cur is None:  # an error with no test row before it (a Deployment failure)
            t = _Test(self.section or "diag", n)
            gpus = _gpus_in(text)
            t.glob = DiagTest(t.name, gpus[0] if len(gpus) == 1 else "*", "fail", [], [], [], kind)
            self.tests.append(t)
            target = [t.glob]
        elif entity:
            target = [cur.per.setdefault(entity, DiagTest(cur.name, entity, "fail", [], [], [], ""))]
        elif cur.per:  # 3.x: the GPU is named in the words; else every result that did not pass
            target = ([cur.per[g] for g in _gpus_in(text) if g in cur.per]
                      or [r for r in cur.per.values() if r.status in ("fail", "warn")]
                      or [cur.glob or next(iter(cur.per.values()))])
        else:
            if cur.glob is None:
                raise DcgmFormatError(self.origin, n, f"a {kind} row before the test's result")
            gpus = _gpus_in(text)
            if cur.glob.entity == "*" and cur.glob.status != "pass" and len(gpus) == 1:
                cur.glob.entity = gpus[0]  # 3.x Deployment: the GPU its error names (as its JSON's gpu_id)
            target = [cur.glob]
        sev = SEVERITY_CONFIG if _CONFIG_MSG.match(text) else None
        for t in target:
            t.warnings.append(text)
            t.severities.append(sev)
            t.error_ids.append(None)

    def result_row(self, word: str, n: int) -> None:
        """A row with no name under a test: 4.x ``GPU0: Pass``, 3.x ``Fail - GPU: 0``."""
        cur = self.cur
        if cur is None:
            raise DcgmFormatError(self.origin, n, f"a result row before any test: {word!r}")
        if _CODE_ROW.match(word):
            return
        m4, m3 = _ENTITY_ROW.match(word), _STATUS_ROW.match(word)
        if m4:
            ent = f"{m4.group(1)}{m4.group(2)}"
            cur.per[ent] = DiagTest(cur.name, ent, _STATUS[(m4.group(3) or "not run").lower()], [], [], [],
                                    m4.group(3) or "")
        elif m3 and m3.group(3):
            _gpu_list(cur, m3, self.origin, n)
        else:
            raise DcgmFormatError(self.origin, n, f"test {cur.name!r}: want 'GPU<n>: <status>' or "
                                                  f"'<status> - GPUs: <list>', got {word!r}")

    def test_row(self, name: str, word: str, n: int) -> None:
        self.cur = cur = _Test(name, n)
        self.tests.append(cur)
        m3 = _STATUS_ROW.match(word)
        if not word:  # 4.x: not run
            cur.glob = DiagTest(name, "*", SKIP, [], [], [], "")
        elif m3 is None:
            raise DcgmFormatError(self.origin, n, f"test {name!r}: want Pass, Fail, Warn or Skip "
                                                  f"(with ' - All' or ' - GPUs: <list>'), got {word!r}")
        elif m3.group(3):
            _gpu_list(cur, m3, self.origin, n)
        else:
            cur.glob = DiagTest(name, "*", _STATUS[m3.group(1).lower()], [], [], [], word)

    def line(self, s: str, n: int) -> None:
        m = _SECTION.match(s)
        if m:
            self.flush()
            self.section, self.cur, self.rows = m.group(1), None, self.rows + 1
            return
        if _BORDER.match(s):
            self.flush()
            self.closed = n if self.rows else self.closed
            return
        cell = _cell(s)
        if cell is None or (cell[0] == "Diagnostic" and cell[1].strip() == "Result"):
            return
        name, piece = cell
        word = piece.strip()
        self.rows, self.last_n = self.rows + 1, n
        if self.section == "Metadata":
            if name == "DCGM Version":
                self.out.version = word
            elif name == "Driver Version Detected":
                self.out.driver_version = word
            return
        head, _, who = name.partition(":")
        if head in ("Warning", "Error", "Info"):
            self.flush()
            self.msg = [head, who.strip(), [piece], n]
        elif not name and self.msg is not None and not _ENTITY_ROW.match(word):
            self.msg[2].append(piece)
        else:
            self.flush()
            if name:
                self.test_row(name, word, n)
            else:
                self.result_row(word, n)


def read_diag_table(text: str, origin: str = "dcgmi") -> DiagRun:
    """The results of a ``dcgmi diag -r N`` text table (DCGM 3.x or 4.x; see the module
    docstring): one :class:`DiagTest` per test and entity (``*`` for a result about every GPU),
    the version and driver from the Metadata rows, ``kind`` "diag-table". Lines outside the table
    (a shell prompt, ``Successfully ran diagnostic for group.``, kubectl's notes) are ignored.
    Raises :class:`DcgmFormatError` (file:line) for a row whose result is no status word, a
    message row before any test, text without a table row, or a table without a test result."""
    rd = _TableReader(origin)
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s:
            rd.line(s, n)
    rd.flush()
    if not rd.rows:
        raise DcgmFormatError(origin, 1, "no dcgmi diag table row ('| <test> | <result> |')")
    out = rd.out
    out.tests = [r for t in rd.tests for r in t.results()]
    if not out.tests:
        raise DcgmFormatError(origin, rd.last_n, "the table holds no test result (cut before its first test)")
    for r in out.tests:
        if r.status == "fail" and r.config_only:
            r.status = "warn"  # a setting of the node (as read_diag's severity rule)
    if rd.closed < rd.last_n:
        out.notes.append(f"{origin}:{rd.last_n}: the table stops without its closing border (the output is cut): "
                         "judged on the rows it holds")
    return out


def _gpu_list(cur: _Test, m, origin: str, n: int) -> None:
    """3.x's ``<status> - GPU[s]: 0, 1`` row: one result per GPU named."""
    st = _STATUS[m.group(1).lower()]
    ids = [x.strip() for x in m.group(3).split(",") if x.strip()]
    if not all(x.isdigit() for x in ids):
        raise DcgmFormatError(origin, n, f"test {cur.name!r}: want GPU numbers, got {m.group(3)!r}")
    for x in ids:
        cur.per[f"GPU{x}"] = DiagTest(cur.name, f"GPU{x}", st, [], [], [], m.group(1))


# ---- dcgmi health -c -j -----------------------------------------------------------------------

#: ``dcgmHealthWatchResults_t`` as ``Health::HelperHealthToString`` writes it -> status.
HEALTH = {"healthy": "pass", "warning": "warn", "failure": "fail"}


def _health_word(value, origin: str, what: str) -> str:
    st = HEALTH.get(str(value).strip().lower())
    if st is None:
        raise DcgmFormatError(origin, None, f"{what}: want Healthy, Warning or Failure, got {value!r}"
                              + (" (DCGM's own trouble)" if str(value).lower().startswith("internal") else ""))
    return st


def read_health(text: str, origin: str = "dcgmi") -> DiagRun:
    """The verdicts of ``dcgmi health -c -j`` (see the module docstring), ``kind`` "health": one
    :class:`DiagTest` per entity and system that has incidents (name ``PCIe system``, entity
    ``GPU1``, its messages as warnings), or one ``Overall Health`` result for all (``*``) when there
    are none. Raises :class:`DcgmFormatError` for no JSON, bad JSON, another document or an
    unknown health word (``Internal error``: DCGM's own trouble)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise DcgmFormatError(origin, None, "no JSON in the output")
    try:
        doc = json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise DcgmFormatError(origin, text.count("\n", 0, start) + exc.lineno, f"bad JSON: {exc.msg}") from None
    body = doc.get("body") if isinstance(doc, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("Overall Health"), dict):
        raise DcgmFormatError(origin, None, "not dcgmi health -c -j output (no body.'Overall Health')")
    overall = _health_word(body["Overall Health"].get("value"), origin, "Overall Health")
    out = DiagRun([], kind="health")
    for group, box in body.items():
        if group == "Overall Health" or not isinstance(box, dict):
            continue
        for eid, ent in (box.get("children") or {}).items():
            if not isinstance(ent, dict):
                continue
            systems = ((ent.get("children") or {}).get("Errors") or {}).get("children") or {}
            for system, sbox in systems.items():
                sbox = sbox if isinstance(sbox, dict) else {}
                st = _health_word(sbox.get("value"), origin, f"{group}{eid} {system}")
                words = " ".join(str(p) for p in sbox.get("overflow") or [])
                out.tests.append(DiagTest(system, f"{group}{eid}", st, [" ".join(words.split())] if words.strip()
                                          else [], [None] if words.strip() else [], [None] if words.strip() else [],
                                          str(sbox.get("value"))))
    if not out.tests or overall != "pass" and all(t.status == "pass" for t in out.tests):
        out.tests.append(DiagTest("Overall Health", "*", overall, [], [], [], str(body["Overall Health"]["value"])))
    return out


# ---- dcgmi nvlink --link-status ---------------------------------------------------------------

#: ``dcgmi nvlink --link-status``'s key: letter -> (status, word).
LINK = {"U": ("pass", "up"), "D": ("fail", "down"), "X": ("warn", "disabled"), "_": (SKIP, "not supported")}


def read_nvlink_status(text: str, origin: str = "dcgmi") -> DiagRun:
    """Link states of ``dcgmi nvlink --link-status`` (``kind`` "nvlink"): one ``nvlink``
    :class:`DiagTest` per GPU / NVSwitch, the worst of its links (a link down fails, disabled
    warns, not supported is not judged), the links not up named in its warning (``links 0-17
    down``). Raises :class:`DcgmFormatError` for a link row before any ``gpuId`` / ``physicalId``
    line or an unknown letter."""
    out = DiagRun([], kind="nvlink")
    who = None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        m = re.match(r"(gpuId|physicalId)\s+(\d+):$", s)
        if m:
            who = f"{'GPU' if m.group(1) == 'gpuId' else 'NvSwitch'}{m.group(2)}"
            continue
        if not s or not re.fullmatch(r"[A-Za-z_](\s+[A-Za-z_])*", s) or s in ("GPUs:", "NvSwitches:"):
            continue
        letters = s.split()
        if who is None:
            raise DcgmFormatError(origin, n, f"link states before any 'gpuId <n>:' line: {s!r}")
        bad = [x for x in letters if x not in LINK]
        if bad:
            raise DcgmFormatError(origin, n, f"{who}: unknown link state {bad[0]!r} (want U, D, X or _)")
        by: dict = {}
        for i, x in enumerate(letters):
            by.setdefault(x, []).append(i)
        status = next((LINK[x][0] for x in ("D", "X", "U", "_") if x in by), SKIP)
        notes = [f"links {_ranges(by[x])} {LINK[x][1]}" for x in ("D", "X") if x in by]
        out.tests.append(DiagTest("nvlink", who, status, notes, [None] * len(notes), [None] * len(notes),
                                  f"{len(by.get('U', []))}/{len(letters)} up"))
        who = None
    if "NvLink Link Status" not in text and not out.tests:
        raise DcgmFormatError(origin, 1, "not dcgmi nvlink --link-status output")
    return out


def _ranges(ids: list[int]) -> str:
    parts, start = [], None
    for i, x in enumerate(ids):
        if start is None:
            start = x
        if i + 1 == len(ids) or ids[i + 1] != x + 1:
            parts.append(f"{start}" if start == x else f"{start}-{x}")
            start = None
    return ",".join(parts)


# ---- which output ------------------------------------------------------------------------------

#: The outputs :func:`read_dcgm` reads: kind -> reader.
KINDS = {"diag-json": read_diag, "diag-table": read_diag_table, "health": read_health, "nvlink": read_nvlink_status}


def kind_of(text: str) -> str | None:
    """``diag-json`` | ``diag-table`` | ``health`` | ``nvlink`` for a DCGM output ``text`` (what
    is around it, such as a shell prompt, does not matter), or None."""
    if "NvLink Link Status" in text or re.search(r"^\s*gpuId \d+:\s*$", text, re.M):
        return "nvlink"
    if "{" in text:
        if '"Overall Health"' in text or '"Health Monitor Report"' in text:
            return "health"
        if '"DCGM Diagnostic"' in text or '"DCGM GPU Diagnostic"' in text or '"iterations"' in text:
            return "diag-json"
    if re.search(r"^\s*\|.*\|", text, re.M):
        return "diag-table"
    if "{" in text:
        return "diag-json"  # read_diag says what is wrong with it
    return None


def read_dcgm(text: str, origin: str = "dcgmi") -> DiagRun:
    """The results in a DCGM output of any kind :func:`kind_of` knows, by its one reader. Raises
    :class:`DcgmFormatError`: for dcgmi's own ``Error: ...`` line (``Health watches not
    enabled``, no host engine: naming its line), for text that is none of the kinds, and as each
    reader does."""
    kind = kind_of(text)
    if kind is None:
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip().startswith("Error:"):
                raise DcgmFormatError(origin, n, f"dcgmi reported an error, no result: {line.strip()}")
        raise DcgmFormatError(origin, 1, "not dcgmi diag (-j or the -r table), dcgmi health -c -j or "
                                         "dcgmi nvlink --link-status output")
    return KINDS[kind](text, origin)
