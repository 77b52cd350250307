"""storage_writer service shell."""
