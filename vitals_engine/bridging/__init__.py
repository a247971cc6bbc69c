"""The bridge: an HTTP server of the engine's that speaks the model APIs agents are
built on (Anthropic's Messages, OpenAI's Chat Completions and Responses) and serves each
call through the run's call pipeline, so an agent harness's model calls are the eval's."""
