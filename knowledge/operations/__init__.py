"""The knowledge operations, declared once for REST, MCP, the client and the audit (agents.operations).

`agents.py`: what working agents call (seed 003: search, save, get, feedback, list, slim, edit).
`bulk.py`: many new items in one call, each checked on its own.
`curators.py`: what the curation UI does, for people with the curator role and curator tokens
(restore a version, archive, unmerge, review merge proposals, roll back an evolve job).
`conflicts.py`: the conflict review (list, get, resolve, reopen) and supersede.
"""
from knowledge.operations import agents, bulk, conflicts, curators  # noqa: F401 - importing declares them
