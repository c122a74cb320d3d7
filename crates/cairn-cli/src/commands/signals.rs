//! `cairn signal …`: named messages to a run, on the database or through
//! `--server` alike (`api/signals.rs`).

use cairn::{RunId, SignalRequest, StartRequest};

use super::Connect;
use crate::api::signals::{SignalAct, SignalOut};
use crate::api::Api;
use crate::args::SignalCommand;
use crate::input::{parse_input, usage};
use crate::output::signals::{print_sent, print_signals, print_values};
use crate::report::exit;

pub async fn main(to: &impl Connect, command: SignalCommand, json: bool) -> anyhow::Result<u8> {
    let act = match command {
        SignalCommand::Send {
            target,
            name,
            payload,
            id,
            start,
            start_input,
        } => {
            let crew = start.as_deref().map(|f| to.read_crew(f)).transpose()?;
            let start = crew.as_ref().map(|c| StartRequest {
                crew: match c {
                    crate::api::CrewRef::File(crew, _) => crew.def().name.clone(),
                    crate::api::CrewRef::Named(name, _) => name.clone(),
                },
                version: None,
                input: None,
            });
            let mut req = SignalRequest {
                target,
                name,
                payload: parse_input(&payload)?,
                id,
                start,
                // The CLI passes on the trace it runs in, as its steps do.
                traceparent: std::env::var("TRACEPARENT").ok(),
            };
            if let (Some(s), Some(input)) = (req.start.as_mut(), start_input) {
                s.input = Some(parse_input(&input)?);
            }
            SignalAct::Send(Box::new(req), crew)
        }
        SignalCommand::List { run } => {
            let run: RunId = run
                .parse()
                .map_err(|e| usage(format!("`{run}` is not a run id: {e}")))?;
            SignalAct::List(run)
        }
    };
    print(to.connect(false).await?.signals(act).await?, json)
}

/// Prints what a signal action (or `runs values`) answered.
pub(super) fn print(out: SignalOut, json: bool) -> anyhow::Result<u8> {
    match out {
        SignalOut::Sent(sent) => print_sent(&sent, json)?,
        SignalOut::Listed(listed) => print_signals(&listed, json)?,
        SignalOut::Values(values) => print_values(&values, json)?,
    }
    Ok(exit::OK)
}
