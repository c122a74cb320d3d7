//! `cairn signal` both ways: on the database (the engine) and through a
//! server (`POST /v1/signals`, `GET /v1/runs/{id}/signals`:
//! `remote/signals.rs`). One action type, one answer type, so the command
//! and its printing are written once.

use cairn::{Engine, RunId, RunSignals, Sent, SignalRequest};

use super::CrewRef;

/// What `cairn signal` does.
pub enum SignalAct {
    /// A send, and the crew a signal-with-submit starts.
    Send(Box<SignalRequest>, Option<CrewRef>),
    List(RunId),
    /// `runs values`: what the run published (only KEY's, if given).
    Values(RunId, Option<String>),
}

/// What it answers.
pub enum SignalOut {
    Sent(Box<Sent>),
    Listed(RunSignals),
    Values(Vec<cairn::Published>),
}

pub async fn local(engine: &Engine, act: SignalAct) -> anyhow::Result<SignalOut> {
    Ok(match act {
        SignalAct::Send(req, crew) => {
            let crew = match crew {
                Some(CrewRef::File(crew, _)) => Some(*crew),
                _ => None,
            };
            let by = cairn::local_actor(None, None);
            let sent = engine.send_signal(&req, crew.as_ref(), &by).await?;
            SignalOut::Sent(Box::new(sent))
        }
        SignalAct::List(run) => SignalOut::Listed(engine.run_signals(run).await?),
        SignalAct::Values(run, None) => SignalOut::Values(engine.published(run).await?),
        SignalAct::Values(run, Some(key)) => {
            let one = engine.published_value(run, &key).await?;
            SignalOut::Values(one.into_iter().collect())
        }
    })
}
