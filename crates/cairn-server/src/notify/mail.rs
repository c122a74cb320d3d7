//! Notices by e-mail: one message per principal who may answer and has an
//! address, with its link, sent through an SMTP relay (`CAIRN_SMTP_URL`,
//! plain SMTP: a relay on the host or in the cluster; TLS to a remote
//! relay is not built). A wait's mail is delivered when every message was
//! accepted; a failure sends them all again (at least once).

use std::time::Duration;

use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use cairn::{NoticeAttempt, Principal, WaitRecord};

/// Where mail goes: the relay and the sender.
#[derive(Debug, Clone)]
pub struct MailOptions {
    /// The relay's host and port (`smtp://HOST:PORT`).
    pub host: String,
    pub port: u16,
    /// The sender (`CAIRN_SMTP_FROM`).
    pub from: String,
}

impl MailOptions {
    /// `smtp://HOST[:PORT]` (port 25 by default) and a sender address.
    pub fn parse(url: &str, from: &str) -> Result<MailOptions, String> {
        let url = url::Url::parse(url).map_err(|e| format!("CAIRN_SMTP_URL: {e}"))?;
        if url.scheme() != "smtp" {
            return Err(format!(
                "CAIRN_SMTP_URL: `{}` is not smtp://HOST:PORT (plain SMTP to a relay)",
                url.scheme()
            ));
        }
        let host = url.host_str().filter(|h| !h.is_empty());
        let host = host.ok_or("CAIRN_SMTP_URL: no host")?.to_owned();
        from.parse::<Mailbox>()
            .map_err(|e| format!("CAIRN_SMTP_FROM `{from}`: {e}"))?;
        Ok(MailOptions {
            host,
            port: url.port().unwrap_or(25),
            from: from.to_owned(),
        })
    }
}

/// Sends wait `w`'s mail to `people` (each with their link); the attempt.
pub(super) async fn send(
    opts: &MailOptions,
    w: &WaitRecord,
    people: &[(Principal, String)],
    notice: super::Notice,
    retry_in: Duration,
) -> NoticeAttempt {
    let mut attempt = NoticeAttempt {
        wait: w.id,
        channel: notice.channel(true),
        delivered: true,
        status: None,
        error: None,
        retry_in,
    };
    let relay = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&opts.host)
        .port(opts.port)
        .timeout(Some(Duration::from_secs(10)))
        .build();
    for (p, link) in people {
        let Some(to) = &p.email else { continue };
        let sent = match message(opts, w, (to, &p.name), link, notice) {
            Ok(m) => relay.send(m).await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            attempt.delivered = false;
            attempt.error = Some(format!("mail to {}: {e}", p.name));
        }
    }
    attempt
}

fn message(
    opts: &MailOptions,
    w: &WaitRecord,
    (to, name): (&str, &str),
    link: &str,
    notice: super::Notice,
) -> Result<Message, String> {
    let prompt = match &w.prompt {
        serde_json::Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    let (subject, deadline) = match (notice, w.deadline) {
        (super::Notice::Reminder, Some(at)) => (
            format!("Cairn: reminder, a {} waits for you", w.kind.as_str()),
            format!(" Its deadline is {}.", at.to_rfc3339()),
        ),
        _ => (
            format!("Cairn: a {} waits for you", w.kind.as_str()),
            String::new(),
        ),
    };
    let body = format!(
        "{name},\n\nThe {kind} of step {step} of run {run} waits for you.{deadline}\n\n{prompt}\n\n\
         Open this link to answer (it shows what you answer first, and works once):\n{link}\n",
        kind = w.kind.as_str(),
        step = w.step_idx.get(),
        run = w.run_id,
    );
    Message::builder()
        .from(opts.from.parse().map_err(|e| format!("{e}"))?)
        .to(to
            .parse()
            .map_err(|e| format!("the address of {name}: {e}"))?)
        .subject(subject)
        .body(body)
        .map_err(|e| e.to_string())
}
