"""The words every layer speaks: turns and their contents, token usage, the request and
record of a model call, a retry's note, a provider batch's record, text fit to log."""
