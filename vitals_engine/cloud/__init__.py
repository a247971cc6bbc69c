"""Credentials of the cloud platforms that run models (Amazon Bedrock, Azure OpenAI, Vertex
AI): each platform's credential chain, through the well-kept library that knows it (an
extra, imported only when that platform is used), and tokens refreshed before they expire.

The requests themselves never go through those libraries: a provider asks here for what
authenticates one attempt (a signature, a bearer token) and sends it through our transport.
"""
