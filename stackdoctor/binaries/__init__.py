"""binaries."""
