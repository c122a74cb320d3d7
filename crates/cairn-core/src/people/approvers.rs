//! Approver policies on waits (a crew agent's `[agents.approvers]`): who
//! may answer, how many distinct people must approve, whether the run's
//! own people count, and whether one reject decides. The policy is copied
//! onto the wait when it opens (its `wait_opened` event), so a crew upgrade
//! never changes who may answer an open wait. [`Approvers::admits`] and
//! [`tally`] are the whole rule; storage applies them in the answer's
//! transaction.

use serde::{Deserialize, Serialize};

use crate::people::Via;
use crate::wait::Answer;

/// Who may answer a wait, and how many must agree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approvers {
    /// `group:NAME` and `user:NAME`; empty: any operator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Distinct principals whose approval decides (at least 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub required: u32,
    /// Whether the run's submitter (or whoever retried, continued or
    /// forked it) counts.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub self_approval: bool,
    /// Whether one reject decides (else `required` rejects do).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub one_reject_decides: bool,
}

fn one() -> u32 {
    1
}
fn is_one(n: &u32) -> bool {
    *n == 1
}
fn yes() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}

impl Default for Approvers {
    fn default() -> Self {
        Approvers {
            allow: vec![],
            required: 1,
            self_approval: true,
            one_reject_decides: true,
        }
    }
}

/// Someone answering a wait, as the policy sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter<'a> {
    pub name: &'a str,
    pub groups: &'a [String],
    /// Whether they submitted, retried, continued or forked the run.
    pub is_own: bool,
    /// Direct database access (`via: local`), which no policy binds.
    pub local: bool,
}

/// Why a voter may not answer; nothing is stored but the refusal's audit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ineligible {
    #[error("`{0}` is not among the wait's approvers")]
    NotAllowed(String),
    #[error("`{0}` submitted, retried, continued or forked this run, and the policy does not let them approve it (self_approval = false)")]
    OwnRun(String),
    #[error("`{0}` already voted on this wait")]
    AlreadyVoted(String),
}

impl Approvers {
    /// Checks the policy's own rules: entries `group:NAME` or `user:NAME`
    /// with names as principals', and `required` at least 1.
    pub fn check(&self) -> Result<(), String> {
        if self.required == 0 {
            return Err("`required` is at least 1".into());
        }
        for entry in &self.allow {
            let name = entry
                .strip_prefix("group:")
                .or_else(|| entry.strip_prefix("user:"))
                .ok_or_else(|| {
                    format!("`{entry}` in `allow` is neither group:NAME nor user:NAME")
                })?;
            super::check_name(name).map_err(|e| format!("`allow`: {e}"))?;
        }
        Ok(())
    }

    /// Whether `voter` may answer. Local access passes; otherwise the
    /// allow list (empty: anyone the route lets answer), then the rule on
    /// the run's own people.
    pub fn admits(&self, voter: &Voter<'_>) -> Result<(), Ineligible> {
        if voter.local {
            return Ok(());
        }
        let listed = self.allow.is_empty()
            || self.allow.iter().any(|entry| match entry.split_once(':') {
                Some(("user", name)) => name == voter.name,
                Some(("group", group)) => voter.groups.iter().any(|g| g == group),
                _ => false,
            });
        if !listed {
            return Err(Ineligible::NotAllowed(voter.name.to_owned()));
        }
        if voter.is_own && !self.self_approval {
            return Err(Ineligible::OwnRun(voter.name.to_owned()));
        }
        Ok(())
    }
}

/// One principal's vote on a wait (`wait_votes`), as `wait_voted` and the
/// deciding `wait_answered` list them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CastVote {
    pub by: String,
    /// `approve`, `reject`, `edit` or `answer`.
    pub decision: String,
    /// The channel it came through, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
}

/// A wait's policy (copied when it opened) and the votes cast so far, as
/// the console shows them ("1 of 2 approvals: ana").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ballot {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<Approvers>,
    pub votes: Vec<CastVote>,
    /// The [`digest`] of what the wait asks about: an answer may quote it,
    /// and one that quotes another is refused.
    #[serde(default)]
    pub digest: String,
}

