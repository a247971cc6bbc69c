"""A cache of model replies on disk: `Cache` options, the key of a call, and the store."""
