"""Whether a request a peer's connection ended on was ever read, from what the connection showed.

Linux resets the peer of a Unix stream socket that closes with bytes unread in its queue, or that was never
accepted; a peer that read everything and then closed (or died) ends with EOF. So a reset that comes before any reply
line, while only the request was written, means the request was never read: nothing of it ran, and it may be sent
again. Once a reply came, or a cancel was written after the request, a reset no longer says that.
"""

from __future__ import annotations


def reset_means_never_read(replies_heard: int, cancel_sent: bool) -> bool:
    """Whether a reset of the connection shows the peer never read the request (safe to send it again), given the
    reply lines heard for it and whether a cancel was written after it."""
    return replies_heard == 0 and not cancel_sent
