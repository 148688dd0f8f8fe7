"""The pre-step listener chain.

Every proposed step (turn 1 step 1, every later step, every retry of a rejected one)
goes through the chain before its request is derived. A listener is
``fn(proposal, downstream) -> Decision``: it may act before or after calling
``downstream(proposal)`` (the rest of the chain) and may reject. The plan-mode listener
is placed first and appends its pending choice only after the rest accepted (PM-10).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs


@attrs.frozen
class StepProposal:
    turn: int
    step: int  # the number the step gets if accepted
    attempt: int  # 1 for the first proposal, then +1 for each retry after a rejection


@attrs.frozen
class Decision:
    accepted: bool
    reason: str | None = None

    @classmethod
    def accept(cls) -> "Decision":
        return cls(True)

    @classmethod
    def reject(cls, reason: str) -> "Decision":
        return cls(False, reason)


Downstream = Callable[[StepProposal], Decision]
PreStepListener = Callable[[StepProposal, Downstream], Decision]


class PreStepChain:
    def __init__(self) -> None:
        self._listeners: list[PreStepListener] = []

    def add(self, listener: PreStepListener, *, first: bool = False) -> Callable[[], None]:
        if first:
            self._listeners.insert(0, listener)
        else:
            self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def run(self, proposal: StepProposal) -> Decision:
        listeners = list(self._listeners)

        def call(index: int, p: StepProposal) -> Decision:
            if index == len(listeners):
                return Decision.accept()
            return listeners[index](p, lambda q: call(index + 1, q))

        return call(0, proposal)
