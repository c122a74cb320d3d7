//! `--permits`: what a provider key's admission adds to a model call,
//! against the step commit it sits beside. Interleaved in rounds on one
//! store: a run's step commits (`LeaseStore::commit_step`, as `Engine::run`
//! makes them), a model call's admission on a key without limits (one
//! read: its pause), a permit on a limited key (`admit` then `release`:
//! two write transactions, the key's row locked in the first), and the
//! floor of any permit shared by processes through the database: one
//! durable write of one row, by hand on the store's pool (a counter
//! taken; its release folded into a write the call makes anyway). Beside
//! them, what a tenant adds to a submit (its claim-order clock's upsert):
//! submits with and without one, taking turns.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use serde_json::json;

use cairn_core::{Admission, KeyAsk, KeyLimits};

use crate::{
    claim_request, direct_run, mean, median, new_run, noop_crew, on_both, round2, us, Target, STEPS,
};

const ROUNDS: usize = 10;
const CALLS: usize = 30;
const FREE: &str = "provider=bench,url=http://127.0.0.1:9/v1,key=FREE";
const LIMITED: &str = "provider=bench,url=http://127.0.0.1:9/v1,key=LIMITED";

struct Numbers {
    commit: Vec<Duration>,
    free: Vec<Duration>,
    permit: Vec<Duration>,
    floor: Vec<Duration>,
    submit: Vec<Duration>,
    submit_tenant: Vec<Duration>,
}

/// One durable single-row write on the key's row, autocommitted: what the
/// cheapest shared permit costs.
async fn floor_write(raw: &crate::Raw) -> Result<Duration> {
    const TAKE: &str = "UPDATE provider_keys SET requests_milli = COALESCE(requests_milli, 0) - 1 \
         WHERE key = ";
    let t = Instant::now();
    match raw {
        crate::Raw::Sqlite(pool) => {
            sqlx::query(&format!("{TAKE}?"))
                .bind(LIMITED)
                .execute(pool)
                .await?;
        }
        crate::Raw::Postgres(pool) => {
            sqlx::query(&format!("{TAKE}$1"))
                .bind(LIMITED)
                .execute(pool)
                .await?;
        }
    }
    Ok(t.elapsed())
}

async fn measure(target: &Target) -> Result<Numbers> {
    // The raw pool is the store's own: closed at the end, not before.
    let (store, raw) = target.open().await?;
    let crew = noop_crew("permit-bench", STEPS, None)?;
    let limits = KeyLimits {
        in_flight: Some(1000),
        rpm: Some(KeyLimits::MAX),
        tpm: Some(KeyLimits::MAX),
        max_pause_ms: None,
    };
    store.set_limits(LIMITED, &limits).await?;
    let run = store.submit(new_run(&crew, json!({}))).await?.run;
    let claimed = store.claim(run.id, &claim_request(false)).await?;
    let ask = |key: &str| KeyAsk {
        key: key.to_owned(),
        run: run.id,
        epoch: claimed.run.lease_epoch,
        tokens: 1000,
        declared: None,
    };
    let mut n = Numbers {
        commit: vec![],
        free: vec![],
        permit: vec![],
        floor: vec![],
        submit: vec![],
        submit_tenant: vec![],
    };
    let tenant = cairn_core::Tenant::new("bench")?;
    for _ in 0..ROUNDS {
        n.commit.extend(direct_run(&*store, &crew).await?.commits);
        for _ in 0..CALLS {
            let t = Instant::now();
            let got = store.admit(&ask(FREE)).await?;
            n.free.push(t.elapsed());
            ensure!(got == Admission::Go(None), "a key without limits: {got:?}");
        }
        for _ in 0..CALLS {
            let t = Instant::now();
            let Admission::Go(Some(permit)) = store.admit(&ask(LIMITED)).await? else {
                anyhow::bail!("no permit granted on a key with room");
            };
            store.release(&permit, 900).await?;
            n.permit.push(t.elapsed());
        }
        for _ in 0..CALLS {
            n.floor.push(floor_write(&raw).await?);
        }
        for _ in 0..CALLS {
            let t = Instant::now();
            store.submit(new_run(&crew, json!({}))).await?;
            n.submit.push(t.elapsed());
            let tenanted = cairn_checkpoint::NewRun {
                tenant: Some(tenant.clone()),
                ..new_run(&crew, json!({}))
            };
            let t = Instant::now();
            store.submit(tenanted).await?;
            n.submit_tenant.push(t.elapsed());
        }
    }
    raw.close().await;
    Ok(n)
}

pub async fn run(pg_url: &str) -> Result<()> {
    let (sqlite, postgres) = on_both(pg_url, "permits.db", measure).await?;
    println!(
        "{ROUNDS} rounds of {STEPS} step commits, {CALLS} admissions on a key without limits \
         and {CALLS} permits (admit + release) on a limited key; µs mean (median)"
    );
    println!(
        "{:<10} {:>18} {:>18} {:>18} {:>18} {:>12} {:>12} {:>12}",
        "backend",
        "commit_step",
        "admit, no limits",
        "permit",
        "floor (1 write)",
        "free/commit",
        "permit/commit",
        "floor/commit"
    );
    let mut out = serde_json::Map::new();
    for (name, n) in [("sqlite", Some(&sqlite)), ("postgres", postgres.as_ref())] {
        let Some(n) = n else { continue };
        let (c, f, p) = (median(&n.commit), median(&n.free), median(&n.permit));
        let fl = median(&n.floor);
        println!(
            "{name:<10} {:>9.1} ({:>6.1}) {:>9.1} ({:>6.1}) {:>9.1} ({:>6.1}) {:>9.1} ({:>6.1}) \
             {:>11.2}× {:>11.2}× {:>11.2}×",
            us(mean(&n.commit)),
            us(c),
            us(mean(&n.free)),
            us(f),
            us(mean(&n.permit)),
            us(p),
            us(mean(&n.floor)),
            us(fl),
            us(f) / us(c),
            us(p) / us(c),
            us(fl) / us(c),
        );
        out.insert(
            format!("{name}_commit_step_median_us"),
            json!(round2(us(c))),
        );
        out.insert(format!("{name}_admit_free_median_us"), json!(round2(us(f))));
        out.insert(format!("{name}_permit_median_us"), json!(round2(us(p))));
        out.insert(
            format!("{name}_permit_per_commit"),
            json!(round2(us(p) / us(c))),
        );
        out.insert(
            format!("{name}_permit_floor_median_us"),
            json!(round2(us(fl))),
        );
        out.insert(
            format!("{name}_permit_floor_per_commit"),
            json!(round2(us(fl) / us(c))),
        );
        let (s, st) = (median(&n.submit), median(&n.submit_tenant));
        println!(
            "{name:<10} submit {:>7.1} µs, with a tenant {:>7.1} µs (medians): {:>5.2}×",
            us(s),
            us(st),
            us(st) / us(s)
        );
        out.insert(format!("{name}_submit_median_us"), json!(round2(us(s))));
        out.insert(
            format!("{name}_submit_tenant_median_us"),
            json!(round2(us(st))),
        );
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
