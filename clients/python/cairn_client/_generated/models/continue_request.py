from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.budget import Budget


T = TypeVar("T", bound="ContinueRequest")


@_attrs_define
class ContinueRequest:
    """Who acts and why, recorded on the action's event, and a raise of the run's budget made in the same transaction.
    Optional, as is every field.

        Example:
            {'by': 'ops@example.com', 'reason': 'the tree needs more room', 'raise': {'tokens': 4000}}

        Attributes:
            by (None | str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's
                principal (`api` for a token of `CAIRN_API_TOKENS`), never this.
            reason (None | str | Unset): Why.
            raise_ (Budget | None | Unset): Added to each limit of the run's budget before the continue, in the same
                transaction (as `POST /v1/runs/{id}/budget`); a refused continue writes no raise. `cairn runs continue RUN
                --budget tokens=+N` with `--server` sends it.
    """

    by: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET
    raise_: Budget | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.budget import Budget

        by: None | str | Unset
        if isinstance(self.by, Unset):
            by = UNSET
        else:
            by = self.by

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        raise_: dict[str, Any] | None | Unset
        if isinstance(self.raise_, Unset):
            raise_ = UNSET
        elif isinstance(self.raise_, Budget):
            raise_ = self.raise_.to_dict()
        else:
            raise_ = self.raise_

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if by is not UNSET:
            field_dict["by"] = by
        if reason is not UNSET:
            field_dict["reason"] = reason
        if raise_ is not UNSET:
            field_dict["raise"] = raise_

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.budget import Budget

        d = dict(src_dict)

        def _parse_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        by = _parse_by(d.pop("by", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_raise_(data: object) -> Budget | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                raise_type_0 = Budget.from_dict(data)

                return raise_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Budget | None | Unset, data)

        raise_ = _parse_raise_(d.pop("raise", UNSET))

        continue_request = cls(
            by=by,
            reason=reason,
            raise_=raise_,
        )

        return continue_request
