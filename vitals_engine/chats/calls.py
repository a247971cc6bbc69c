"""One model call: the single place every request of every chat goes through.

`call_model` sends the request through a stack of layers, each one job in its own
module (`chats/layers/`), in the order a call meets them:

```
(a traced run: tracing ─>) cache ─> accounting ─> reply journal ─> budget
      ─> batches (a resumed run's answers) ─> seats ─> retries ─> limits ─> the provider's send
                                        (a model in batch mode: ─> the batch queue)
```

The stacks are built once per run from its options (`chats/layers/stacks.py`) and found
in the current `CallScope`, which the engine opens around each sample's solve and score
stage; a feature the run does not use has no layer. A scope made without a run gets
stacks from its own options; a chat used outside any run gets the default ones (the
model's own cache, if any, then pricing, the default retries, the send), with no shared
limits and nothing recorded.
"""

from __future__ import annotations

from ..pacing.retry import Retry
from ..pacing.scope import current_scope
from ..providers.base import Provider
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Turn
from .layers.call import Call
from .layers.limits import estimate_tokens
from .layers.stacks import CallStacks

__all__ = ["DEFAULT_RETRY", "call_model", "default_stacks", "estimate_tokens"]

#: The retry policy of calls with none of their own, their model's or their run's.
DEFAULT_RETRY = Retry()
#: The stacks of calls outside any run (made again if `DEFAULT_RETRY` is replaced).
_outside: CallStacks | None = None


async def call_model(provider: Provider, request: ChatRequest) -> Turn:
    """Send `request` to `provider` through the current scope's stack of layers; return
    the priced assistant turn."""
    scope = current_scope()
    if scope is None:
        stacks = default_stacks()
    elif (stacks := scope.stacks) is None:
        stacks = scope.stacks = CallStacks.of_scope(scope, DEFAULT_RETRY)
    return await stacks.stack(provider).send(Call(provider, request, scope))


def default_stacks() -> CallStacks:
    """The stacks of calls made outside any run."""
    global _outside
    if _outside is None or _outside.retry is not DEFAULT_RETRY:
        _outside = CallStacks.outside(DEFAULT_RETRY)
    return _outside
