"""The chaos run's parts (tests/chaos.py is the run)."""
