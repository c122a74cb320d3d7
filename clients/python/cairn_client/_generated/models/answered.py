from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.wait_kind import WaitKind
from ..models.wait_status import WaitStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.answer_approve import AnswerApprove
    from ..models.answer_edit import AnswerEdit
    from ..models.answer_reject import AnswerReject
    from ..models.answer_value import AnswerValue
    from ..models.child_of import ChildOf
    from ..models.on_deadline_default import OnDeadlineDefault
    from ..models.on_deadline_fail import OnDeadlineFail
    from ..models.run import Run


T = TypeVar("T", bound="Answered")


@_attrs_define
class Answered:
    """A `Wait` plus `run`: the run as the answer left it (usually `queued`, then the server's runner carries it on;
    `succeeded` after an approved review of the last step; `failed` after a rejected approval).

        Attributes:
            id (UUID):
            run_id (UUID):
            step_idx (int):
            attempt (int): The step attempt the wait belongs to.
            kind (WaitKind): `review`: a step's output waits to be approved, edited or rejected; `approval`: a step waits to
                be allowed to run; `question`: a step asked a question.
            status (WaitStatus):
            prompt (Any): What the person is asked about: a review's output under review; `{idx, role, attempt}` for an
                approval; `{question}` for a question.
            created_at (datetime.datetime):
            run (Run): A run row, as `cairn runs list --json` prints it. Fields are only ever added.
            question_id (None | str | Unset): A question's id (the step's `ask` key).
            deadline (datetime.datetime | None | Unset):
            on_deadline (None | OnDeadlineDefault | OnDeadlineFail | Unset):
            answer (AnswerApprove | AnswerEdit | AnswerReject | AnswerValue | None | Unset):
            answered_by (None | str | Unset): Who answered; `deadline` for a deadline's default answer.
            answered_at (datetime.datetime | None | Unset):
            parents (list[ChildOf] | Unset): When the wait's run is a child run: where it hangs, nearest parent first, up to
                the top-level run (absent otherwise).
    """

    id: UUID
    run_id: UUID
    step_idx: int
    attempt: int
    kind: WaitKind
    status: WaitStatus
    prompt: Any
    created_at: datetime.datetime
    run: Run
    question_id: None | str | Unset = UNSET
    deadline: datetime.datetime | None | Unset = UNSET
    on_deadline: None | OnDeadlineDefault | OnDeadlineFail | Unset = UNSET
    answer: AnswerApprove | AnswerEdit | AnswerReject | AnswerValue | None | Unset = (
        UNSET
    )
    answered_by: None | str | Unset = UNSET
    answered_at: datetime.datetime | None | Unset = UNSET
    parents: list[ChildOf] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.answer_approve import AnswerApprove
        from ..models.answer_edit import AnswerEdit
        from ..models.answer_reject import AnswerReject
        from ..models.answer_value import AnswerValue
        from ..models.on_deadline_default import OnDeadlineDefault
        from ..models.on_deadline_fail import OnDeadlineFail

        id = str(self.id)

        run_id = str(self.run_id)

        step_idx = self.step_idx

        attempt = self.attempt

        kind = self.kind.value

        status = self.status.value

        prompt = self.prompt

        created_at = self.created_at.isoformat()

        run = self.run.to_dict()

        question_id: None | str | Unset
        if isinstance(self.question_id, Unset):
            question_id = UNSET
        else:
            question_id = self.question_id

        deadline: None | str | Unset
        if isinstance(self.deadline, Unset):
            deadline = UNSET
        elif isinstance(self.deadline, datetime.datetime):
            deadline = self.deadline.isoformat()
        else:
            deadline = self.deadline

        on_deadline: dict[str, Any] | None | Unset
        if isinstance(self.on_deadline, Unset):
            on_deadline = UNSET
        elif isinstance(self.on_deadline, OnDeadlineFail) or isinstance(
            self.on_deadline, OnDeadlineDefault
        ):
            on_deadline = self.on_deadline.to_dict()
        else:
            on_deadline = self.on_deadline

        answer: dict[str, Any] | None | Unset
        if isinstance(self.answer, Unset):
            answer = UNSET
        elif (
            isinstance(self.answer, AnswerApprove)
            or isinstance(self.answer, AnswerEdit)
            or isinstance(self.answer, AnswerReject)
            or isinstance(self.answer, AnswerValue)
        ):
            answer = self.answer.to_dict()
        else:
            answer = self.answer

        answered_by: None | str | Unset
        if isinstance(self.answered_by, Unset):
            answered_by = UNSET
        else:
            answered_by = self.answered_by

        answered_at: None | str | Unset
        if isinstance(self.answered_at, Unset):
            answered_at = UNSET
        elif isinstance(self.answered_at, datetime.datetime):
            answered_at = self.answered_at.isoformat()
        else:
            answered_at = self.answered_at

        parents: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.parents, Unset):
            parents = []
            for parents_item_data in self.parents:
                parents_item = parents_item_data.to_dict()
                parents.append(parents_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "run_id": run_id,
                "step_idx": step_idx,
                "attempt": attempt,
                "kind": kind,
                "status": status,
                "prompt": prompt,
                "created_at": created_at,
                "run": run,
            }
        )
        if question_id is not UNSET:
            field_dict["question_id"] = question_id
        if deadline is not UNSET:
            field_dict["deadline"] = deadline
        if on_deadline is not UNSET:
            field_dict["on_deadline"] = on_deadline
        if answer is not UNSET:
            field_dict["answer"] = answer
        if answered_by is not UNSET:
            field_dict["answered_by"] = answered_by
        if answered_at is not UNSET:
            field_dict["answered_at"] = answered_at
        if parents is not UNSET:
            field_dict["parents"] = parents

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.answer_approve import AnswerApprove
        from ..models.answer_edit import AnswerEdit
        from ..models.answer_reject import AnswerReject
        from ..models.answer_value import AnswerValue
        from ..models.child_of import ChildOf
        from ..models.on_deadline_default import OnDeadlineDefault
        from ..models.on_deadline_fail import OnDeadlineFail
        from ..models.run import Run

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        run_id = UUID(d.pop("run_id"))

        step_idx = d.pop("step_idx")

        attempt = d.pop("attempt")

        kind = WaitKind(d.pop("kind"))

        status = WaitStatus(d.pop("status"))

        prompt = d.pop("prompt")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        run = Run.from_dict(d.pop("run"))

        def _parse_question_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        question_id = _parse_question_id(d.pop("question_id", UNSET))

        def _parse_deadline(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                componentsschemas_nullable_time_type_0 = (
                    datetime.datetime.fromisoformat(data)
                )

                return componentsschemas_nullable_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deadline = _parse_deadline(d.pop("deadline", UNSET))

        def _parse_on_deadline(
            data: object,
        ) -> None | OnDeadlineDefault | OnDeadlineFail | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_on_deadline_type_0 = OnDeadlineFail.from_dict(data)

                return componentsschemas_on_deadline_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_on_deadline_type_1 = OnDeadlineDefault.from_dict(data)

                return componentsschemas_on_deadline_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OnDeadlineDefault | OnDeadlineFail | Unset, data)

        on_deadline = _parse_on_deadline(d.pop("on_deadline", UNSET))

        def _parse_answer(
            data: object,
        ) -> AnswerApprove | AnswerEdit | AnswerReject | AnswerValue | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_answer_type_0 = AnswerApprove.from_dict(data)

                return componentsschemas_answer_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_answer_type_1 = AnswerEdit.from_dict(data)

                return componentsschemas_answer_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_answer_type_2 = AnswerReject.from_dict(data)

                return componentsschemas_answer_type_2
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_answer_type_3 = AnswerValue.from_dict(data)

                return componentsschemas_answer_type_3
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(
                AnswerApprove | AnswerEdit | AnswerReject | AnswerValue | None | Unset,
                data,
            )

        answer = _parse_answer(d.pop("answer", UNSET))

        def _parse_answered_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        answered_by = _parse_answered_by(d.pop("answered_by", UNSET))

        def _parse_answered_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                componentsschemas_nullable_time_type_0 = (
                    datetime.datetime.fromisoformat(data)
                )

                return componentsschemas_nullable_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        answered_at = _parse_answered_at(d.pop("answered_at", UNSET))

        _parents = d.pop("parents", UNSET)
        parents: list[ChildOf] | Unset = UNSET
        if _parents is not UNSET:
            parents = []
            for parents_item_data in _parents:
                parents_item = ChildOf.from_dict(parents_item_data)

                parents.append(parents_item)

        answered = cls(
            id=id,
            run_id=run_id,
            step_idx=step_idx,
            attempt=attempt,
            kind=kind,
            status=status,
            prompt=prompt,
            created_at=created_at,
            run=run,
            question_id=question_id,
            deadline=deadline,
            on_deadline=on_deadline,
            answer=answer,
            answered_by=answered_by,
            answered_at=answered_at,
            parents=parents,
        )

        answered.additional_properties = d
        return answered

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
