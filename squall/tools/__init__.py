"""Broker, demo, test-site and test-harness tooling."""
