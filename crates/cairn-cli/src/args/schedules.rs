//! `cairn schedules …`'s arguments.

use std::path::PathBuf;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum SchedulesCommand {
    /// Store a schedule: runs of a crew started by the clock, each slot
    /// once whichever worker or server fires it.
    Create {
        /// 1 to 64 letters, digits, `-`, `_` or `.`.
        name: String,
        /// The crew file its runs use (its version is stored).
        #[arg(long)]
        crew: PathBuf,
        /// The input (JSON, or @FILE); `{{ scheduled_for }}` and
        /// `{{ fired_at }}` in its strings become those times.
        #[arg(long, default_value = "{}")]
        input: String,
        /// An interval (30s, 5m, 1h), counted from the schedule's creation.
        #[arg(long, conflicts_with = "cron", required_unless_present = "cron")]
        every: Option<String>,
        /// A cron expression: 5 fields, or 6 with seconds first.
        #[arg(long)]
        cron: Option<String>,
        /// The cron expression's IANA time zone (default UTC).
        #[arg(long, requires = "cron")]
        tz: Option<String>,
        /// While the previous run is unfinished: skip, buffer (one), allow
        /// or cancel (the previous).
        #[arg(long, default_value = "skip")]
        overlap: String,
        /// After downtime, which due slots run: latest, one (the oldest)
        /// or all:N (the newest N); the others are recorded missed.
        #[arg(long, default_value = "latest")]
        catch_up: String,
        /// The thread its runs join (its on_busy: queue).
        #[arg(long = "thread", value_name = "ID")]
        thread: Option<String>,
        /// Claim order of its runs, -1000 to 1000.
        #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
        priority: i64,
        /// Whose runs they are.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Every schedule: its cadence, next slot and whether it is paused.
    List,
    /// A schedule, its next fire times and its newest slots (fired,
    /// skipped, buffered, missed) with their runs.
    Show { name: String },
    /// Stop firing (slots while paused never run).
    Pause { name: String },
    /// Fire again from the next slot after now.
    Resume { name: String },
    /// Run it now, outside its cadence.
    Trigger { name: String },
    /// Run every slot from --from to --to (RFC 3339); a slot that ran
    /// keeps its run.
    Backfill {
        name: String,
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
    },
    /// Delete it and its slots; its runs stay.
    Delete { name: String },
}
