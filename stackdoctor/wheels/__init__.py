"""wheels."""