/// The digest of what a wait asks about (its prompt, fixed when it
/// opened): `sha256:` and 64 hex digits of the prompt's JSON. A person's
/// answer quotes the digest of what they were shown, so an answer to
/// something other than what is open (a newer draft under the same
/// question, say) is refused instead of approving unseen work.
pub fn digest(prompt: &serde_json::Value) -> String {
    use sha2::{Digest as _, Sha256};
    let bytes = serde_json::to_vec(prompt).unwrap_or_default();
    let hash = Sha256::digest(&bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Where a wait stands after its votes.
#[derive(Debug, Clone, PartialEq)]
pub enum Tally {
    /// Decided: answer the wait with this.
    Decided(Answer),
    /// Not yet: `approvals` of `required` approvals, `rejects` rejects.
    Open {
        approvals: u32,
        rejects: u32,
        required: u32,
    },
}

/// The tally of distinct voters' answers (one each, in the order cast):
/// an edit or a question's answer decides at once (one eligible person is
/// enough); a reject decides at once if `one_reject_decides`, else when
/// `required` rejected; approvals decide when `required` approved.
pub fn tally(policy: &Approvers, answers: &[Answer]) -> Tally {
    if let Some(single) = answers
        .iter()
        .find(|a| matches!(a, Answer::Edit { .. } | Answer::Answer { .. }))
    {
        return Tally::Decided(single.clone());
    }
    let rejects: Vec<&Answer> = answers
        .iter()
        .filter(|a| matches!(a, Answer::Reject { .. }))
        .collect();
    let approvals = answers.len() - rejects.len();
    let needed = policy.required as usize;
    match rejects.first() {
        Some(reject) if policy.one_reject_decides || rejects.len() >= needed => {
            return Tally::Decided((*reject).clone())
        }
        _ => {}
    }
    if approvals >= needed {
        return Tally::Decided(Answer::Approve);
    }
    Tally::Open {
        approvals: approvals as u32,
        rejects: rejects.len() as u32,
        required: policy.required,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_names_its_prompt_and_changes_with_it() {
        let one = digest(&serde_json::json!({"draft": "a"}));
        assert!(one.starts_with("sha256:") && one.len() == 7 + 64, "{one}");
        assert_eq!(one, digest(&serde_json::json!({"draft": "a"})));
        assert_ne!(one, digest(&serde_json::json!({"draft": "b"})));
    }

    fn voter<'a>(name: &'a str, groups: &'a [String], is_own: bool) -> Voter<'a> {
        Voter {
            name,
            groups,
            is_own,
            local: false,
        }
    }

    #[test]
    fn the_allow_list_names_groups_and_users() {
        let policy = Approvers {
            allow: vec!["group:finance".into(), "user:cto".into()],
            ..Approvers::default()
        };
        let finance = ["finance".to_owned()];
        assert_eq!(policy.admits(&voter("ana", &finance, false)), Ok(()));
        assert_eq!(policy.admits(&voter("cto", &[], false)), Ok(()));
        let refused = policy.admits(&voter("bob", &[], false));
        assert_eq!(refused, Err(Ineligible::NotAllowed("bob".into())));
        let local = Voter {
            local: true,
            ..voter("root", &[], true)
        };
        assert_eq!(policy.admits(&local), Ok(()), "database access passes");
        assert_eq!(
            Approvers::default().admits(&voter("any", &[], true)),
            Ok(())
        );
    }

    #[test]
    fn the_runs_own_people_count_only_with_self_approval() {
        let policy = Approvers {
            self_approval: false,
            ..Approvers::default()
        };
        assert_eq!(
            policy.admits(&voter("ana", &[], true)),
            Err(Ineligible::OwnRun("ana".into()))
        );
        assert_eq!(policy.admits(&voter("bob", &[], false)), Ok(()));
    }

    #[test]
    fn approvals_decide_at_required_and_one_reject_decides_by_default() {
        let two = Approvers {
            required: 2,
            ..Approvers::default()
        };
        let reject = Answer::Reject {
            feedback: "no".into(),
        };
        assert!(matches!(
            tally(&two, &[Answer::Approve]),
            Tally::Open { approvals: 1, .. }
        ));
        let both = [Answer::Approve, Answer::Approve];
        assert_eq!(tally(&two, &both), Tally::Decided(Answer::Approve));
        assert_eq!(
            tally(&two, &[Answer::Approve, reject.clone()]),
            Tally::Decided(reject.clone())
        );
        let patient = Approvers {
            one_reject_decides: false,
            ..two
        };
        let open = tally(&patient, &[reject.clone(), Answer::Approve]);
        assert_eq!(
            open,
            Tally::Open {
                approvals: 1,
                rejects: 1,
                required: 2
            }
        );
        let edit = Answer::Edit {
            output: serde_json::json!("x"),
        };
        assert_eq!(
            tally(&patient, std::slice::from_ref(&edit)),
            Tally::Decided(edit)
        );
    }

    #[test]
    fn a_policy_checks_its_entries() {
        let bad = |allow: &str| Approvers {
            allow: vec![allow.into()],
            ..Approvers::default()
        };
        assert!(bad("finance").check().is_err());
        assert!(bad("group:fin ance").check().is_err());
        assert!(bad("group:finance").check().is_ok());
        let zero = Approvers {
            required: 0,
            ..Approvers::default()
        };
        assert!(zero.check().is_err());
    }
}
