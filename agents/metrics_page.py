"""``GET /metrics`` on the worker's Faust web server (127.0.0.1, ``topology.web.port``).

Serves the worker's :class:`squall.worker.metrics.Metrics` (:func:`agents.observe.observed`)
plus gauges read from the tables of the partitions this worker owns at
scrape time (:class:`agents.table_gauges.TableGauges`), in Prometheus' text
exposition format 0.0.4.
"""

from __future__ import annotations

from prometheus_client import generate_latest

from agents.observe import observed
from topology import app

# Prometheus' text exposition format 0.0.4 (aiohttp refuses a charset inside content_type)
EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4"


@app.page("/metrics")
async def metrics_page(self, request):
    """Prometheus text exposition of this worker's metrics."""
    return self.bytes(generate_latest(observed().metrics.registry), content_type=EXPOSITION_CONTENT_TYPE)
