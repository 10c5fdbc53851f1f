"""The report: one module per figure family, each `build(runs, out) -> Section`.

Sections run in SECTIONS order. A suite missing from the results gives a
skipped section with its reason; a section that raises is reported as
failed (with the exception, in one line) while the others are still written,
and build_report says so, so report.py can exit non-zero. The tracebacks go
to report-errors.txt in the output folder, for whoever fixes the figure."""
import os
import traceback
from dataclasses import dataclass, field

from . import attention, collectives, conformance, moe, pipeline, scaling, screen, step, tp_sp
from .common import FigureWriter, Section
from .page import write_html, write_markdown

SECTIONS = [conformance, screen, collectives, tp_sp, attention, moe, pipeline, step, scaling]


@dataclass
class ReportResult:
    sections: list
    html: str
    markdown: str
    errors: list = field(default_factory=list)  # "section: exception" lines
    error_log: str = ""                          # the tracebacks, when a section failed

    @property
    def figures(self):
        return [f for s in self.sections for f in s.figures]


ERROR_LOG = "report-errors.txt"


def build_section(module, runs, out):
    """(section, None), or when drawing raised: (a skipped section saying
    why, (one-line error, traceback))."""
    try:
        return module.build(runs, out), None
    except Exception as e:  # a bug in one figure must not cost the whole report
        detail = " ".join("".join(traceback.format_exception_only(type(e), e)).split())
        error = f"{module.TITLE}: {detail}"
        return Section.skip(module.TITLE, f"failed to draw: {detail}"), (error, traceback.format_exc())


def build_report(runs, out_dir, title="sextant report"):
    out = FigureWriter(out_dir)
    sections, failures = [], []
    for module in SECTIONS:
        section, failure = build_section(module, runs, out)
        sections.append(section)
        if failure:
            failures.append(failure)
    html_path = os.path.join(out_dir, "index.html")
    md_path = os.path.join(out_dir, "summary.md")
    write_html(html_path, title, runs, sections, out_dir)
    write_markdown(md_path, title, runs, sections)
    result = ReportResult(sections=sections, html=html_path, markdown=md_path, errors=[e for e, _ in failures])
    if failures:
        result.error_log = os.path.join(out_dir, ERROR_LOG)
        with open(result.error_log, "w", encoding="utf-8") as f:
            f.write("\n".join(f"{error}\n{trace}" for error, trace in failures))
    return result
