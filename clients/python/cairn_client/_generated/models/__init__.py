"""Contains all the data models used in inputs/outputs"""

from .action_request import ActionRequest
from .answer_approve import AnswerApprove
from .answer_approve_request import AnswerApproveRequest
from .answer_edit import AnswerEdit
from .answer_edit_request import AnswerEditRequest
from .answer_reject import AnswerReject
from .answer_reject_request import AnswerRejectRequest
from .answer_value import AnswerValue
from .answer_value_request import AnswerValueRequest
from .answered import Answered
from .approvers import Approvers
from .audit_entry import AuditEntry
from .audit_entry_via import AuditEntryVia
from .backfill_request import BackfillRequest
from .backfill_schedule_response_200 import BackfillScheduleResponse200
from .ballot import Ballot
from .ballot_votes_item import BallotVotesItem
from .blocked import Blocked
from .budget import Budget
from .budget_raise_request import BudgetRaiseRequest
from .cadence_cron import CadenceCron
from .cadence_every import CadenceEvery
from .child_of import ChildOf
from .child_outcome import ChildOutcome
from .compact_request import CompactRequest
from .compacted import Compacted
from .compacted_rules import CompactedRules
from .context_request import ContextRequest
from .context_request_context import ContextRequestContext
from .continue_request import ContinueRequest
from .create_schedule_request import CreateScheduleRequest
from .crew_diff import CrewDiff
from .crew_diff_from import CrewDiffFrom
from .crew_diff_steps_item import CrewDiffStepsItem
from .crew_diff_steps_item_change import CrewDiffStepsItemChange
from .crew_diff_to import CrewDiffTo
from .crew_summary import CrewSummary
from .crew_summary_agents_item import CrewSummaryAgentsItem
from .crew_upgrade_request import CrewUpgradeRequest
from .crew_version import CrewVersion
from .cron_spec import CronSpec
from .delete_schedule_response_200 import DeleteScheduleResponse200
from .error_info import ErrorInfo
from .error_response import ErrorResponse
from .error_response_error import ErrorResponseError
from .error_response_error_open_wait_type_0 import ErrorResponseErrorOpenWaitType0
from .error_response_error_reason import ErrorResponseErrorReason
from .event import Event
from .every import Every
from .fork_request import ForkRequest
from .get_crew_version_response_200 import GetCrewVersionResponse200
from .get_crew_version_response_200_agents_item import (
    GetCrewVersionResponse200AgentsItem,
)
from .get_open_api_response_200 import GetOpenApiResponse200
from .journal_entry import JournalEntry
from .journal_entry_kind import JournalEntryKind
from .journal_list import JournalList
from .key_limits import KeyLimits
from .key_limits_request import KeyLimitsRequest
from .key_pause_request import KeyPauseRequest
from .key_resume_request import KeyResumeRequest
from .key_state import KeyState
from .key_state_limits_from import KeyStateLimitsFrom
from .list_run_values_response_200 import ListRunValuesResponse200
from .list_runs_order import ListRunsOrder
from .list_schedules_response_200 import ListSchedulesResponse200
from .listening import Listening
from .offered_crew import OfferedCrew
from .on_busy import OnBusy
from .on_deadline_default import OnDeadlineDefault
from .on_deadline_fail import OnDeadlineFail
from .principal import Principal
from .principal_issued import PrincipalIssued
from .principal_request import PrincipalRequest
from .principal_request_role import PrincipalRequestRole
from .principal_role import PrincipalRole
from .published import Published
from .retry_request import RetryRequest
from .run import Run
from .run_crew_definition import RunCrewDefinition
from .run_page import RunPage
from .run_signals import RunSignals
from .run_status import RunStatus
from .run_trace import RunTrace
from .run_upgrade import RunUpgrade
from .run_view import RunView
from .run_view_spent import RunViewSpent
from .schedule import Schedule
from .schedule_overlap import ScheduleOverlap
from .schedule_view import ScheduleView
from .sent import Sent
from .signal import Signal
from .signal_request import SignalRequest
from .signal_start import SignalStart
from .slot import Slot
from .slot_outcome import SlotOutcome
from .spent import Spent
from .status import Status
from .step import Step
from .step_status import StepStatus
from .stream_run_events_response_200 import StreamRunEventsResponse200
from .submit_request import SubmitRequest
from .submit_request_upgrade_type_1 import SubmitRequestUpgradeType1
from .submit_request_upgrade_type_2_type_1 import SubmitRequestUpgradeType2Type1
from .submit_request_upgrade_type_3_type_1 import SubmitRequestUpgradeType3Type1
from .thread_budget import ThreadBudget
from .thread_budget_request import ThreadBudgetRequest
from .thread_summary import ThreadSummary
from .thread_view import ThreadView
from .thread_view_totals import ThreadViewTotals
from .upgrade_verdict import UpgradeVerdict
from .wait import Wait
from .wait_kind import WaitKind
from .wait_list import WaitList
from .wait_status import WaitStatus
from .worker import Worker

