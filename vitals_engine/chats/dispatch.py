"""Where every model call of every chat enters its stack of layers: `call_model`.

The call is sent through the stack of layers of its model (the layers and their order:
`chats/layers/__init__.py`), found in the run's call stacks that the current
`CallScope` carries; the engine opens a scope around each sample's solve and score
stage. A feature the run does not use has no layer. A chat used outside any scope gets
the default stacks (the model's own cache, if any, then pricing, the default retries,
the send), with no shared limits and nothing recorded; one in a scope without a run's
stacks gets the same, recorded in the scope.
"""

from __future__ import annotations

from ..pacing.retry import Retry
from ..pacing.scope import current_scope
from ..providers.base import Provider
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Turn
from .layers.call import Call
from .layers.stacks import CallStacks

__all__ = ["DEFAULT_RETRY", "call_model", "default_stacks"]

#: The retry policy of calls with none of their own, their model's or their run's.
DEFAULT_RETRY = Retry()
#: The stacks of calls outside any scope, and of those in a scope without a run's stacks
#: (made again if `DEFAULT_RETRY` is replaced).
_outside: CallStacks | None = None
_scoped: CallStacks | None = None


async def call_model(provider: Provider, request: ChatRequest) -> Turn:
    """Send `request` to `provider` through the current scope's stack of layers; return
    the priced assistant turn.

    Example:
        >>> turn = await call_model(chat.provider, ChatRequest([Turn.user("What's 2+2?")]))
        >>> turn.text, turn.cost
        ('4', 1.2e-05)
    """
    scope = current_scope()
    if scope is None:
        stacks = default_stacks()
    else:
        stacks = scope.stacks or _default_scoped()
    return await stacks.stack(provider).send(Call(provider, request, scope))


def default_stacks() -> CallStacks:
    """The stacks of calls made outside any scope."""
    global _outside
    if _outside is None or _outside.retry is not DEFAULT_RETRY:
        _outside = CallStacks.outside(DEFAULT_RETRY)
    return _outside


def _default_scoped() -> CallStacks:
    global _scoped
    if _scoped is None or _scoped.retry is not DEFAULT_RETRY:
        _scoped = CallStacks.default(DEFAULT_RETRY)
    return _scoped
