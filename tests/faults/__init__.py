"""Fault-injection suite (issue 7): one named test per fault."""
