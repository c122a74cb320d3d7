//! Notices of open waits, delivered by the server: a webhook POST per
//! wait, signed as the Standard Webhooks specification says (`webhook-id`,
//! `webhook-timestamp`, `webhook-signature`; receivers verify with the
//! spec's libraries), carrying a signed link per principal who may answer.
//! The waits table is the outbox (`cairn::Engine::due_notices`): a notice
//! is due until a receiver acknowledges it (a 2xx), retried with a delay
//! that grows with the wait's age, every attempt recorded; its id
//! (`msg_<wait id>`) and body are the same on every attempt, in every
//! process, so a receiver drops repeats by id. Chat tools are reached
//! through the webhook. With an SMTP relay, each principal who may answer
//! and has an address is mailed its link too (`mail.rs`).
//!
//! A link token is `cl_` and the HMAC-SHA256 of the wait and the principal
//! under the webhook secret: the same on every attempt, never stored (its
//! digest is). `GET /links/{token}` shows what it answers and changes
//! nothing (mail scanners fetch links); only the confirmation's `POST`
//! votes, once.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::sync::watch;

use cairn::{NewLink, NoticeAttempt, Principal, WaitRecord};

use crate::AppState;

mod mail;
pub use mail::MailOptions;

/// Where notices go and how they are signed.
#[derive(Clone)]
pub struct NotifyOptions {
    /// The receiver's URL (`CAIRN_NOTIFY_URL`); none: no webhook.
    pub url: Option<url::Url>,
    /// The SMTP relay notices are mailed through; none: no mail.
    pub mail: Option<MailOptions>,
    /// The signing secret, `whsec_` and base64 (`CAIRN_NOTIFY_SECRET`).
    pub secret: String,
    /// How long a link stays usable. Default 3 days.
    pub link_ttl: Duration,
    /// How long before an open wait's deadline a reminder goes out
    /// (`CAIRN_NOTIFY_REMIND`, default 1 hour); none: no reminders.
    pub remind: Option<Duration>,
}

/// Which notice of a wait: the one when it opens, or the reminder before
/// its deadline. Each is delivered once per channel, on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    Opened,
    Reminder,
}

impl Notice {
    /// The channel its attempts are recorded under.
    fn channel(self, mail: bool) -> &'static str {
        match (self, mail) {
            (Notice::Opened, false) => "webhook",
            (Notice::Opened, true) => "mail",
            (Notice::Reminder, false) => "webhook-reminder",
            (Notice::Reminder, true) => "mail-reminder",
        }
    }

    /// Its `type` in the webhook's body.
    fn kind(self) -> &'static str {
        match self {
            Notice::Opened => "wait.opened",
            Notice::Reminder => "wait.reminder",
        }
    }
}

impl std::fmt::Debug for NotifyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyOptions")
            .field(
                "url",
                &self
                    .url
                    .as_ref()
                    .map(|u| cairn::text::redact_url(u.as_str())),
            )
            .field("mail", &self.mail)
            .field("link_ttl", &self.link_ttl)
            .field("remind", &self.remind)
            .finish_non_exhaustive()
    }
}

/// The longest wait between two attempts.
const MAX_RETRY: Duration = Duration::from_secs(300);
/// Notices delivered per pass.
const BATCH: u32 = 32;

/// Delivers due notices until the server shuts down.
pub(crate) struct Notifier {
    opts: NotifyOptions,
    webhook: standardwebhooks::Webhook,
    http: reqwest::Client,
    /// The address links and the console are reached at.
    base: String,
}

impl Notifier {
    /// A notifier, or why its secret is not one.
    pub fn new(opts: NotifyOptions, base: String) -> Result<Notifier, String> {
        let webhook = standardwebhooks::Webhook::new(&opts.secret)
            .map_err(|e| format!("CAIRN_NOTIFY_SECRET is not `whsec_` and base64: {e}"))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot build the notifier's HTTP client: {e}"))?;
        Ok(Notifier {
            opts,
            webhook,
            http,
            base: base.trim_end_matches('/').to_owned(),
        })
    }

