"""Context: the active path of the node tree turned into a model request, with its report."""

from agent_core.context.builder import ContextBuilder, estimate_tokens

__all__ = ["ContextBuilder", "estimate_tokens"]
