"""The Host's question rules on their own (D-5): clients here are small objects that
answer as told; the Host is the real one. The same rules over real connections:
tests/daemon/test_shared_host.py and tests/e2e/test_shared_session.py."""

from __future__ import annotations

import asyncio

import pytest

from dshd.agent.approvals import ApprovalAnswer, ApprovalRequest, ApprovalsUnavailable
from dshd.agent.features import Features
from dshd.agent.questions import QuestionsUnavailable
from dshd.api.host import Host


class Agent:
    def __init__(self) -> None:
        self.agent_id, self.session_id, self.closed = "a-1", "s-1", False
        self.features = Features()
        self.closers: list = []
        self.delta_listeners: list = []
        self.event_listeners: list = []

    def on_close(self, fn) -> None:
        self.closers.append(fn)

    def add_delta_listener(self, fn):
        self.delta_listeners.append(fn)

    def add_event_listener(self, fn):
        self.event_listeners.append(fn)


class Client:
    def __init__(self, name: str, answer=None, *, able: bool = True) -> None:
        self.name, self._answer, self.able = name, answer, able
        self.asked = 0
        self.resolved: list = []
        self.too_late: list = []
        self.lists: list = []
        self.withdrawn = 0

    def can_answer(self, kind: str) -> bool:
        return self.able

    async def _ask(self):
        self.asked += 1
        try:
            answer = self._answer
            if isinstance(answer, asyncio.Future):
                return await answer
            if isinstance(answer, Exception):
                raise answer
            return answer
        except asyncio.CancelledError:
            self.withdrawn += 1
            raise

    async def ask_questions(self, agent, questions):
        return await self._ask()

    async def ask_approval(self, request):
        return await self._ask()

    def follow(self, agent, running) -> None:
        self.running = running
    def unfollow(self, agent) -> None: ...

    def clients_changed(self, agent, clients) -> None:
        self.lists.append([(c.client_name, c.you) for c in clients])

    def question_resolved(self, resolution) -> None:
        self.resolved.append(resolution)

    def answer_too_late(self, resolution) -> None:
        self.too_late.append(resolution)


def review(choice: str, qid: str = "plan-review-c1") -> list[dict]:
    return [{"id": qid, "choice": choice}]


QUESTION = [{"id": "plan-review-c1", "kind": "plan-review", "title": "Plan", "plan": "# Plan", "choices": ["approve", "revise"]}]


def attach(host: Host, agent: Agent, *clients: Client) -> None:
    for client in clients:
        host.connect(client)
        client.client_name = client.name
        host.attach(client, agent)


async def test_an_invalid_answer_wins_nothing_and_a_valid_one_later_does():
    host, agent = Host(), Agent()
    slow = asyncio.get_running_loop().create_future()
    garbled = Client("garbled", [{"id": "plan-review-c1", "choice": "maybe"}])
    good = Client("good", slow)
    attach(host, agent, garbled, good)
    asking = asyncio.ensure_future(host.questions.ask(agent, QUESTION))
    await asyncio.sleep(0.01)
    assert not asking.done()  # the garbled answer came first and won nothing
    slow.set_result(review("revise"))
    assert await asking == review("revise")
    assert [(r.outcome, r.by_client_name) for r in garbled.resolved] == [("revise", "good")]


async def test_only_invalid_answers_give_the_last_one_to_the_seam_and_resolve_nothing():
    host, agent = Host(), Agent()
    a, b = Client("a", [{"id": "other", "choice": "approve"}]), Client("b", "not a list")
    attach(host, agent, a, b)
    assert await host.questions.ask(agent, QUESTION) in ([{"id": "other", "choice": "approve"}], "not a list")
    assert a.resolved == b.resolved == []


async def test_a_failing_ask_leaves_the_question_to_the_others():
    host, agent = Host(), Agent()
    broken = Client("broken", QuestionsUnavailable("the editor went away"))
    good = Client("good", review("approve"))
    attach(host, agent, broken, good)
    assert await host.questions.ask(agent, QUESTION) == review("approve")
    assert [r.by_client_name for r in broken.resolved] == ["good"]


async def test_every_ask_failing_fails_closed_with_the_last_reason():
    host, agent = Host(), Agent()
    attach(host, agent, Client("a", QuestionsUnavailable("no answer within 1 s")))
    with pytest.raises(QuestionsUnavailable, match="no answer within 1 s"):
        await host.questions.ask(agent, QUESTION)


