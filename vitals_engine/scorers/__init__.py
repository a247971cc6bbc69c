"""Scorers: string detection, and models acting as judges."""

from .detect import detect_answer, detect_exact, detect_includes, detect_match, detect_pattern
from .model_graded import model_graded_fact, model_graded_qa

__all__ = [
    "detect_answer",
    "detect_exact",
    "detect_includes",
    "detect_match",
    "detect_pattern",
    "model_graded_fact",
    "model_graded_qa",
]
