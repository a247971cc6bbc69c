"""The words every layer speaks: turns and their contents, token usage and its cost, the
request and record of a model call, a retry's note, and structured-output schemas."""