__all__ = (
    "ActionRequest",
    "AnswerApprove",
    "AnswerApproveRequest",
    "AnswerEdit",
    "AnswerEditRequest",
    "AnswerReject",
    "AnswerRejectRequest",
    "AnswerValue",
    "AnswerValueRequest",
    "Answered",
    "Approvers",
    "AuditEntry",
    "AuditEntryVia",
    "BackfillRequest",
    "BackfillScheduleResponse200",
    "Ballot",
    "BallotVotesItem",
    "Blocked",
    "Budget",
    "BudgetRaiseRequest",
    "CadenceCron",
    "CadenceEvery",
    "ChildOf",
    "ChildOutcome",
    "CompactRequest",
    "Compacted",
    "CompactedRules",
    "ContextRequest",
    "ContextRequestContext",
    "ContinueRequest",
    "CreateScheduleRequest",
    "CrewDiff",
    "CrewDiffFrom",
    "CrewDiffStepsItem",
    "CrewDiffStepsItemChange",
    "CrewDiffTo",
    "CrewSummary",
    "CrewSummaryAgentsItem",
    "CrewUpgradeRequest",
    "CrewVersion",
    "CronSpec",
    "DeleteScheduleResponse200",
    "ErrorInfo",
    "ErrorResponse",
    "ErrorResponseError",
    "ErrorResponseErrorOpenWaitType0",
    "ErrorResponseErrorReason",
    "Event",
    "Every",
    "ForkRequest",
    "GetCrewVersionResponse200",
    "GetCrewVersionResponse200AgentsItem",
    "GetOpenApiResponse200",
    "JournalEntry",
    "JournalEntryKind",
    "JournalList",
    "KeyLimits",
    "KeyLimitsRequest",
    "KeyPauseRequest",
    "KeyResumeRequest",
    "KeyState",
    "KeyStateLimitsFrom",
    "ListRunValuesResponse200",
    "ListRunsOrder",
    "ListSchedulesResponse200",
    "Listening",
    "OfferedCrew",
    "OnBusy",
    "OnDeadlineDefault",
    "OnDeadlineFail",
    "Principal",
    "PrincipalIssued",
    "PrincipalRequest",
    "PrincipalRequestRole",
    "PrincipalRole",
    "Published",
    "RetryRequest",
    "Run",
    "RunCrewDefinition",
    "RunPage",
    "RunSignals",
    "RunStatus",
    "RunTrace",
    "RunUpgrade",
    "RunView",
    "RunViewSpent",
    "Schedule",
    "ScheduleOverlap",
    "ScheduleView",
    "Sent",
    "Signal",
    "SignalRequest",
    "SignalStart",
    "Slot",
    "SlotOutcome",
    "Spent",
    "Status",
    "Step",
    "StepStatus",
    "StreamRunEventsResponse200",
    "SubmitRequest",
    "SubmitRequestUpgradeType1",
    "SubmitRequestUpgradeType2Type1",
    "SubmitRequestUpgradeType3Type1",
    "ThreadBudget",
    "ThreadBudgetRequest",
    "ThreadSummary",
    "ThreadView",
    "ThreadViewTotals",
    "UpgradeVerdict",
    "Wait",
    "WaitKind",
    "WaitList",
    "WaitStatus",
    "Worker",
)
