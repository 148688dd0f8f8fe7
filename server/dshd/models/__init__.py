"""Layer 4: model adapters behind one streaming interface (:mod:`.interface`), the reply
assembler (:mod:`.collect`), the scripted model, the real providers and their converters,
retries, and the registry that picks one from the config.

Only the interface is re-exported here; provider modules (and their SDKs) are imported
by :func:`dshd.models.registry.model_from_config` when a config names them.
"""

from dshd.models.collect import ReplyAssembler, collect
from dshd.models.interface import (
    ERROR_KINDS,
    Message,
    ModelAdapter,
    ModelError,
    ModelEvent,
    ModelReply,
    ModelRequest,
    Retrying,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallRequest,
    ToolCallStart,
    ToolSpec,
    Usage,
)

__all__ = [
    "ERROR_KINDS",
    "Message",
    "ModelAdapter",
    "ModelError",
    "ModelEvent",
    "ModelReply",
    "ModelRequest",
    "ReplyAssembler",
    "Retrying",
    "Stop",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallRequest",
    "ToolCallStart",
    "ToolSpec",
    "Usage",
    "collect",
]
