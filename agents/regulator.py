"""Queue regulator (StormCrawler 3.7's QueueRegulatorBolt): signals topic → hosts table.

A fetch result carries its signal inside its status message, applied by
the status updater (:mod:`agents.status_updater`, through the same
:func:`agents.queues.regulate`); this agent applies the signals that travel
alone: hand-outs that ended with no result of their URL, and any other
producer's.

The worker that owns a host's partition is the only one that applies its
signals: there is no call to a separate frontier service to lose, only a
Kafka message that its owner reads (and reads again after a crash).
It applies the same pace model as the fetcher's gate
(:mod:`squall.policy.pace`, through :func:`squall.policy.host_pacing.apply_signal`) to the
durable record; re-delivery is made harmless there. A record that changed
makes the fetcher's pace of the queue stricter where it asks for more
(:meth:`squall.worker.fetch_runtime.FetcherRuntime.learn`: an earlier owner's last
request may be answered after this worker took the queue over).
"""

from __future__ import annotations

from agents.common import config, deadletter, load_host, save_host
from agents.queues import regulate
from agents.worker_state import state
from squall.errors import MessageError
from squall.policy.handout import eligible_at_s
from squall.policy.records import SignalMessage
from topology import app, signals_topic


@app.agent(signals_topic)
async def regulator(stream):
    async for event in stream.events():
        try:
            signal = SignalMessage.from_bytes(event.value)
        except MessageError as exc:
            await deadletter(event.value, exc)
            continue
        try:
            host = load_host(signal.key)
            updated = regulate(host, signal)
        except (ValueError, TypeError, KeyError) as exc:  # e.g. a stored record of an older shape
            await deadletter(event.value, exc)
            continue
        if updated is not host:
            save_host(updated)
        index = state().index_for_key(signal.key)
        if index is not None:
            index.set_host_ready(
                signal.key,
                eligible_at_s(updated, signal.at_s, config().handout),
            )
