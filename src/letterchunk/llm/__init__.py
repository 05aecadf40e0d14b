"""Talking to a model: prompts, the instructor-backed client, the answer cache, the rate limiter,
the embedded llama-server and the one function that assembles a ready client (``connect``)."""
