"""What a running Faust worker needs besides its agents: the app, consumer fixes, data directory, logs, metrics."""
