"""What passes the layers: one model call (`Call`), a layer (`Layer`), and their chain
(`Stack`).

A layer is an object awaited as `layer(call, send)`: it does its one job before and
after `send(call)`, the rest of the stack below it, or answers without calling it (a
cache hit). The bottom of a stack is a `Send` alone (the provider's send, or a batch
queue). The layers talk to each other only through the `Call`: what it asks (provider,
request), for whom (its scope: the role, the sample, its ledgers and list of calls),
and what the layers learn of it on the way. Each field has one writer:

```
field                       written by                            read by
provider, request, scope    call_model, when it makes the call    every layer
guess                       the call itself, at first use         budget, limits, accounting
cache                       the reply cache ("read", "write")     accounting, tracing
again                       the budget (room after a timeout)     retries
started, notes, timeout     the retries                           accounting, tracing; send
limiter, paced              the endpoint's limits                 retries; tracing
batch_id                    the one layer that answered from a    accounting, tracing,
                            batch (see below)                     reply journal
```

`batch_id` is written by the batch queue at the bottom of a batched model's stack, or,
instead of sending the call on, by the resumed batches or the reply journal above it:
one of them at most answers a call. A call answered without an attempt (the cache, the
reply journal, a resumed batch) has no `started`: its record takes the time it was
answered.

Invariants: a `Stack` is built once (per run and kind of model), never per call; a
call allocates its `Call` and nothing per layer (the chain is made of closures built
with the stack).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ...pacing.scope import CallScope
from ...providers.base import Provider
from ...vocab.model_calls import ChatRequest, RetryNote
from ...vocab.turns import Turn

if TYPE_CHECKING:
    from ...pacing.limits import EndpointLimiter

__all__ = ["Call", "Layer", "Send", "Stack", "TokenGuess", "guess_tokens"]

#: The reply's tokens the rate limits count for a call that sets no cap on them.
UNCAPPED_OUTPUT = 256

#: The request parameters that cap a reply's tokens, by provider format.
_OUTPUT_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


@dataclass(frozen=True, slots=True)
class TokenGuess:
    """A call's tokens as guessed before it is sent: the one guess every layer uses.

    Attributes:
        prompt: the request's tokens (about 4 characters a token; tool definitions not
            counted).
        output_cap: the most tokens its reply may have (`max_tokens`,
            `max_completion_tokens` or `max_output_tokens` of the request, else of the
            model's `params=`); None when neither sets one.
    """

    prompt: int
    output_cap: int | None

    @property
    def total(self) -> int:
        """Prompt and reply, the reply at its cap (`UNCAPPED_OUTPUT` without one): what the
        tokens-per-minute bucket takes before the call is sent."""
        return self.prompt + (self.output_cap if self.output_cap is not None else UNCAPPED_OUTPUT)


def _output_cap(request: ChatRequest, model_params: Mapping[str, Any] | None) -> int | None:
    for params in (request.params, model_params):
        if not params:
            continue
        for name in _OUTPUT_CAPS:
            value = params.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def guess_tokens(request: ChatRequest, model_params: Mapping[str, Any] | None = None) -> TokenGuess:
    """The tokens of a call of `request` to a model with `model_params` (its `params=`),
    guessed before it is sent.

    Example:
        >>> guess_tokens(ChatRequest([Turn.user("What's 2+2?")], params={"max_tokens": 50}))
        TokenGuess(prompt=2, output_cap=50)
    """
    chars = len(request.system_prompt or "") + sum(len(t.text) for t in request.turns)
    return TokenGuess(chars // 4, _output_cap(request, model_params))


class Call:
    """One model call on its way through the stack (who writes each field: the module
    docstring's table).

    Example:
        >>> call = Call(provider, ChatRequest([Turn.user("Hi")]), current_scope())
        >>> turn = await stack.send(call)
        >>> call.notes      # the retries it took
        []
    """

    __slots__ = (
        "_guess",
        "again",
        "batch_id",
        "cache",
        "limiter",
        "notes",
        "paced",
        "provider",
        "request",
        "scope",
        "started",
        "timeout",
    )

    def __init__(self, provider: Provider, request: ChatRequest, scope: CallScope | None) -> None:
        self.provider = provider
        self.request = request
        #: The sample stage it is made for (None: outside any run; nothing is recorded).
        self.scope = scope
        #: time.time() when its first attempt started (0.0: answered without one).
        self.started = 0.0
        #: A note per retry, in order.
        self.notes: list[RetryNote] = []
        #: Seconds one attempt may take (None: no limit), from the retry policy.
        self.timeout: float | None = None
        #: Seconds its attempts waited for their endpoint's limits (its pause, the rpm and
        #: tpm buckets, a concurrency slot).
        self.paced = 0.0
        #: The limiter of its endpoint, once an attempt took its turn there.
        self.limiter: EndpointLimiter | None = None
        #: The id of the provider batch that answered it (None: a live call).
        self.batch_id: str | None = None
        #: "write" when the cache keeps its reply, "read" when the cache answered it (what
        #: its record says of the cache).
        self.cache: str | None = None
        #: Awaited before an attempt that follows one that timed out (set by the budget:
        #: room for the attempt, now that the lost one is charged); None: nothing to do.
        self.again: Callable[[], Awaitable[None]] | None = None
        self._guess: TokenGuess | None = None

    @property
    def guess(self) -> TokenGuess:
        """Its tokens as guessed before it is sent (made at first use, then kept)."""
        guess = self._guess
        if guess is None:
            guess = self._guess = guess_tokens(self.request, self.provider.params)
        return guess


#: The rest of the stack below a layer: sends the call on, returns the reply.
Send = Callable[[Call], Awaitable[Turn]]


class Layer(Protocol):
    """One job a model call passes: before and after `send(call)`, or instead of it."""

    async def __call__(self, call: Call, send: Send) -> Turn: ...


def _then(layer: Layer, send: Send) -> Send:
    """`layer` over `send`, as one `Send` (made once per stack)."""
    meet = layer.__call__  # a bound method calls faster than the instance

    def layered(call: Call) -> Awaitable[Turn]:
        return meet(call, send)

    return layered


class Stack:
    """Layers over a bottom `Send`, chained once: `await stack.send(call)` passes them
    top to bottom.

    Example:
        >>> stack = Stack([Retries(Retry(), SystemClock(), gave_up)], ProviderSend())
        >>> turn = await stack.send(Call(provider, request, None))
    """

    __slots__ = ("bottom", "layers", "send")

    def __init__(self, layers: Sequence[Layer], bottom: Send) -> None:
        self.layers = tuple(layers)
        self.bottom = bottom
        send = bottom
        for layer in reversed(self.layers):
            send = _then(layer, send)
        #: The top of the stack: send a call through every layer.
        self.send: Send = send

    def names(self) -> list[str]:
        """The layers' and the bottom's class names, top first."""
        return [type(part).__name__ for part in (*self.layers, self.bottom)]

    def __repr__(self) -> str:
        return f"<Stack {' -> '.join(self.names())}>"
