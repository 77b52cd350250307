"""run_worker service shell."""
