"""Endpoint picking: which replica of a model takes a request, from what its engine reports.

One job per module, from the bottom: ``engine_state`` (what a replica's ``/metrics`` says, vLLM's
names), ``scraper`` (reads every replica of the routes in use in the background, never on a
request's path), ``prefix`` (the prompt's prefix fingerprint and, per replica, what the gateway has
sent it), ``scorers`` (the saturation filter and the weighted scorers, after llm-d's inference
scheduler), ``bounded_hash`` (KubeAI's ``PrefixHash``: consistent hashing with bounded loads),
``config`` (a model's strategy, weights and adapters, from its row), ``picker`` (the decision
for one request, and its Prometheus counters), ``snapshot`` (each model's replica table, for its
page). docs/gateway.md, "How a replica is picked".
"""
