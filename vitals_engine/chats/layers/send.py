"""The provider's send: the bottom of a live call's stack, one attempt.

The provider turns the request into its wire format, sends it and reads the reply
(`providers/`). An attempt that takes longer than the retry policy's `timeout` (set on
the call by the retries) is cut off; a timeout, ours or the transport's, is a
`ProviderTimeout`, which the retries may try again.
"""

from __future__ import annotations

import anyio

from ..._errors import ProviderTimeout
from ...vocab.turns import Turn
from .call import Call

__all__ = ["ProviderSend"]


def _timeout_message(attempt_timeout: float | None, exc: TimeoutError) -> str:
    if attempt_timeout is not None:
        return f"no answer within {attempt_timeout:g}s"
    detail = str(exc)
    return f"the request timed out: {detail}" if detail else "the request timed out"


class ProviderSend:
    """Send the call's request to its provider, within the attempt's timeout."""

    __slots__ = ()

    async def __call__(self, call: Call) -> Turn:
        provider, timeout = call.provider, call.timeout
        try:
            if timeout is None:
                return await provider.generate(call.request)
            with anyio.fail_after(timeout):
                return await provider.generate(call.request)
        except TimeoutError as exc:
            raise ProviderTimeout(
                _timeout_message(timeout, exc), provider=provider.name, model=provider.model
            ) from exc
