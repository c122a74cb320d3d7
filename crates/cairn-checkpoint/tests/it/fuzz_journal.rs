//! Fuzzing of the journal decoder (`raw::decode_journal` behind
//! `JournalStore::journal`), bounded and seeded so it runs in every `cargo test`:
//! random journal rows, some damaged in one column each (a payload that is
//! not JSON, a time that is not a time, a negative or oversized attempt or
//! generation, text in an integer column, an unknown kind), are written with
//! raw SQL and read back. The read never panics; rows that are whole come
//! back exactly as written, in `seq` order; a journal with a damaged row is
//! refused with a typed error that names the run (a `Corruption`) or the
//! column (a decode error), never skipped.
//!
//! `CAIRN_FUZZ_CASES=N` sets the number of journals per backend (default
//! 150); `CAIRN_FUZZ_SEED=N` another seed.

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{json, Value};

use cairn_checkpoint::Error;
use cairn_core::{JournalKind, RunId, StepIdx};
use cairn_testkit::{both, Kind, TestDb};

use crate::{fresh, new_run, store};

both!(damaged_journal_rows_are_refused_by_name_and_whole_ones_read_back);

/// splitmix64: a seeded generator small enough to keep here.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

const KINDS: &[JournalKind] = &JournalKind::ALL;

/// A payload any backend stores as it is.
fn payload(rng: &mut Rng, depth: u32) -> Value {
    let texts = ["", "ok", "é😀", "a \"quoted\" \\ line\nbreak", "\u{7f}\t"];
    match rng.below(if depth > 2 { 4 } else { 6 }) {
        0 => Value::Null,
        1 => json!(rng.chance(50)),
        2 => json!(rng.next() as i64),
        3 => json!(rng.pick(&texts)),
        4 => Value::Array((0..rng.below(4)).map(|_| payload(rng, depth + 1)).collect()),
        _ => Value::Object(
            (0..rng.below(4))
                .map(|i| (format!("k{i}"), payload(rng, depth + 1)))
                .collect(),
        ),
    }
}

/// A valid time, at whole milliseconds (both backends keep those exactly).
fn time(rng: &mut Rng) -> DateTime<Utc> {
    let ms = (rng.next() % 4_102_444_800_000) as i64; // 1970 .. 2100
    Utc.timestamp_millis_opt(ms).single().expect("in range")
}