async def test_nobody_able_and_nobody_attached_fail_closed_at_once_without_asking():
    host, agent = Host(), Agent()
    request = ApprovalRequest(agent_id="a-1", session_id="s-1", call_id="c1", tool="edit_file", mutability="write", title="Edit")
    with pytest.raises(ApprovalsUnavailable, match="no client is attached"):  # nobody ever attached
        await host.approvals.ask(request)
    mute = Client("mute", ApprovalAnswer("allow-once"), able=False)
    attach(host, agent, mute)
    with pytest.raises(ApprovalsUnavailable, match="cannot answer approvals"):
        await host.approvals.ask(request)
    assert mute.asked == 0
    able = Client("able", ApprovalAnswer("allow-session"))  # control: an able one is asked
    attach(host, agent, able)
    assert (await host.approvals.ask(request)).outcome == "allow-session"
    assert able.asked == 1 and mute.asked == 0
    host.detach(able, agent)
    host.detach(mute, agent)
    with pytest.raises(ApprovalsUnavailable, match="the last one left"):
        await host.approvals.ask(request)


async def test_the_loser_is_withdrawn_after_the_news_and_the_winner_is_not():
    host, agent = Host(), Agent()
    never = asyncio.get_running_loop().create_future()
    winner, loser = Client("winner", review("approve")), Client("loser", never)
    attach(host, agent, winner, loser)
    await host.questions.ask(agent, QUESTION)
    await asyncio.sleep(0)
    assert loser.withdrawn == 1 and winner.withdrawn == 0
    assert len(loser.resolved) == len(winner.resolved) == 1


async def test_cancelling_the_ask_withdraws_every_open_one_and_resolves_nothing():
    host, agent = Host(), Agent()
    a = Client("a", asyncio.get_running_loop().create_future())
    b = Client("b", asyncio.get_running_loop().create_future())
    attach(host, agent, a, b)
    asking = asyncio.ensure_future(host.questions.ask(agent, QUESTION))
    await asyncio.sleep(0.01)
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    await asyncio.sleep(0)
    assert (a.withdrawn, b.withdrawn) == (1, 1)
    assert a.resolved == b.resolved == []
    assert host.open_questions(agent) == []


def test_client_lists_mark_the_receiver_and_follow_leaving():
    host, agent = Host(), Agent()
    a, b = Client("a"), Client("b")
    attach(host, agent, a, b)
    assert b.lists[-1] == [("a", False), ("b", True)] and a.lists[-1] == [("a", True), ("b", False)]
    host.disconnect(b)
    assert a.lists[-1] == [("a", True)]
    emptied = []
    host.on_empty = lambda: emptied.append(True)
    host.disconnect(a)
    assert emptied == [True]


def test_a_client_attaching_mid_turn_gets_the_deltas_streamed_so_far():
    from dshd.agent.deltas import AgentDelta
    from dshd.folds.events import TurnClose

    host, agent = Host(), Agent()
    first = Client("first")
    attach(host, agent, first)
    assert first.running == []
    pieces = [AgentDelta(1, 1, "text", text="Hello, "), AgentDelta(1, 1, "text", text="world")]
    for delta in pieces:
        for fn in agent.delta_listeners:
            fn(delta)
    late = Client("late")
    attach(host, agent, late)
    assert late.running == pieces  # the reply from its start
    for fn in agent.event_listeners:
        fn(TurnClose(seq=9, at="2026-12-01T00:00:00.000Z", turn=1, data={"turn": 1, "stopReason": "end-turn"}))
    later = Client("later")
    attach(host, agent, later)
    assert later.running == []  # the turn ended: its deltas are in the log now


async def test_headless_rules_come_from_the_declared_capability_never_from_the_name():
    request = ApprovalRequest(agent_id="a-1", session_id="s-1", call_id="c1", tool="edit_file", mutability="write", title="Edit")
    # Positive control: a client that declared itself a headless run gets the headless words.
    host, agent = Host(), Agent()
    run = Client("anything at all", able=False)
    attach(host, agent, run)
    run.headless = True  # what the door sets from capabilities.experimental.dsh.headless
    with pytest.raises(ApprovalsUnavailable, match=r"a headless run \(dshd run\) approves nothing on its own"):
        await host.approvals.ask(request)
    with pytest.raises(QuestionsUnavailable, match=r"a headless run \(dshd run\) approves nothing on its own"):
        await host.questions.ask(agent, QUESTION)
    # The name alone gives nothing: a client calling itself "dshd run" without the
    # capability is an editor that cannot answer (Host.connect left headless False).
    host, agent = Host(), Agent()
    named = Client("dshd run", able=False)
    attach(host, agent, named)
    assert named.headless is False
    with pytest.raises(ApprovalsUnavailable, match="your editor cannot answer approvals") as refused:
        await host.approvals.ask(request)
    assert "headless" not in str(refused.value)
    # A headless run beside an editor that cannot answer either: not headless-only.
    host, agent = Host(), Agent()
    run, mute = Client("run", able=False), Client("mute", able=False)
    attach(host, agent, run, mute)
    run.headless = True
    with pytest.raises(ApprovalsUnavailable, match="your editor cannot answer approvals"):
        await host.approvals.ask(request)
