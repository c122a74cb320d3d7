//! `cairn hooks …`'s arguments.

use clap::Subcommand;

#[derive(Subcommand)]
pub enum HooksCommand {
    /// Store an inbound webhook (`POST /v1/hooks/NAME`) that maps each
    /// delivery to a signal; prints its token or signing secret, once.
    /// Local only: it holds a secret.
    Create {
        /// 1 to 64 letters, digits, `-`, `_` or `.`.
        name: String,
        /// The signal's name: a template over `body` and `headers`
        /// (`paid`, `{{ body.type }}`).
        #[arg(long)]
        signal: String,
        /// The signal's target, a template: `key:{{ body.order_id }}`,
        /// `thread:{{ body.conversation }}` or a run id.
        #[arg(long)]
        target: String,
        /// The payload, an expression (default: `body`).
        #[arg(long)]
        payload: Option<String>,
        /// The signal's idempotency id, a template (default: the scheme's
        /// delivery header: `idempotency-key`, `webhook-id`,
        /// `X-GitHub-Delivery`).
        #[arg(long)]
        id: Option<String>,
        /// How a caller proves itself: token (`Authorization: Bearer`),
        /// standard (Standard Webhooks signatures) or github
        /// (`X-Hub-Signature-256`).
        #[arg(long, default_value = "token")]
        scheme: String,
        /// A crew name: a target with no unfinished run starts one of it
        /// (signal-with-submit).
        #[arg(long, value_name = "CREW")]
        start: Option<String>,
    },
    /// Every hook (never a secret).
    List,
    /// Delete a hook: its token or secret stops working at once.
    Delete { name: String },
}
