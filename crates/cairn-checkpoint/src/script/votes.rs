//! Votes on a wait whose agent has an approver policy
//! (`cairn_core::people::approvers`), inside the answer's transaction
//! (`waits::answer_in`), after the wait's row was locked: the policy is
//! the one its `wait_opened` event copied; the voter's groups are its
//! principal's; a principal votes once; the vote that meets the rule
//! decides, and the others leave the wait open with a `wait_voted` event.
//! An answer with no channel or `via: local` (database access, the
//! deadline's default) is not a vote: it answers the wait directly.

use cairn_core::event::payload::{CastVote, WaitOpened, WaitVoted};
use cairn_core::{
    tally, Actor, Answer, Approvers, Ballot, EventData, EventKind, Ineligible, NewEvent, RunId,
    Tally, Via, Voter, WaitRecord,
};

use crate::raw::nil_run;
use crate::sql::{query, Conn};
use crate::{Error, Result};

/// What a vote did.
pub(super) enum Cast {
    /// The same vote again: nothing changes.
    Repeat,
    /// Recorded; the wait stays open (its `wait_voted` event).
    Open(NewEvent),
    /// This vote met the rule: answer the wait with `answer`.
    Decided {
        answer: Answer,
        votes: Vec<CastVote>,
    },
}

/// The policy copied onto wait `w` when it opened, if its agent had one.
pub(super) async fn policy_in(c: &mut Conn<'_>, w: &WaitRecord) -> Result<Option<Approvers>> {
    let rows = c
        .fetch_all(
            query(
                "SELECT data FROM events WHERE run_id = :run AND kind = :kind \
                 ORDER BY seq DESC",
            )
            .bind("run", w.run_id)
            .bind("kind", EventKind::WaitOpened.as_str()),
        )
        .await?;
    for row in &rows {
        let data = row.json("data", w.run_id, "a wait_opened event")?;
        let opened: WaitOpened = serde_json::from_value(data).map_err(|e| {
            cairn_core::Corruption::new(w.run_id, format!("a wait_opened event: {e}"))
        })?;
        if opened.wait == w.id {
            return Ok(opened.approvers);
        }
    }
    Ok(None)
}

/// The groups of the enabled principal `name` (none for another name).
async fn groups_in(c: &mut Conn<'_>, name: &str) -> Result<Vec<String>> {
    let row = c
        .fetch_optional(
            query("SELECT groups FROM principals WHERE name = :name AND disabled_at IS NULL")
                .bind("name", name),
        )
        .await?;
    let Some(row) = row else {
        return Ok(vec![]);
    };
    let groups = row.json("groups", nil_run(), "a principal's groups")?;
    serde_json::from_value(groups).map_err(|e| {
        Error::Corruption(cairn_core::Corruption::new(
            nil_run(),
            format!("principal `{name}`'s groups: {e}"),
        ))
    })
}

/// Whether `name` submitted, retried, continued or forked run `run`.
async fn is_own_in(c: &mut Conn<'_>, run: RunId, name: &str) -> Result<bool> {
    let row = c
        .fetch_optional(
            query(
                "SELECT 1 AS own FROM events WHERE run_id = :run AND kind IN \
                 ('run_submitted', 'run_retried', 'run_continued', 'run_forked') \
                 AND data->>'by' = :name LIMIT 1",
            )
            .bind("run", run)
            .bind("name", name),
        )
        .await?;
    Ok(row.is_some())
}

/// The votes cast on wait `w`, in the order cast, with their answers.
async fn votes_in(c: &mut Conn<'_>, w: &WaitRecord) -> Result<Vec<(CastVote, Answer)>> {
    let rows = c
        .fetch_all(
            query(
                "SELECT principal, decision, answer, via FROM wait_votes \
                 WHERE wait_id = :wait ORDER BY at, principal",
            )
            .bind("wait", w.id),
        )
        .await?;
    let bad = |e: String| cairn_core::Corruption::new(w.run_id, format!("a vote: {e}"));
    let mut votes = Vec::with_capacity(rows.len());
    for row in &rows {
        let answer = row.json("answer", w.run_id, "a vote's answer")?;
        let answer: Answer = serde_json::from_value(answer).map_err(|e| bad(e.to_string()))?;
        let via = row.opt_text("via")?.map(serde_json::Value::String);
        let via: Option<Via> = via
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| bad(e.to_string()))?;
        let vote = CastVote {
            by: row.text("principal")?,
            decision: row.text("decision")?,
            via,
        };
        votes.push((vote, answer));
    }
    Ok(votes)
}

/// `by`'s vote of `answer` on open wait `w` under `policy`: refused
/// (`Error::Ineligible`, nothing written) for a voter the policy does not
/// admit or a second, different vote; else recorded and tallied.
pub(super) async fn cast_in(
    c: &mut Conn<'_>,
    w: &WaitRecord,
    policy: &Approvers,
    answer: &Answer,
    by: &Actor,
) -> Result<Cast> {
    // Only an answer through a channel votes (`waits::answer_in`).
    let groups = groups_in(c, &by.by).await?;
    let voter = Voter {
        name: &by.by,
        groups: &groups,
        is_own: is_own_in(c, w.run_id, &by.by).await?,
        local: false,
    };
    let refuse = |why| Error::Ineligible { wait: w.id, why };
    policy.admits(&voter).map_err(refuse)?;
    let inserted = c
        .execute(
            query(
                "INSERT INTO wait_votes (wait_id, principal, decision, answer, via, at) \
                 VALUES (:wait, :by, :decision, :answer, :via, {now}) \
                 ON CONFLICT (wait_id, principal) DO NOTHING",
            )
            .bind("wait", w.id)
            .bind("by", by.by.as_str())
            .bind("decision", answer.decision())
            .bind("answer", serde_json::to_value(answer).ok())
            .bind("via", by.origin.via.map(|v| v.as_str())),
        )
        .await?;
    let votes = votes_in(c, w).await?;
    if inserted == 0 {
        let earlier = votes.iter().find(|(v, _)| v.by == by.by).map(|(_, a)| a);
        return match earlier == Some(answer) {
            true => Ok(Cast::Repeat),
            false => Err(refuse(Ineligible::AlreadyVoted(by.by.clone()))),
        };
    }
    let answers: Vec<Answer> = votes.iter().map(|(_, a)| a.clone()).collect();
    let cast: Vec<CastVote> = votes.into_iter().map(|(v, _)| v).collect();
    Ok(match tally(policy, &answers) {
        Tally::Decided(answer) => Cast::Decided {
            answer,
            votes: cast,
        },
        Tally::Open {
            approvals,
            rejects,
            required,
        } => Cast::Open(NewEvent::typed(EventData::WaitVoted(WaitVoted {
            wait: w.id,
            kind: w.kind,
            idx: w.step_idx,
            decision: answer.decision().to_owned(),
            actor: by.clone(),
            approvals,
            rejects,
            required,
        }))),
    })
}

/// `WaitStore::ballot`: wait `w`'s policy and votes.
pub(super) async fn ballot_in(c: &mut Conn<'_>, w: &WaitRecord) -> Result<Ballot> {
    Ok(Ballot {
        approvers: policy_in(c, w).await?,
        votes: votes_in(c, w).await?.into_iter().map(|(v, _)| v).collect(),
        digest: cairn_core::wait_digest(&w.prompt),
    })
}
