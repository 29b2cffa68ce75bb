"""``profan export``: profan's figures on every op event, in the trace viewers users already
have — an annotated copy of the profile's ``.xplane.pb`` for XProf/TensorBoard (``xplane``) and
Chrome Trace Event JSON for Perfetto UI and ``chrome://tracing`` (``chrome``), both from the
same per-execution figures (``figures``) joined to the trace's events again (``events``)."""

from profan.export.chrome import ChromeCount, write_chrome
from profan.export.counters import DEFAULT_BINS
from profan.export.exportable import Exportable, exportable
from profan.export.figures import Figures, OpFigures, figures_of
from profan.export.target import atomic_file, check_targets, output_form, xplane_targets
from profan.export.xplane import Annotated, write_annotated

__all__ = [
    "DEFAULT_BINS",
    "Annotated",
    "ChromeCount",
    "Exportable",
    "Figures",
    "OpFigures",
    "atomic_file",
    "check_targets",
    "exportable",
    "figures_of",
    "output_form",
    "write_annotated",
    "write_chrome",
    "xplane_targets",
]
