"""The layers a model call passes, one job each, in the order a call meets them.

```
call_model ─> (a traced run) tracing ─> cache ─> accounting ─> budget
           ─> batches (a resumed run's answers) ─> seats ─> retries ─> limits ─> the provider's send
                     └─> (a model in batch mode) the batch queue, instead of limits and send
```

`call.py` says what a call is (`Call`), what a layer is (`Layer`: `await layer(call,
send)`, `send` being the rest of the stack) and chains layers into a `Stack`;
`stacks.py` builds a run's stacks from its options, once, with no layer for a feature
that is off. Each other module is one layer and knows no other (an import contract
says so). A new call-level capability is one new module here and one line in
`stacks.py`, as tracing is (`traced.py`).
"""
