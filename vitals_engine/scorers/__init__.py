"""Scorers: string detection and, later, model-graded judges."""

from .detect import detect_answer, detect_exact, detect_includes, detect_match, detect_pattern

__all__ = ["detect_answer", "detect_exact", "detect_includes", "detect_match", "detect_pattern"]
