"""Loading: turn a configuration and the installed drivers into one mounted orchestrator."""
