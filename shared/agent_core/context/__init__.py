"""Context: the active path of the node tree turned into a model request, with its report."""

from agent_core.context.builder import ContextBuilder, estimate_tokens
from agent_core.context.tokens import (
    CALIBRATION,
    WINDOWS,
    Calibration,
    LearnedWindows,
    estimate_text,
    model_limits,
)

__all__ = [
    "CALIBRATION",
    "WINDOWS",
    "LearnedWindows",
    "Calibration",
    "ContextBuilder",
    "estimate_text",
    "estimate_tokens",
    "model_limits",
]
