from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.every import Every


T = TypeVar("T", bound="CadenceEvery")


@_attrs_define
class CadenceEvery:
    """
    Attributes:
        every (Every):
    """

    every: Every

    def to_dict(self) -> dict[str, Any]:
        every = self.every.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "every": every,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.every import Every

        d = dict(src_dict)
        every = Every.from_dict(d.pop("every"))

        cadence_every = cls(
            every=every,
        )

        return cadence_every
