"""The agent tests run the Faust app on the memory store (tables in RAM, no RocksDB directory, no broker).

Set when pytest loads this directory, before any test reads ``app.conf.store`` or opens a table's
store: set later (it was, in the ``sent`` fixture), it reconfigures a setting already read (Faust's
AlreadyConfiguredWarning), and a table whose store was opened before would keep RocksDB.

The ``sent`` fixture (:mod:`tests.agents.agent_helper`) is imported here, after the store is set,
so that every agent test module has it without importing it.
"""

from __future__ import annotations

import topology

topology.app.conf.store = "memory://"

from .agent_helper import sent  # noqa: E402, F401 (the fixture of every agent test; imported once the store is set)
