"""The reading of a reset connection (`core.delivery`): checked over its whole small domain, with the calls the
supervisor's forward and the MCP link make."""

from __future__ import annotations

import itertools

from eukhe.core.delivery import reset_means_never_read


def test_delivery_a_reset_means_never_read_only_before_any_reply_and_any_cancel() -> None:
    for heard, cancel_sent in itertools.product(range(4), (False, True)):
        assert reset_means_never_read(heard, cancel_sent) == (heard == 0 and not cancel_sent), (heard, cancel_sent)
