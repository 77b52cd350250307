"""task_wal service shell."""
