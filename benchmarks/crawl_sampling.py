"""What is sampled while squall crawls: the workers' CPU time and peak RSS (/proc), the topics' end offsets (Kafka).

Each sampler runs in a thread from its constructor to ``stop()``, which
returns its samples as (Unix time in seconds, value): :class:`CpuSampler`
every 0.25 s (cumulated CPU-seconds, user + system, of the processes),
:class:`OffsetSampler` every 0.5 s ((topic, partition) → end offset).
:func:`proc_peak_rss_mb` reads VmHWM in MiB. The pure reading of the samples
(:func:`crawl_measures.cpu_until`, :func:`crawl_measures.records_written`)
is in :mod:`crawl_measures`. Linux only (/proc).
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition

from squall.net.kafka_security import Broker, as_connection

CLK_TCK = os.sysconf("SC_CLK_TCK")
CPU_SAMPLE_S = 0.25  # how often the workers' CPU time is sampled
OFFSET_SAMPLE_S = 0.5  # how often the end offsets of the crawl's topics are sampled
TOPIC_LIST_S = 10.0  # how often the list of the crawl's topics is read again (all exist before the seeds)


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all threads) from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3 of the man page
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14 and 15


class CpuSampler:
    """Samples the summed CPU seconds of ``pids`` every ``CPU_SAMPLE_S`` in a thread, from now until stop()."""

    def __init__(self, pids: list[int]) -> None:
        self._pids = pids
        self._samples: list[tuple[float, float]] = []
        self._done = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        self._samples.append((time.time(), sum(proc_cpu_s(p) for p in self._pids)))

    def _loop(self) -> None:
        while not self._done.wait(CPU_SAMPLE_S):
            try:
                self._sample()
            except OSError:  # a worker is gone (the crawl failed or was stopped): no more samples
                return

    def stop(self) -> list[tuple[float, float]]:
        """Stop sampling (after one last sample, if every process is still there) and return the samples."""
        if self._done.is_set():  # stopped already
            return self._samples
        self._done.set()
        self._thread.join(5)
        try:
            self._sample()
        except OSError:
            pass
        return self._samples


def proc_peak_rss_mb(pid: int) -> float:
    """Peak resident set size (VmHWM) of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class OffsetSampler:
    """Samples the end offsets of every partition of the topics named ``<prefix>…`` in a thread, until stop().

    One admin client (the topic list, read again every ``TOPIC_LIST_S``, so
    a topic created during the crawl is seen) and one group-less consumer
    (the end offsets) for the whole crawl; the first sample is taken before
    the constructor returns.

    Raises:
        RuntimeError: (constructor) no first sample within 60 s (no broker answers).
    """

    def __init__(self, broker: Broker, prefix: str) -> None:
        self._conn = as_connection(broker)  # the broker's TLS/SASL too (squall.net.kafka_security)
        self._prefix = prefix
        self._samples: list[tuple[float, dict[tuple[str, int], int]]] = []
        self._tps: list[TopicPartition] = []
        self._listed_at = -math.inf  # monotonic time of the last topic list
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._first = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        if not self._first.wait(60) or not self._samples:
            self._done.set()
            raise RuntimeError(f"no end offsets from {self._conn.bootstrap} within 60 s: {self._error!r}")

    async def _main(self) -> None:
        admin = AIOKafkaAdminClient(**self._conn.client_kwargs())
        consumer = AIOKafkaConsumer(**self._conn.client_kwargs(), group_id=None, enable_auto_commit=False)
        try:
            await admin.start()
            await consumer.start()
            while True:
                last = self._done.is_set()  # one more sample after stop() was called, then out
                try:
                    await self._sample(admin, consumer)
                except Exception as exc:  # a failed sample is skipped; the next one may succeed
                    self._error = exc
                self._first.set()
                if last:
                    return
                await asyncio.to_thread(self._done.wait, OFFSET_SAMPLE_S)
        except Exception as exc:
            self._error = exc
        finally:
            self._first.set()
            await consumer.stop()
            await admin.close()

    async def _sample(self, admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer) -> None:
        now = time.monotonic()
        if now - self._listed_at > TOPIC_LIST_S:  # the topic list is read again now and then, not every sample
            self._tps = [
                TopicPartition(t["topic"], p["partition"])
                for t in await admin.describe_topics(None)  # every topic: naming one could auto-create it
                if t["topic"].startswith(self._prefix) and t["error_code"] == 0
                for p in t["partitions"]
            ]
            self._listed_at = now
        ends = await consumer.end_offsets(self._tps) if self._tps else {}
        self._samples.append((time.time(), {(tp.topic, tp.partition): int(end) for tp, end in ends.items()}))

    def stop(self) -> list[tuple[float, dict[tuple[str, int], int]]]:
        """Stop sampling (after one last sample) and return the samples: (Unix time, (topic, partition) → end offset)."""
        self._done.set()
        self._thread.join(30)
        return self._samples
