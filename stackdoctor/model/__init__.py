"""The typed data every layer passes on (facts, the probe contract, the view, plans, reports, their difference): dataclasses that round-trip through JSON."""
