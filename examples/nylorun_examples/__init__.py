"""Example Agents, not part of the Runtime: `echo`, `tck` (the A2A TCK's scenarios), `support` (every
profile feature), `orders` (a table component) and `refunds` (delegates to `support`); and
`assistant` (nylorun.models, a model-backed Agent), not in AGENTS: it needs a model, so it is served only where one is configured (`nylorun serve --model scripted` names
`nylorun_examples.assistant:agent`).

They are served only when named: `nylorun serve` names them by default (NYLORUN_AGENTS="nylorun_examples:AGENTS"),
a deployment when its `ExampleAgents` parameter is "true" (which also attaches ExamplesLayer, this package in
/opt/python).
"""

from nylorun.engine.agent import Agent

from nylorun_examples.echo import agent as echo
from nylorun_examples.orders import agent as orders
from nylorun_examples.refunds import agent as refunds
from nylorun_examples.support import agent as support
from nylorun_examples.tck import agent as tck

AGENTS: list[Agent] = [echo, tck, support, orders, refunds]
