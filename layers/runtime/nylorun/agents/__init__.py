"""The Agents `make run` serves: `echo`, `tck` (the A2A TCK's scenarios) and `support` (every profile feature)."""

from nylorun.agents.echo import agent as echo
from nylorun.agents.support import agent as support
from nylorun.agents.tck import agent as tck
from nylorun.engine.agent import Agent

BUILT_IN: list[Agent] = [echo, tck, support]
