"""The `Evidence` questions of rule 4.9–4.10 answered by indexed queries on the session log, so
an attempt costs the same whether the log holds a thousand events or a hundred thousand."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet

from governor.domain.checks import WORKSPACE_WRITE, VerificationRecord, verification_record
from governor.models import Event, Session, SessionState
from verification.models import VerificationRun

CODE_VERIFICATION = "reliability/code-verification"


class DatabaseEvidence:
    def __init__(self, session: Session, state: SessionState) -> None:
        self.session = session
        self.state = state
        self.events = Event.objects.filter(session=session)

    def _calls(self, tool: str, after_seq: int) -> QuerySet[Event]:
        return self.events.filter(type="tool/call", tool_name=tool, seq__gt=after_seq)

    def tool_success_count(
        self, tool: str, after_seq: int, arguments_contain: str | None, limit: int
    ) -> int:
        # A result answers the latest earlier call with its id: no call with the same id
        # may stand between them.
        later_call = self.events.filter(type="tool/call", call_id=OuterRef("call_id"),
                                        seq__gt=OuterRef(OuterRef("seq")),
                                        seq__lt=OuterRef("seq"))
        answered_ok = self.events.filter(
            type="tool/result", call_id=OuterRef("call_id"), seq__gt=OuterRef("seq"),
            is_error=False,
        ).filter(~Exists(later_call))
        calls = self._calls(tool, after_seq).filter(Exists(answered_ok)).order_by("seq")
        if arguments_contain is None:
            return calls[:limit].count()
        # Case-sensitive substring on the raw arguments text, in Python: the same test on every
        # database (SQLite's LIKE ignores case), over this tool's answered calls only, and only
        # until enough are found.
        count = 0
        for data in calls.values_list("data", flat=True).iterator(chunk_size=100):
            arguments = data.get("arguments")
            if isinstance(arguments, str) and arguments_contain in arguments:
                count += 1
                if count >= limit:
                    break
        return count

    def tool_call_count(self, tool: str, after_seq: int) -> int:
        return self._calls(tool, after_seq).count()

    def first_tool_error(self, after_seq: int) -> tuple[int, str | None] | None:
        # `is_error__in=[True]`, not `is_error=True`: SQLite only uses the (session, is_error,
        # seq) index for the former (Django writes the latter as a bare column test).
        error = (self.events.filter(type="tool/result", is_error__in=[True], seq__gt=after_seq)
                 .order_by("seq").values_list("seq", "call_id").first())
        if error is None:
            return None
        seq, call_id = error
        name = (self.events.filter(type="tool/call", call_id=call_id, seq__lt=seq)
                .order_by("-seq").values_list("tool_name", flat=True).first())
        return seq, name

    def mutation_boundary(self, after_seq: int, profile: str) -> int:
        boundary = max(after_seq, self.state.last_mutation_seq)
        for record in self._verifications(after_seq):
            if (record.profile != profile and record.sandbox_mode == WORKSPACE_WRITE
                    and not record.baseline):
                boundary = max(boundary, record.seq)
        return boundary

    def verifications_after(self, profile: str, after_seq: int) -> list[VerificationRecord]:
        return [r for r in self._verifications(after_seq) if r.profile == profile]

    def test_outcomes(self, verification_id: str) -> dict[str, str] | None:
        tests = (VerificationRun.objects.filter(pk=verification_id, session=self.session)
                 .values_list("tests", flat=True).first())
        return {test: outcome for test, outcome in tests} if tests is not None else None

    def _verifications(self, after_seq: int) -> list[VerificationRecord]:
        rows = self.events.filter(type=CODE_VERIFICATION, seq__gt=after_seq)
        return [verification_record(seq, data)
                for seq, data in rows.order_by("seq").values_list("seq", "data")]
