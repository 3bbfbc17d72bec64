"""Talking to models: the OpenAI-compatible client path and the loopback model server.

`client` sends a rollout's model requests (sampling arguments, retries, context
overflow), `messages` converts between server responses and plain message dicts, and
`server` is a real OpenAI-compatible HTTP server that serves Python policies, for
tests, benchmarks and rehearsals. Nothing is imported here; import the modules.
"""
