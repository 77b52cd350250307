"""memory_extraction: per-account batched consolidation of interactions into memory files.

``service`` wires the bus; ``queue`` batches with a debounce; ``consolidate`` runs detect →
propose (``llm``, else the rule fallback) → compare-and-swap commit; ``store`` is the only writer
of memory files; ``queries`` answers render/read/write; ``replay`` is the offline CLI.
"""
