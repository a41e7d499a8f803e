"""Report layer: metrics against a known truth and text/JSON summaries of releases."""

from dpdist.report.metrics import operator_norm, support_metrics
from dpdist.report.text import format_release

__all__ = ["format_release", "operator_norm", "support_metrics"]
