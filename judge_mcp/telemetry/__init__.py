"""Telemetry: the hooks the code calls, OpenTelemetry spans and the verdicts as evaluation events (optional extra)."""
