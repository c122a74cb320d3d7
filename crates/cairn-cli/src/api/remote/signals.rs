//! `cairn signal` through a server: `POST /v1/signals`, `GET
//! /v1/runs/{id}/signals` (the action and answer types: `api/signals.rs`).

use serde_json::json;

use super::super::signals::{SignalAct, SignalOut};
use super::{crew_name, Remote};

pub async fn remote(client: &Remote, act: SignalAct) -> anyhow::Result<SignalOut> {
    Ok(match act {
        SignalAct::Send(mut req, crew) => {
            if let (Some(start), Some(crew)) = (req.start.as_mut(), crew) {
                let (name, version) = crew_name(client, crew).await?;
                start.crew = name;
                start.version = version;
            }
            let sent = client.post("/v1/signals", &json!(req)).await?;
            SignalOut::Sent(Box::new(sent))
        }
        SignalAct::Values(run, key) => {
            let all: serde_json::Value = client.get(&format!("/v1/runs/{run}/values")).await?;
            let all: Vec<cairn::Published> = serde_json::from_value(all["values"].clone())?;
            SignalOut::Values(
                all.into_iter()
                    .filter(|p| key.as_ref().is_none_or(|k| *k == p.key))
                    .collect(),
            )
        }
        SignalAct::List(run) => {
            SignalOut::Listed(client.get(&format!("/v1/runs/{run}/signals")).await?)
        }
    })
}
