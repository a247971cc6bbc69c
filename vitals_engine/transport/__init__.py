"""How provider requests travel: the transport seam, our HTTP/1.1 client, the aiohttp and
httpx adapters, and the pool of transports a run shares."""
