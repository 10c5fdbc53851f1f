"""The report: one module per figure family, each `build(runs, out) -> Section`.

Sections run in SECTIONS order. A suite missing from the results gives a
skipped section with its reason; a section that raises is reported as
failed (with the exception) while the others are still written, and
build_report says so, so report.py can exit non-zero."""
import os
import traceback
from dataclasses import dataclass, field

from . import attention, collectives, conformance, moe, pipeline, scaling, step, tp_sp
from .common import FigureWriter, Section
from .page import write_html, write_markdown

SECTIONS = [conformance, collectives, tp_sp, attention, moe, pipeline, step, scaling]


@dataclass
class ReportResult:
    sections: list
    html: str
    markdown: str
    errors: list = field(default_factory=list)  # "section: exception" lines

    @property
    def figures(self):
        return [f for s in self.sections for f in s.figures]


def build_section(module, runs, out):
    try:
        return module.build(runs, out), None
    except Exception as e:  # a bug in one figure must not cost the whole report
        detail = "".join(traceback.format_exception_only(type(e), e)).strip()
        return Section.skip(module.TITLE, f"failed to draw: {detail}"), f"{module.TITLE}: {detail}\n" + \
            traceback.format_exc()


def build_report(runs, out_dir, title="sextant report"):
    out = FigureWriter(out_dir)
    sections, errors = [], []
    for module in SECTIONS:
        section, error = build_section(module, runs, out)
        sections.append(section)
        if error:
            errors.append(error)
    html_path = os.path.join(out_dir, "index.html")
    md_path = os.path.join(out_dir, "summary.md")
    write_html(html_path, title, runs, sections, out_dir)
    write_markdown(md_path, title, runs, sections)
    return ReportResult(sections=sections, html=html_path, markdown=md_path, errors=errors)
