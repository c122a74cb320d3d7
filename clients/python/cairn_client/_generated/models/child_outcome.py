from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.run_status import RunStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.error_info import ErrorInfo


T = TypeVar("T", bound="ChildOutcome")


@_attrs_define
class ChildOutcome:
    """One child as its parent sees it: the element of a `children` step's output, and of `children` in a run view.

    Attributes:
        key (str):
        run_id (UUID):
        status (RunStatus):
        tokens (int): Input and output tokens of every step of the child.
        output (Any | Unset): The child's final output (its last step's), once it succeeded.
        error (ErrorInfo | Unset):
    """

    key: str
    run_id: UUID
    status: RunStatus
    tokens: int
    output: Any | Unset = UNSET
    error: ErrorInfo | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        run_id = str(self.run_id)

        status = self.status.value

        tokens = self.tokens

        output = self.output

        error: dict[str, Any] | Unset = UNSET
        if not isinstance(self.error, Unset):
            error = self.error.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "key": key,
                "run_id": run_id,
                "status": status,
                "tokens": tokens,
            }
        )
        if output is not UNSET:
            field_dict["output"] = output
        if error is not UNSET:
            field_dict["error"] = error

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.error_info import ErrorInfo

        d = dict(src_dict)
        key = d.pop("key")

        run_id = UUID(d.pop("run_id"))

        status = RunStatus(d.pop("status"))

        tokens = d.pop("tokens")

        output = d.pop("output", UNSET)

        _error = d.pop("error", UNSET)
        error: ErrorInfo | Unset
        if isinstance(_error, Unset):
            error = UNSET
        else:
            error = ErrorInfo.from_dict(_error)

        child_outcome = cls(
            key=key,
            run_id=run_id,
            status=status,
            tokens=tokens,
            output=output,
            error=error,
        )

        child_outcome.additional_properties = d
        return child_outcome

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
