"""gateway service shell."""
