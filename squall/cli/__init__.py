"""The ``squall`` command line: one module per command (see ``squall.cli.main``)."""
