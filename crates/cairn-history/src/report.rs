//! The checker's verdict: each [`Violation`] with its [`Property`], the few
//! history events that show it, and the seed that reproduces the campaign.
//! Printing only; deciding is the checks' business.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::history::{Event, EventKind, OpType};

/// The properties of issue 51, each checked by one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Property {
    /// The history itself is well formed (one operation at a time per process).
    WellFormed,
    /// Every acknowledged submit is one run; no run appears unasked.
    Submits,
    /// Acknowledged answers and signals are stored; one decision per wait.
    AnswersAndSignals,
    /// One lease holder at a time commits for a run.
    SingleHolder,
    /// Outside effects are bounded by the faults that hit an attempt.
    EffectsPerAttempt,
    /// Reads of a run's events are prefixes and never go backwards.
    MonotoneReads,
    /// After healing, no run is left running under an expired lease.
    NothingStranded,
    /// Every kind of operation succeeded inside every fault window.
    NotVacuous,
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Property::WellFormed => "well-formed history",
            Property::Submits => "submits",
            Property::AnswersAndSignals => "answers and signals",
            Property::SingleHolder => "single holder",
            Property::EffectsPerAttempt => "effects per attempt",
            Property::MonotoneReads => "monotone reads",
            Property::NothingStranded => "nothing stranded",
            Property::NotVacuous => "not vacuous",
        })
    }
}

/// Which rule a violation breaks; each belongs to one [`Property`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ViolationKind {
    /// A process invoked an operation while another of its own was open,
    /// or completed one of a different type than it invoked.
    Malformed,
    /// An acknowledged submit's run is not in the final state.
    LostSubmit,
    /// One key has two or more runs.
    DuplicatedRun,
    /// Acknowledgements of one key name different runs.
    AcksDisagree,
    /// A run no client (and no parent run) asked for.
    UnexpectedRun,
    /// A run exists for a key whose every submit was refused.
    RefusedButPresent,
    /// An acknowledged answer is not stored.
    LostAnswer,
    /// Two different decisions for one wait: both acknowledged, or both stored.
    TwoDecisions,
    /// An acknowledged signal is not stored.
    LostSignal,
    /// One signal id is stored twice for a run.
    DuplicatedSignal,
    /// A committed row without its epoch or owner.
    MissingLease,
    /// A run's epochs decrease in commit order.
    EpochsBackwards,
    /// A commit at an older epoch acknowledged after a newer claim was.
    StaleEpochCommit,
    /// One epoch of one run held by two owners.
    TwoOwners,
    /// More effects for an attempt than its faults allow.
    TooManyEffects,
    /// An acknowledged read is not a prefix of the run's final events.
    NonPrefixRead,
    /// A read returned fewer events than one that ended before it began.
    ReadBackwards,
    /// A run running under an expired lease after healing.
    Stranded,
    /// An operation type never succeeded inside a fault window.
    Vacuous,
}

impl ViolationKind {
    /// The property this rule belongs to.
    pub fn property(self) -> Property {
        use ViolationKind as K;
        match self {
            K::Malformed => Property::WellFormed,
            K::LostSubmit
            | K::DuplicatedRun
            | K::AcksDisagree
            | K::UnexpectedRun
            | K::RefusedButPresent => Property::Submits,
            K::LostAnswer | K::TwoDecisions | K::LostSignal | K::DuplicatedSignal => {
                Property::AnswersAndSignals
            }
            K::MissingLease | K::EpochsBackwards | K::StaleEpochCommit | K::TwoOwners => {
                Property::SingleHolder
            }
            K::TooManyEffects => Property::EffectsPerAttempt,
            K::NonPrefixRead | K::ReadBackwards => Property::MonotoneReads,
            K::Stranded => Property::NothingStranded,
            K::Vacuous => Property::NotVacuous,
        }
    }
}

/// One broken rule: what, in words, and the history events that show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The rule broken.
    pub kind: ViolationKind,
    /// What was seen, naming runs, keys, epochs.
    pub message: String,
    /// The history events involved, in time order; empty when the final
    /// state alone shows it.
    pub events: Vec<Event>,
}

impl Violation {
    /// A violation; `events` are put in time order.
    pub fn new(kind: ViolationKind, message: impl Into<String>, mut events: Vec<Event>) -> Self {
        events.sort_by_key(|e| e.time_ns);
        events.dedup();
        Violation {
            kind,
            message: message.into(),
            events,
        }
    }

    /// The property broken.
    pub fn property(&self) -> Property {
        self.kind.property()
    }
}

/// How the operations of one type ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes {
    /// Acknowledged.
    pub ok: usize,
    /// Refused.
    pub fail: usize,
    /// Unknown (including invokes never completed).
    pub info: usize,
}

impl Outcomes {
    /// Counts one operation that ended as `kind`.
    pub(crate) fn add(&mut self, kind: EventKind) {
        match kind {
            EventKind::Ok => self.ok += 1,
            EventKind::Fail => self.fail += 1,
            EventKind::Info | EventKind::Invoke => self.info += 1,
        }
    }
}

/// The checker's verdict on one campaign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The campaign's seed, as the caller gave it: with the commit, what
    /// reproduces a failure.
    pub seed: u64,
    /// Operations by type and outcome.
    pub operations: BTreeMap<OpType, Outcomes>,
    /// Every violation found, grouped by property.
    pub violations: Vec<Violation>,
}

impl Report {
    /// True when no property is violated (and the run was not vacuous).
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }

    /// The violations of one property.
    pub fn of(&self, property: Property) -> impl Iterator<Item = &Violation> {
        self.violations
            .iter()
            .filter(move |v| v.property() == property)
    }

    /// The violations of one kind.
    pub fn kinds(&self) -> Vec<ViolationKind> {
        self.violations.iter().map(|v| v.kind).collect()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.is_valid() { "valid" } else { "INVALID" };
        let n = self.violations.len();
        writeln!(
            f,
            "history check, seed {}: {verdict}, {n} violation(s)",
            self.seed
        )?;
        for (op, o) in &self.operations {
            writeln!(
                f,
                "  {op:<12} ok {:>6}  fail {:>6}  info {:>6}",
                o.ok, o.fail, o.info
            )?;
        }
        for v in &self.violations {
            writeln!(f, "[{}] {:?}: {}", v.property(), v.kind, v.message)?;
            if v.events.is_empty() {
                writeln!(f, "    (the final state alone shows it)")?;
            }
            for e in &v.events {
                writeln!(f, "    {e}")?;
            }
        }
        if !self.is_valid() {
            writeln!(f, "reproduce with seed {}", self.seed)?;
        }
        Ok(())
    }
}
