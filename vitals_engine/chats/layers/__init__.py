"""The layers a model call passes, one job each, in the order a call meets them:

```
call_model
  -> Traced          (a traced run only) the call's span, its retries as events, its metrics
  -> SampleLimitCheck  (limits per sample) a solver call counted against them: messages,
                     tokens, dollars; a sample past one stops here, the call in flight too
  -> ReplyCache      a hit answers here: cost 0, recorded as read; a miss's reply is kept
  -> Accounting      the price of the reply, the call's record, the run's and sample's ledgers
  -> ReplyJournal    each reply to the run's journal as it arrives; a resumed run's
                     journaled replies answer their calls (paid for: not sent again)
  -> BudgetCheck     each call holds its room in the run's budget before it is sent
  -> ResumedBatches  a resumed run's batches answer the calls they hold
  -> SeatCount       the sample's calls in progress (a waiting sample lends its seat)
  -> Retries         attempts, backoff honouring Retry-After, the notes of retries
  -> EndpointLimits  per attempt: the endpoint's pause, rpm/tpm buckets, a concurrency slot
  -> ProviderSend    the provider's request, within the attempt's timeout
     (a model in batch mode: Retries -> BatchQueue, instead of ResumedBatches,
      EndpointLimits and ProviderSend: no live request)
```

Each is present only when the run uses what it does: a feature that is off has no
layer. `call.py` says what a call is (`Call`, and which layer writes each of its
fields), what a layer is (`Layer`: `await layer(call, send)`, `send` being the rest
of the stack) and chains layers into a `Stack`; `stacks.py` builds a run's stacks from
its options, once. Each other module is one layer and knows no other (an import
contract says so). A new call-level capability is one new module here and one line in
`stacks.py`, as tracing is (`traced.py`). This drawing is the one the architecture page
shows, and a test checks it against the stacks `stacks.py` builds.
"""
