from enum import StrEnum


class CrewDiffStepsItemChange(StrEnum):
    ADDED = "added"
    CHANGED = "changed"
    REKINDED = "rekinded"
    REMOVED = "removed"
    RENAMED = "renamed"
    SAME = "same"

    def __str__(self) -> str:
        return str(self.value)
