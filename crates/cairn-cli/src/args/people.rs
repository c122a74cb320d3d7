//! `cairn principals …` and `cairn audit`'s arguments.

use clap::Subcommand;

#[derive(Subcommand)]
pub enum PrincipalsCommand {
    /// Add a person or a service and print its token, this once (only its
    /// digest is stored). Locally this is an admin path: database
    /// credentials pass every check.
    Add {
        /// 1 to 64 ASCII letters, digits, `.`, `_`, `-` or `@`.
        name: String,
        /// viewer (reads), operator (run actions, submits, answers) or
        /// admin (principals, the audit, limits, compaction, upgrades).
        #[arg(long)]
        role: String,
        /// A group approver policies may name as `group:NAME` (repeatable).
        #[arg(long = "group", value_name = "G")]
        groups: Vec<String>,
        /// A tenant it may submit as (repeatable; none: any).
        #[arg(long = "tenant", value_name = "T")]
        tenants: Vec<String>,
        /// Where its notices are mailed (with CAIRN_SMTP_URL).
        #[arg(long)]
        email: Option<String>,
    },
    /// List principals (never a token).
    List,
    /// Disable a principal: its token and console sessions stop working.
    Disable { name: String },
    /// Issue a principal a new token (printed once); the old one and its
    /// console sessions stop working.
    Rotate { name: String },
}

/// `cairn audit`'s filters.
#[derive(clap::Args)]
pub struct AuditArgs {
    /// Only this principal's entries.
    #[arg(long)]
    pub principal: Option<String>,
    /// Only entries at or after this time (RFC 3339, such as
    /// 2026-11-29T09:00:00Z) or this long ago (10m, 2h, 7d).
    #[arg(long, value_name = "TIME|AGE")]
    pub since: Option<String>,
    /// At most this many entries (default 1000).
    #[arg(long)]
    pub limit: Option<u32>,
}
