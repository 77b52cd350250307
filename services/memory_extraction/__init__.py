"""memory_extraction service shell."""
