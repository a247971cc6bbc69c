"""Constructors of the chats that reach models through a cloud platform's account: Amazon
Bedrock, Azure OpenAI and Vertex AI. Each takes the options every HTTP chat takes
(`ChatOptions`), less the API key where the platform signs or uses tokens, and the
platform's own (region, deployment, project ...)."""

from __future__ import annotations

__all__: list[str] = []


# -- Amazon Bedrock -------------------------------------------------------------------

# (chat_aws_bedrock)


# -- Azure OpenAI ---------------------------------------------------------------------

# (chat_azure_openai)


# -- Vertex AI ------------------------------------------------------------------------

# (chat_google_vertex)
