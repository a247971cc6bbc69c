"""The model client layer: `Chat` (a conversation with one model), its tools, one constructor
per provider, and `call_model`, the one path every model request takes: a stack of layers
(`layers/`), built once per run."""
