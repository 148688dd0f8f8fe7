"""Layer 4: the agent loop (turns, steps, pre-step chain, prompt sections, tools,
commands, user-questions seam) and the Workspace that owns agents."""

from dshd.agent.commands import Command, CommandRegistry
from dshd.agent.config import Config, parse_config
from dshd.agent.config_layers import LoadedConfig, load_config, load_layers, user_config_path
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
    "LoadedConfig",
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
    "load_layers",
    "new_session_id",
    "parse_config",
    "user_config_path",
]
