"""Real providers' wire formats, offline: an OpenAI model solves, a Claude model judges.

The local mock server (`vitals_engine.testing.MockServer`) speaks OpenAI's,
Anthropic's and Gemini's APIs on 127.0.0.1, so this runs without keys or
internet. Point `base_url` at a real server (or drop it) to do the same for
real.
"""

import vitals_engine as ve
from vitals_engine.testing import MockServer

ve.set_price("OpenAI", "gpt-demo", input=0.4, output=1.6)
ve.set_price("Anthropic", "claude-demo", input=3.0, output=15.0)

with MockServer(latency=0.02) as server:
    solver = ve.chat_openai("gpt-demo", base_url=server.base_url("openai"), api_key="demo")
    judge = ve.chat_anthropic("claude-demo", base_url=server.base_url("anthropic"), api_key="demo")
    task = ve.Task(
        dataset=[{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(20)],
        solver=ve.generate(solver),
        scorer=ve.model_graded_qa(scorer_chat=judge),
        name="providers-demo",
    )
    # A few 429s on the way: the engine waits the Retry-After and retries.
    server.fail("429", times=3, retry_after=0.2)
    task.eval(max_concurrency=8, rate_limits=ve.RateLimits(rpm=6000))
    print(ve.summary(task))
