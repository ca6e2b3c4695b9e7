"""squall's agents: short loops over the topics declared in :mod:`topology`.

* :mod:`agents.status_updater` — status topic → urls/hosts tables, due index (through :mod:`agents.status_apply`)
* :mod:`agents.spout`          — ticks topic → hands out due URLs to the fetch topic
* :mod:`agents.fetcher`        — fetch topic → robots, fetch queues, HTTP, parse, WARC
* :mod:`agents.parser`         — the in-process parse step the fetcher calls
* :mod:`agents.regulator`      — signals topic → host pacing (delay, Retry-After, back-off)
"""
