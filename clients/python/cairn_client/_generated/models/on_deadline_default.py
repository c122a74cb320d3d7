from __future__ import annotations

from collections.abc import Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Self,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.answer_approve import AnswerApprove
    from ..models.answer_edit import AnswerEdit
    from ..models.answer_reject import AnswerReject
    from ..models.answer_value import AnswerValue


T = TypeVar("T", bound="OnDeadlineDefault")


@_attrs_define
class OnDeadlineDefault:
    """`outcome: "default"`. The wait is answered with this answer, by `deadline`.

    Attributes:
        outcome (Literal['default']):
        answer (AnswerApprove | AnswerEdit | AnswerReject | AnswerValue): A person's answer, tagged by `decision`
            (`cairn::Answer`).
    """

    outcome: Literal["default"]
    answer: AnswerApprove | AnswerEdit | AnswerReject | AnswerValue
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.answer_approve import AnswerApprove
        from ..models.answer_edit import AnswerEdit
        from ..models.answer_reject import AnswerReject

        outcome = self.outcome

        answer: dict[str, Any]
        if (
            isinstance(self.answer, AnswerApprove)
            or isinstance(self.answer, AnswerEdit)
            or isinstance(self.answer, AnswerReject)
        ):
            answer = self.answer.to_dict()
        else:
            answer = self.answer.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "outcome": outcome,
                "answer": answer,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.answer_approve import AnswerApprove
        from ..models.answer_edit import AnswerEdit
        from ..models.answer_reject import AnswerReject
        from ..models.answer_value import AnswerValue

        d = dict(src_dict)
        outcome = cast(Literal["default"], d.pop("outcome"))
        if outcome != "default":
            raise ValueError(f"outcome must match const 'default', got '{outcome}'")

        def _parse_answer(
            data: object,
        ) -> AnswerApprove | AnswerEdit | AnswerReject | AnswerValue:
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
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_answer_type_3 = AnswerValue.from_dict(data)

            return componentsschemas_answer_type_3

        answer = _parse_answer(d.pop("answer"))

        on_deadline_default = cls(
            outcome=outcome,
            answer=answer,
        )

        on_deadline_default.additional_properties = d
        return on_deadline_default

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
