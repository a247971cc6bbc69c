"""The model client layer: chats, turns, tools, structured output, usage and prices."""
