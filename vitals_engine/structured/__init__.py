"""Structured output: the JSON schema of what a user asks for, the check of a reply
against it (`schemas.py`), and a value that fits a schema, for mock models
(`examples.py`)."""
