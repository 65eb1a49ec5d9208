"""Standalone scripts run INSIDE the target interpreter (stdlib + torch only).

Nothing here may import stackdoctor: the target environment may not have it.
"""
