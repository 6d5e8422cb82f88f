"""The report formats a gate writes, one ``ReportWriter`` each, in one registry (``WRITERS``) that ``evalgate gate``
and ``evalgate report`` build their output flags from. Light: the writers' functions are ``"module:function"``
references imported only when a report is written, so the CLI imports neither jinja nor matplotlib to list flags.

To add a format: one module with ``write(verdict, path, audit) -> Path`` (and, to say why a gate decided nothing,
``write_error(document, path) -> Path``; to write a suite, ``write_suite(suite_verdict, path) -> Path``), and one
registration: ``WRITERS.register(name, ReportWriter(...))`` here,
or an entry point in the group ``evalgate.report_writers`` naming a ``ReportWriter``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.core.registry import Registry, load_reference


@dataclass(frozen=True)
class ReportWriter:
    """One report format.

    Attributes:
        write: ``write(verdict, path, audit) -> Path`` (``audit``: ``evalgate.views.audit.audit_summary`` of the
        decision
            split), or its ``"module:function"``.
        help: the CLI flag's help.
        key: the verdict document's key for the path written (and the CLI's parameter name). Default: the name.
        flags: the CLI flags. Default: ``--<name>``.
        write_error: ``write_error(error_document, path) -> Path`` for a gate that decided nothing, or its
            ``"module:function"``; None: the format writes nothing then.
        suffix: the file name's ending when every format is written beside each other (``report.write_all``).
            Default: ``.<name>``.
        write_suite: ``write_suite(suite_verdict, path) -> Path`` for a suite gate (``gate.suite_results.
            SuiteVerdict``: its ``as_dict()``, ``table()``, ``members``), or its ``"module:function"``; None: a
            suite refuses the format (exit 2, naming it). The built-in formats have their suite writers in
            ``gate.report.suite``.
    """

    write: Callable[..., Path] | str
    help: str
    key: str = ""
    flags: tuple[str, ...] = ()
    write_error: Callable[..., Path] | str | None = None
    suffix: str = ""
    write_suite: Callable[..., Path] | str | None = None

    def writer(self) -> Callable[..., Path]:
        """The write function, imported if given as a reference."""
        return load_reference(self.write) if isinstance(self.write, str) else self.write

    def suite_writer(self) -> Callable[..., Path] | None:
        """The suite writer, imported if given as a reference; None when the format has none."""
        w = self.write_suite
        return load_reference(w) if isinstance(w, str) else w

    def error_writer(self) -> Callable[..., Path] | None:
        """The error writer, imported if given as a reference; None when the format has none."""
        w = self.write_error
        return load_reference(w) if isinstance(w, str) else w


WRITERS: Registry[ReportWriter] = Registry("report format", ReportWriter, entry_point_group="evalgate.report_writers")
"""Report formats by name; plugins through the ``evalgate.report_writers`` entry-point group."""

WRITERS.register("html", ReportWriter("evalgate.gate.report.outputs:write_html", "Write the HTML release report here.",
                                      key="report", flags=("--report", "--html"),
                                      write_error="evalgate.gate.report.outputs:error_html_output"))
WRITERS.register("junit", ReportWriter("evalgate.gate.report.outputs:junit_output", "Write JUnit XML here.",
                                       write_error="evalgate.gate.report.outputs:error_junit_output",
                                       suffix=".junit.xml"))
WRITERS.register("json", ReportWriter("evalgate.gate.report.outputs:write_json", "Write the verdict JSON here.",
                                      key="json_out", flags=("--json-out",),
                                      write_error="evalgate.gate.report.outputs:error_json_output"))
WRITERS.register("markdown", ReportWriter(
    "evalgate.gate.report.outputs:markdown_output",
    "Write the Markdown summary here (it is also appended to $GITHUB_STEP_SUMMARY when set).",
    write_error="evalgate.gate.report.outputs:error_markdown_output", suffix=".md"))


def key_of(name: str) -> str:
    """The document key (and CLI parameter) of writer ``name``."""
    return WRITERS[name].key or name.replace("-", "_")


def flags_of(name: str) -> tuple[str, ...]:
    """The CLI flags of writer ``name``."""
    return WRITERS[name].flags or (f"--{name}",)


def suffix_of(name: str) -> str:
    """The file-name ending of writer ``name`` in ``report.write_all``."""
    return WRITERS[name].suffix or f".{name}"


def outputs_from(params: dict[str, Any]) -> dict[str, Path]:
    """The ``{writer name: path}`` a command was given, from its click parameters (by ``key_of``); removes them
    from ``params``."""
    outputs = {}
    for name in WRITERS.names():
        path = params.pop(key_of(name), None)
        if path is not None:
            outputs[name] = Path(path)
    return outputs


def report_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Click decorator: one output-file option per registered report format (``--report/--html``, ``--junit``,
    ``--json-out``, ``--markdown``, and a plugin's ``--<name>``); the command reads them with ``outputs_from``."""
    import click

    from evalgate.core.outfile import OutFile

    for name in reversed(WRITERS.names()):
        f = click.option(*flags_of(name), key_of(name), type=OutFile(),
                         default=None, help=WRITERS[name].help)(f)
    return f
