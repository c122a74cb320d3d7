from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.cron_spec import CronSpec


T = TypeVar("T", bound="CadenceCron")


@_attrs_define
class CadenceCron:
    """
    Attributes:
        cron (CronSpec):
    """

    cron: CronSpec

    def to_dict(self) -> dict[str, Any]:
        cron = self.cron.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cron": cron,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.cron_spec import CronSpec

        d = dict(src_dict)
        cron = CronSpec.from_dict(d.pop("cron"))

        cadence_cron = cls(
            cron=cron,
        )

        return cadence_cron