/// What is wrong with a row, if anything.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Damage {
    None,
    /// Text that is not JSON (SQLite keeps payloads as text).
    PayloadNotJson(&'static str),
    /// JSON a JSON column accepts but serde_json does not decode.
    PayloadTooDeep,
    /// A time that is not a time (SQLite keeps times as text).
    TimeNotATime(&'static str),
    AttemptNegative,
    AttemptTooBig,
    GenerationNegative,
    /// Text in an integer column (SQLite keeps it as text).
    AttemptText,
    UnknownKind(&'static str),
}

impl Damage {
    fn pick(rng: &mut Rng, kind: Kind) -> Damage {
        if !rng.chance(25) {
            return Damage::None;
        }
        let common = [
            Damage::AttemptNegative,
            Damage::GenerationNegative,
            Damage::UnknownKind(rng.pick(&["assistant", "TOOL_CALL", "", "turn_end "])),
            Damage::PayloadTooDeep,
        ];
        let sqlite_only = [
            Damage::PayloadNotJson(rng.pick(&["{", "", "[1,", "nope", "\"open", "{\"a\":1}x"])),
            Damage::TimeNotATime(rng.pick(&[
                "yesterday",
                "",
                "2024-02-30T00:00:00Z",
                "2024-01-01T25:00:00Z",
                "1700000000",
            ])),
            Damage::AttemptTooBig,
            Damage::AttemptText,
        ];
        match kind {
            Kind::Postgres => rng.pick(&common),
            Kind::Sqlite => rng.pick(&[&common[..], &sqlite_only[..]].concat()),
        }
    }
}

/// One row as written, and what it should decode to.
#[derive(Debug)]
struct Row {
    seq: i64,
    attempt: i64,
    generation: i64,
    kind: JournalKind,
    payload: Value,
    created_at: DateTime<Utc>,
    damage: Damage,
}

fn sql_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl Row {
    fn insert(&self, run: RunId, kind: Kind) -> String {
        let deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
        let mut attempt = self.attempt.to_string();
        let mut generation = self.generation.to_string();
        let mut kind_text = sql_text(self.kind.as_str());
        let mut payload = sql_text(&self.payload.to_string());
        let mut created = sql_text(
            &self
                .created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        );
        match self.damage {
            Damage::None => {}
            Damage::PayloadNotJson(t) => payload = sql_text(t),
            Damage::PayloadTooDeep => payload = sql_text(&deep),
            Damage::TimeNotATime(t) => created = sql_text(t),
            Damage::AttemptNegative => attempt = "-1".into(),
            Damage::AttemptTooBig => attempt = (1i64 << 32).to_string(),
            Damage::GenerationNegative => generation = "-2".into(),
            Damage::AttemptText => attempt = "'one'".into(),
            Damage::UnknownKind(k) => kind_text = sql_text(k),
        }
        let (payload, created) = match kind {
            Kind::Sqlite => (payload, created),
            Kind::Postgres => (
                format!("{payload}::jsonb"),
                format!("{created}::timestamptz"),
            ),
        };
        format!(
            "INSERT INTO journal (run_id, step_idx, seq, attempt, generation, kind, payload, created_at) \
             VALUES ('{run}', 0, {seq}, {attempt}, {generation}, {kind_text}, {payload}, {created});\n",
            seq = self.seq,
        )
    }
}

/// Columns of the journal table, one of which a decode error must name.
const COLUMNS: &[&str] = &[
    "seq",
    "attempt",
    "generation",
    "kind",
    "payload",
    "created_at",
];

async fn damaged_journal_rows_are_refused_by_name_and_whole_ones_read_back(kind: Kind) {
    let (db, store) = fresh(kind).await;
    let run = store.submit(new_run(1, None)).await.unwrap().run.id;
    // Damage needs a way past the kind check (the decoder must still cope).
    match kind {
        Kind::Sqlite => {}
        Kind::Postgres => {
            db.exec("ALTER TABLE journal DROP CONSTRAINT IF EXISTS journal_kind_check")
                .await
        }
    }
    let seed = env_u64("CAIRN_FUZZ_SEED").unwrap_or(0x0004_a11e);
    let cases = env_u64("CAIRN_FUZZ_CASES").unwrap_or(150);
    let mut rng = Rng(seed ^ kind as u64);
    let (mut whole, mut refused) = (0, 0);
    for case in 0..cases {
        let n = rng.below(6);
        let mut seqs: Vec<i64> = (1..=n as i64).collect();
        // Written in any order; read back by seq.
        for i in (1..seqs.len()).rev() {
            let j = rng.below(i + 1);
            seqs.swap(i, j);
        }
        let rows: Vec<Row> = seqs
            .iter()
            .map(|&seq| Row {
                seq,
                attempt: 1 + rng.below(4) as i64,
                generation: rng.below(3) as i64,
                kind: rng.pick(KINDS),
                payload: payload(&mut rng, 0),
                created_at: time(&mut rng),
                damage: Damage::pick(&mut rng, kind),
            })
            .collect();
        let mut sql = match kind {
            Kind::Sqlite => "PRAGMA ignore_check_constraints = ON;\n".to_owned(),
            Kind::Postgres => String::new(),
        };
        sql.push_str("DELETE FROM journal;\n");
        for r in &rows {
            sql.push_str(&r.insert(run, kind));
        }
        db.exec(&sql).await;
        let what = format!("case {case} (seed {seed}): {rows:#?}");

        let got = store.journal(run, StepIdx(0), None).await;
        let damaged: Vec<&Row> = rows.iter().filter(|r| r.damage != Damage::None).collect();
        if damaged.is_empty() {
            whole += 1;
            let got = got.unwrap_or_else(|e| panic!("a whole journal is refused: {e}\n{what}"));
            let mut want: Vec<&Row> = rows.iter().collect();
            want.sort_by_key(|r| r.seq);
            assert_eq!(got.len(), want.len(), "{what}");
            for (g, w) in got.iter().zip(want) {
                assert_eq!(g.seq, w.seq, "{what}");
                assert_eq!(i64::from(g.attempt.0), w.attempt, "{what}");
                assert_eq!(i64::from(g.generation), w.generation, "{what}");
                assert_eq!(g.kind, w.kind, "{what}");
                assert_eq!(g.payload, w.payload, "{what}");
                assert_eq!(g.created_at, w.created_at, "{what}");
            }
            // One generation reads only its own items.
            let g1 = store.journal(run, StepIdx(0), Some(1)).await.unwrap();
            assert!(g1.iter().all(|e| e.generation == 1), "{what}");
            assert_eq!(
                g1.len(),
                rows.iter().filter(|r| r.generation == 1).count(),
                "{what}"
            );
            continue;
        }
        refused += 1;
        match got {
            Ok(items) => panic!("a damaged journal was read as {items:#?}\n{what}"),
            Err(Error::Corruption(c)) => {
                assert_eq!(c.run, run, "{what}");
                let message = Error::Corruption(c).to_string();
                assert!(message.contains(&run.to_string()), "{message}\n{what}");
                assert!(message.contains("journal"), "{message}\n{what}");
            }
            Err(e @ (Error::Database(_) | Error::Db { .. })) => {
                let message = e.to_string();
                assert!(
                    COLUMNS
                        .iter()
                        .any(|c| message.contains(&format!("\"{c}\""))),
                    "a decode error that names no column: {message}\n{what}"
                );
            }
            Err(other) => panic!("an unexpected kind of refusal: {other:?}\n{what}"),
        }
    }
    println!(
        "journal fuzz ({kind:?}): {whole} whole journals read back, {refused} damaged ones refused"
    );
    assert!(whole > 0 && refused > 0, "{whole} / {refused}");
}

/// Found by this fuzz: PostgreSQL's `timestamptz` reaches past chrono's
/// range ('infinity', year 294276), and sqlx 0.8's chrono decoder adds the
/// microseconds with a panicking `+`, so reading such a row panics the
/// reader instead of returning an error. `Row::time` now decodes the raw
/// microseconds and refuses such a time as a `Corruption`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_time_past_chronos_range_is_refused_not_a_panic() {
    let db = TestDb::of(Kind::Postgres).await;
    let store = store(&db).await;
    let run = store.submit(new_run(1, None)).await.unwrap().run.id;
    for time in ["infinity", "294276-12-31 23:59:59+00"] {
        db.exec(&format!(
            "DELETE FROM journal; INSERT INTO journal (run_id, step_idx, seq, attempt, generation, kind, payload, created_at) \
             VALUES ('{run}', 0, 1, 1, 0, 'turn_end', '{{}}', '{time}')"
        ))
        .await;
        let read = tokio::spawn({
            let store = store.clone();
            async move { store.journal(run, StepIdx(0), None).await.map(|_| ()) }
        })
        .await;
        match read {
            Err(join) => panic!("reading a journal time of {time} panicked: {join}"),
            Ok(Ok(())) => panic!("a journal time of {time} was read as a time"),
            Ok(Err(e)) => assert!(
                e.to_string().contains("created_at") || e.to_string().contains(&run.to_string()),
                "{e}"
            ),
        }
    }
}
