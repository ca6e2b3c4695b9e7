"""The agent tests run the Faust app on the memory store (tables in RAM, no RocksDB directory, no broker).

Set when pytest loads this directory, before any test reads ``app.conf.store`` or opens a table's
store: set later (it was, in the ``sent`` fixture), it reconfigures a setting already read (Faust's
AlreadyConfiguredWarning), and a table whose store was opened before would keep RocksDB.
"""

from __future__ import annotations

import topology

topology.app.conf.store = "memory://"
