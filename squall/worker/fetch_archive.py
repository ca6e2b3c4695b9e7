"""One fetch written to the WARC file: on the event loop when small, in a thread when large."""

from __future__ import annotations

import asyncio
import functools

from squall.net.http import FetchResult
from squall.net.warc import WarcWriter
from squall.policy.fetch_decision import revisit_of
from squall.policy.records import FetchMessage


async def archive_fetch(
    warc: WarcWriter, msg: FetchMessage, result: FetchResult, inline_max_bytes: int, revisits: bool
) -> float:
    """Write the request and response records of the fetch of ``msg.url`` to ``warc``.

    With ``revisits`` (``warc.revisits``), a payload identical to the URL's
    last archived full response (:func:`squall.policy.fetch_decision.revisit_of`)
    is written as a WARC 1.1 revisit record of it (§6.7.2,
    identical-payload-digest) instead of a second copy of the body.

    A body of at most ``inline_max_bytes`` (``warc.inline.max.bytes``) is
    written on the event loop (about half a CPU-millisecond for a 12 KB page,
    less than handing it to a thread and back); a larger one in a thread, so
    the loop never stalls (the writer's lock orders the two).

    Returns:
        The WARC-Date (Unix s) of the full response record holding this
        payload: this fetch's, or the earlier one a revisit record refers to.
    """
    refers_to_s = revisit_of(msg, result.payload_digest) if revisits else None
    if refers_to_s is not None and result.payload_digest is not None:  # unchanged: no second copy of the body
        record = functools.partial(
            warc.write_revisit,
            body_length=len(result.body),
            payload_digest=result.payload_digest,
            refers_to_date_s=refers_to_s,
        )
    else:
        refers_to_s = None
        record = functools.partial(
            warc.write_fetch, body=result.body, truncated=result.truncated, payload_digest=result.payload_digest
        )
    write = functools.partial(
        record,
        msg.url,
        request_headers=result.request_headers,
        status=result.status,
        reason="",
        response_headers=result.headers,
        ip=result.ip,
        fetched_at_s=result.started_at_s,
        http_version=result.http_version,
    )
    if len(result.body) <= inline_max_bytes:
        write()
    else:
        await asyncio.to_thread(write)
    return result.started_at_s if refers_to_s is None else refers_to_s
