"""Layer 4: the agent loop (turns, steps, pre-step chain, prompt sections, tools,
commands, user-questions seam) and the Workspace that owns agents."""

from dshd.agent.commands import Command, CommandRegistry
from dshd.agent.config import Config, load_config, parse_config
from dshd.agent.loop import Agent
from dshd.agent.prompt import PromptContext, Section
from dshd.agent.questions import InProcessAnswerer, NoQuestions, QuestionsUnavailable, UserQuestions
from dshd.agent.steps import Decision, StepProposal
from dshd.agent.tools import Tool, ToolContext, ToolOutcome
from dshd.agent.workspace import Workspace, is_session_id, new_session_id

__all__ = [
    "Agent",
    "Command",
    "CommandRegistry",
    "Config",
    "Decision",
    "InProcessAnswerer",
    "NoQuestions",
    "PromptContext",
    "QuestionsUnavailable",
    "Section",
    "StepProposal",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "UserQuestions",
    "Workspace",
    "is_session_id",
    "load_config",
    "new_session_id",
    "parse_config",
]
