"""soong-agent core library."""