    /// Delivers due notices every second until `shutdown`.
    pub async fn run(self, state: AppState, mut shutdown: watch::Receiver<bool>) {
        loop {
            if let Err(e) = self.pass(&state).await {
                tracing::warn!(error = %cairn::ErrorChain(&e), "notices: a pass failed; trying again");
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }

    async fn pass(&self, state: &AppState) -> cairn::Result<()> {
        for notice in [Notice::Opened, Notice::Reminder] {
            if let Some(url) = &self.opts.url {
                for wait in self.due(state, notice, false).await? {
                    let attempt = self.deliver(state, url, &wait, notice).await?;
                    log(&attempt);
                    state.engine().record_notice(&attempt).await?;
                }
            }
            if let Some(mail) = &self.opts.mail {
                for wait in self.due(state, notice, true).await? {
                    let people = self.links(state, &wait).await?;
                    let retry = retry_in(&wait);
                    let attempt = mail::send(mail, &wait, &people, notice, retry).await;
                    log(&attempt);
                    state.engine().record_notice(&attempt).await?;
                }
            }
        }
        Ok(())
    }

    /// The waits whose `notice` is due on the webhook or by mail.
    async fn due(
        &self,
        state: &AppState,
        notice: Notice,
        mail: bool,
    ) -> cairn::Result<Vec<WaitRecord>> {
        let channel = notice.channel(mail);
        match (notice, self.opts.remind) {
            (Notice::Opened, _) => state.engine().due_notices(channel, BATCH).await,
            (Notice::Reminder, Some(lead)) => {
                state.engine().due_reminders(channel, lead, BATCH).await
            }
            (Notice::Reminder, None) => Ok(vec![]),
        }
    }

    /// One attempt at wait `w`'s webhook.
    async fn deliver(
        &self,
        state: &AppState,
        url: &url::Url,
        w: &WaitRecord,
        notice: Notice,
    ) -> cairn::Result<NoticeAttempt> {
        let body = self.body(state, w, notice).await?.to_string();
        let id = match notice {
            Notice::Opened => format!("msg_{}", w.id.as_uuid().simple()),
            Notice::Reminder => format!("msg_{}_reminder", w.id.as_uuid().simple()),
        };
        let now = chrono::Utc::now();
        let mut attempt = NoticeAttempt {
            wait: w.id,
            channel: notice.channel(false),
            delivered: false,
            status: None,
            error: None,
            retry_in: retry_in(w),
        };
        let signature = match self.webhook.sign(&id, now.timestamp(), body.as_bytes()) {
            Ok(s) => s,
            Err(e) => {
                attempt.error = Some(format!("cannot sign: {e}"));
                return Ok(attempt);
            }
        };
        let sent = self
            .http
            .post(url.clone())
            .header("content-type", "application/json")
            .header(standardwebhooks::HEADER_WEBHOOK_ID, &id)
            .header(standardwebhooks::HEADER_WEBHOOK_TIMESTAMP, now.timestamp())
            .header(standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature)
            .body(body)
            .send()
            .await;
        match sent {
            Ok(r) => {
                attempt.status = Some(r.status().as_u16());
                attempt.delivered = r.status().is_success();
                if !attempt.delivered {
                    attempt.error = Some(format!("the receiver answered {}", r.status()));
                }
            }
            Err(e) => attempt.error = Some(cairn::text::redact_url(&e.to_string())),
        }
        Ok(attempt)
    }

    /// The people who may answer `w`, each with their link (issued: the
    /// same link on every channel and attempt).
    async fn links(
        &self,
        state: &AppState,
        w: &WaitRecord,
    ) -> cairn::Result<Vec<(Principal, String)>> {
        let people = state.engine().eligible(w.id).await?;
        let mut issued = Vec::with_capacity(people.len());
        let mut links = Vec::with_capacity(people.len());
        for p in people {
            let token = self.link_token(w, &p.name);
            issued.push(NewLink {
                hash: cairn::people::digest(&token),
                principal: p.name.clone(),
                wait: w.id,
                ttl: self.opts.link_ttl,
            });
            links.push((p, format!("{}/links/{token}", self.base)));
        }
        state.engine().issue_links(&issued).await?;
        Ok(links)
    }

    /// The notice's body: what is asked, of whom, and a link per person.
    async fn body(&self, state: &AppState, w: &WaitRecord, notice: Notice) -> cairn::Result<Value> {
        let ballot = state.engine().ballot(w.id).await?;
        let links: Vec<Value> = self
            .links(state, w)
            .await?
            .into_iter()
            .map(|(p, url)| json!({"principal": p.name, "url": url}))
            .collect();
        Ok(json!({
            "type": notice.kind(),
            "timestamp": w.created_at,
            "data": {
                "wait_id": w.id, "run_id": w.run_id, "kind": w.kind, "step": w.step_idx,
                "prompt": w.prompt, "deadline": w.deadline, "approvers": ballot.approvers,
                "digest": ballot.digest, "links": links, "console_url": format!("{}/waits", self.base),
            }
        }))
    }

    /// `cl_` and the hex HMAC-SHA256 of `wait:principal` under the secret.
    fn link_token(&self, w: &WaitRecord, principal: &str) -> String {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.opts.secret.as_bytes()) else {
            // HMAC takes a key of any length; this arm is never taken.
            return format!("cl_{}", cairn::people::secret());
        };
        mac.update(format!("{}:{principal}", w.id).as_bytes());
        let bytes = mac.finalize().into_bytes();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("cl_{hex}")
    }
}

/// When to try a wait's notice again: a quarter of the wait's age, from
/// 1 s to [`MAX_RETRY`] (a fresh wait is retried soon, an old one rarely).
fn retry_in(w: &WaitRecord) -> Duration {
    let age = (chrono::Utc::now() - w.created_at)
        .to_std()
        .unwrap_or_default();
    (age / 4).clamp(Duration::from_secs(1), MAX_RETRY)
}

fn log(attempt: &NoticeAttempt) {
    let (wait, channel) = (attempt.wait, attempt.channel);
    if attempt.delivered {
        tracing::info!(%wait, channel, "notice delivered");
    } else {
        tracing::warn!(%wait, channel, status = ?attempt.status, error = ?attempt.error, "notice not delivered; will retry");
    }
}
