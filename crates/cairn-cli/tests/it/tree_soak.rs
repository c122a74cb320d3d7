//! Trees under kills (issue 47's campaigns, docs/reliability.md): parent
//! runs fanning out to children are executed by `cairn worker` processes
//! that are SIGKILLed (by pid) at seeded random moments and restarted, again
//! and again, then left to finish. Three shapes:
//!
//! 1. a `children` step over K items (concurrency 2) and a join template;
//! 2. an `llm` parent whose model (`DelegatingModel`, over the OpenAI wire)
//!    delegates K children, then summarizes their results;
//! 3. the combined run: `cairn serve` with its runner plus three workers,
//!    children that call a model on a provider key limited to 2 calls in
//!    flight (`cairn limits set KEY --in-flight 2`), under a tree budget of
//!    tokens (`cairn submit --budget tokens=N`).
//!
//! The check is independent of the engine's counters where it can be: each
//! child's program appends its run id to a log, so "lost" is a parent that
//! did not succeed with the exact output of an uncrashed run, a key with no
//! succeeded child, or a succeeded child whose program never ran; and
//! "repeated" is a key with two children stored for one attempt, two
//! succeeded children for one key, or a child whose program ran more often
//! than its step's attempts and takeovers explain (once per attempt, plus
//! once per takeover claim its `run_claimed` events record; not the step
//! row's `takeovers`, which a same-attempt restart resets, see
//! docs/reliability.md, "Known findings"). A run
//! that fails `crash_loop` (the cap on takeovers of one attempt) is retried
//! by an operator's `runs retry --enqueue` and counted, not hidden: a
//! retried `children` step keeps the children that succeeded.
//!
//! Sizes: `CAIRN_SOAK_KILLS` (default 8 per database), `CAIRN_SOAK_SEED`,
//! `CAIRN_SOAK_CHILDREN` (K, default 4), `CAIRN_SOAK_IN_FLIGHT` (parents
//! kept unfinished, default 3). `scripts/soak` runs them at size.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cairn::{Engine, RunFilter, RunId};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use crate::support::{agent_sh, crew_toml, env_u64, fan_join_crew, Case, Kind, Rng, Spawned};

both_backends!(
    children_under_worker_kills_lose_and_repeat_nothing,
    delegated_children_under_worker_kills_lose_and_repeat_nothing,
);

/// The campaign's size, from the environment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size {
    pub kills: u64,
    pub seed: u64,
    pub children: usize,
    pub in_flight: usize,
}

impl Size {
    pub(crate) fn from_env() -> Size {
        Size {
            kills: env_u64("CAIRN_SOAK_KILLS").unwrap_or(8),
            seed: env_u64("CAIRN_SOAK_SEED").unwrap_or(0x7a33),
            children: env_u64("CAIRN_SOAK_CHILDREN").map_or(4, |n| n.clamp(1, 500) as usize),
            in_flight: env_u64("CAIRN_SOAK_IN_FLIGHT").map_or(3, |n| n.max(1) as usize),
        }
    }
}

/// The `i`th item or topic: lower-case letters only (the children's
/// programs read them with a `[a-z]*` pattern).
pub(crate) fn word(i: usize) -> String {
    let mut n = i;
    let mut w = String::from("w");
    loop {
        w.push((b'a' + (n % 26) as u8) as char);
        n /= 26;
        if n == 0 {
            return w;
        }
    }
}

/// What a campaign counted.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub kills: u64,
    pub parents: u64,
    pub children: u64,
    pub takeovers: u64,
    pub crash_loops: u64,
    /// Children of one attempt whose step row counts fewer takeovers than
    /// their claims (must be none).
    pub undercounted: u64,
    pub lost: Vec<String>,
    pub repeated: Vec<String>,
}

/// A campaign's database, processes and books.
pub(crate) struct Campaign {
    pub case: Case,
    pub rt: tokio::runtime::Runtime,
    pub engine: Engine,
    pub rng: Rng,
    /// The worker slots: each a live `cairn worker`, restarted after its kill.
    workers: Vec<Spawned>,
    worker_args: Vec<String>,
    /// `cairn submit` arguments of one parent (before `--db`).
    pub submit: Vec<String>,
    pub parents: Vec<String>,
    pub in_flight: usize,
    pub tally: Tally,
    /// Every child's program run, by child run id (from the log).
    pub log: String,
    /// Count a child's runs as its `model_call_sent` events instead (its
    /// step is a model call, not a program).
    pub runs_are_calls: bool,
}

impl Campaign {
    /// A campaign on `case`'s database, opened in this process for its reads.
    pub(crate) fn new(case: Case, size: Size, submit: Vec<String>, log: &str) -> Campaign {
        let (rt, engine) = crate::support::in_process(&case);
        Campaign {
            case,
            rt,
            engine,
            rng: Rng(size.seed),
            workers: Vec::new(),
            worker_args: ["--concurrency", "4"]
                .iter()
                .chain(&crate::support::QUICK_LEASE)
                .map(|a| a.to_string())
                .collect(),
            submit,
            parents: Vec::new(),
            in_flight: size.in_flight,
            tally: Tally::default(),
            log: log.to_owned(),
            runs_are_calls: false,
        }
    }

    /// Every run, or the children of `parent`, as JSON (the runs and the
    /// shape of `runs list [--parent P] --json`).
    pub(crate) fn list(&self, parent: Option<&str>) -> Vec<Value> {
        let filter = RunFilter {
            parent: parent.map(|p| p.parse::<RunId>().expect("a run id")),
            limit: Some(100_000),
            ..RunFilter::default()
        };
        let runs = self
            .rt
            .block_on(self.engine.list(&filter))
            .expect("list runs");
        runs.iter()
            .map(|r| serde_json::to_value(r).expect("a run as JSON"))
            .collect()
    }

    /// `runs show ID --json`'s shape, read in this process.
    pub(crate) fn show(&self, id: &str) -> Value {
        let id: RunId = id.parse().expect("a run id");
        let view = self.rt.block_on(self.engine.show(id)).expect("show a run");
        serde_json::to_value(view).expect("a run view as JSON")
    }

    /// The events of run `id` of kind `kind`.
    pub(crate) fn events_of(&self, id: &str, kind: &str) -> Vec<Value> {
        let id: RunId = id.parse().expect("a run id");
        let events = self.rt.block_on(self.engine.events(id)).expect("events");
        events
            .iter()
            .map(|e| serde_json::to_value(e).expect("an event as JSON"))
            .filter(|e| e["kind"] == kind)
            .collect()
    }

    fn status(&self, id: &str) -> String {
        self.show(id)["status"].as_str().unwrap_or("").to_owned()
    }

    /// Parents still to be worked on (not ended, not stopped for an operator).
    fn unfinished(&self) -> usize {
        self.parents
            .iter()
            .filter(|p| matches!(self.status(p).as_str(), "queued" | "running" | "waiting"))
            .count()
    }

    /// Submits parents until `in_flight` are unfinished.
    pub(crate) fn top_up(&mut self) {
        let mut missing = self.in_flight.saturating_sub(self.unfinished());
        while missing > 0 {
            let args: Vec<&str> = self.submit.iter().map(String::as_str).collect();
            let id = self
                .case
                .cairn(&args)
                .expect_code(0)
                .stdout
                .trim()
                .to_owned();
            self.parents.push(id);
            missing -= 1;
        }
    }

    /// Starts `n` worker slots.
    pub(crate) fn start_workers(&mut self, n: usize) {
        for slot in 0..n {
            let w = self.spawn_worker(slot);
            self.workers.push(w);
        }
    }

    fn spawn_worker(&self, slot: usize) -> Spawned {
        let mut cmd = self.case.command();
        cmd.arg("worker")
            .args(&self.worker_args)
            .args(["--db", self.case.url()])
            .env("CAIRN_LOG", "warn")
            .stdout(
                std::fs::File::create(self.case.path(&format!("worker-{slot}.out")))
                    .expect("a file"),
            )
            .stderr(
                std::fs::File::create(self.case.path(&format!("worker-{slot}.err")))
                    .expect("a file"),
            );
        Spawned(cmd.spawn().expect("spawn cairn worker"))
    }

    /// Panics (with its stderr) if a worker ended on its own: workers end
    /// only when this campaign kills them.
    fn all_alive(&mut self) {
        for (slot, w) in self.workers.iter_mut().enumerate() {
            if let Some(status) = w.0.try_wait().expect("try_wait") {
                let err = std::fs::read_to_string(self.case.path(&format!("worker-{slot}.err")));
                panic!(
                    "worker {slot} ended on its own ({status}):\n{}",
                    err.unwrap_or_default()
                );
            }
        }
    }

    /// One kill: a random worker after a random delay (up to `max_ms`),
    /// SIGKILLed by its pid, reaped and restarted; then crash loops retried
    /// and the parents topped up.
    /// Tops the runs up, starts two workers, kills one every 1.5 s at the
    /// most until `kills`, then drains: when the kills began.
    fn kill_and_drain(&mut self, kills: u64) -> Instant {
        self.top_up();
        self.start_workers(2);
        let started = Instant::now();
        while self.tally.kills < kills {
            self.kill_round(1500);
        }
        self.drain(|_, _| {});
        started
    }

    pub(crate) fn kill_round(&mut self, max_ms: u64) {
        let slot = self.rng.below(self.workers.len() as u64) as usize;
        let delay = Duration::from_millis(100 + self.rng.below(max_ms));
        let deadline = Instant::now() + delay;
        while Instant::now() < deadline {
            self.all_alive();
            std::thread::sleep(Duration::from_millis(20));
        }
        self.all_alive();
        let pid = Pid::from_raw(self.workers[slot].0.id() as i32);
        kill(pid, Signal::SIGKILL).expect("SIGKILL a worker");
        self.workers[slot].0.wait().expect("reap the killed worker");
        self.tally.kills += 1;
        self.workers[slot] = self.spawn_worker(slot);
        self.retry_crash_loops();
        self.top_up();
    }

    /// A parent failed by a crash loop (its own, or a child's that failed
    /// its `all_ok` join) is retried by an operator, and counted.
    pub(crate) fn retry_crash_loops(&mut self) {
        for parent in self.parents.clone() {
            let run = self.show(&parent);
            if run["status"] != "failed" {
                continue;
            }
            let own = run["error"]["kind"] == "crash_loop";
            let child = self
                .list(Some(&parent))
                .iter()
                .any(|c| c["status"] == "failed" && c["error"]["kind"] == "crash_loop");
            if own || (child && run["error"]["kind"] == "children") {
                self.tally.crash_loops += 1;
                self.case
                    .cairn(&["runs", "retry", &parent, "--enqueue", "--reason", "soak"])
                    .expect_code(0);
            }
        }
    }

    /// Lets the workers (no more kills) finish every parent; `operator`
    /// looks at each parent that waits or stopped (for a budget, say).
    pub(crate) fn drain(&mut self, mut operator: impl FnMut(&mut Campaign, &str)) {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            self.all_alive();
            self.retry_crash_loops();
            let mut open = 0;
            for parent in self.parents.clone() {
                match self.status(&parent).as_str() {
                    "queued" | "running" => open += 1,
                    "waiting" | "interrupted" => {
                        operator(self, &parent);
                        open += 1;
                    }
                    _ => {}
                }
            }
            if open == 0 {
                return;
            }
            if Instant::now() > deadline {
                let stuck = Value::Array(
                    self.parents
                        .iter()
                        .map(|p| self.show(p))
                        .filter(|r| !matches!(r["status"].as_str(), Some("succeeded" | "failed")))
                        .map(|r| {
                            let id = r["id"].as_str().unwrap_or_default();
                            let children: Vec<Value> = self
                                .list(Some(id))
                                .iter()
                                .map(|c| json!([c["id"], c["status"], c["error"], c["not_before"]]))
                                .collect();
                            json!({"parent": id, "status": r["status"], "children": children})
                        })
                        .collect(),
                );
                panic!("{open} parents never finished: {stuck:#}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How often the program of child `id` ran (lines of the log naming
    /// it), or its model calls were sent.
    fn ran(&self, id: &str) -> usize {
        if self.runs_are_calls {
            return self.events_of(id, "model_call_sent").len();
        }
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(id))
            .count()
    }

    /// The children of `parent`: each key has one succeeded child, and one
    /// child per attempt; each child's program ran once, plus at most once
    /// per takeover of its step. Returns the children.
    pub(crate) fn check_children(&mut self, parent: &str, keys: usize) -> Vec<Value> {
        let children = self.list(Some(parent));
        let mut succeeded: HashMap<String, usize> = HashMap::new();
        let mut stored: HashMap<(u64, String), usize> = HashMap::new();
        for c in &children {
            let id = c["id"].as_str().unwrap_or_default().to_owned();
            let key = c["child"]["key"].as_str().unwrap_or_default().to_owned();
            let attempt = c["child"]["attempt"].as_u64().unwrap_or(0);
            *stored.entry((attempt, key.clone())).or_default() += 1;
            let view = self.show(&id);
            // Takeovers from the claims the events record; a child of one
            // attempt must count them all on its step row too (a restart of
            // the same attempt once cleared the row's count).
            let took = self.takeover_claims(&id, Some(0));
            self.tally.takeovers += self.takeover_claims(&id, None);
            let attempts = view["steps"][0]["attempt"].as_u64().unwrap_or(1);
            if attempts == 1 && view["steps"][0]["takeovers"].as_u64().unwrap_or(0) < took {
                self.tally.undercounted += 1;
            }
            self.tally.children += 1;
            let ran = self.ran(&id) as u64;
            if c["status"] == "succeeded" {
                *succeeded.entry(key.clone()).or_default() += 1;
                if ran == 0 {
                    self.tally
                        .lost
                        .push(format!("child {id} ({key}) succeeded unrun"));
                }
            } else if !(c["error"]["kind"] == "crash_loop" || c["status"] == "cancelled") {
                self.tally
                    .lost
                    .push(format!("child {id} ({key}) ended {}", c["status"]));
            }
            if ran > attempts + took {
                let events: Vec<Value> = self
                    .rt
                    .block_on(self.engine.events(id.parse().expect("a run id")))
                    .expect("events")
                    .iter()
                    .map(|e| serde_json::to_value(e).expect("an event as JSON"))
                    .map(|e| json!([e["kind"], e["data"]]))
                    .collect();
                self.tally.repeated.push(format!(
                    "child {id} ({key}) ran {ran} times in {attempts} attempts and {took} takeovers: {:#}",
                    json!({"steps": view["steps"], "events": events})
                ));
            }
        }
        for ((attempt, key), n) in stored {
            if n > 1 {
                self.tally.repeated.push(format!(
                    "parent {parent}: {n} children of key {key} at attempt {attempt}"
                ));
            }
        }
        if succeeded.len() != keys {
            self.tally.lost.push(format!(
                "parent {parent}: {} of {keys} keys have a succeeded child",
                succeeded.len()
            ));
        }
        for (key, n) in succeeded {
            if n > 1 {
                self.tally
                    .repeated
                    .push(format!("parent {parent}: key {key} succeeded {n} times"));
            }
        }
        children
    }

    /// The takeovers of run `id` (of its step `idx`, or of any step): its
    /// `run_claimed` events that took over a step in flight.
    pub(crate) fn takeover_claims(&self, id: &str, idx: Option<u64>) -> u64 {
        self.events_of(id, "run_claimed")
            .iter()
            .filter(|e| e["data"]["took_over_step"] == true)
            .filter(|e| idx.is_none_or(|i| e["data"]["cursor"] == i))
            .count() as u64
    }

    /// Takeovers of a parent's own steps, into the tally.
    pub(crate) fn count_parent_takeovers(&mut self, parent: &str) {
        self.tally.takeovers += self.takeover_claims(parent, None);
    }

    /// A parent at the end of a campaign: its takeovers counted, and its
    /// run if it succeeded (counted), else recorded as lost.
    pub(crate) fn finished_parent(&mut self, parent: &str) -> Option<Value> {
        let run = self.show(parent);
        self.count_parent_takeovers(parent);
        if run["status"] != "succeeded" {
            self.tally
                .lost
                .push(format!("parent {parent} ended {}", run["status"]));
            return None;
        }
        self.tally.parents += 1;
        Some(run)
    }

    /// A parent whose join must read `expected`, as its uncrashed twin's.
    pub(crate) fn check_join(&mut self, parent: &str, run: &Value, expected: &str) {
        if run["steps"][1]["output"] != Value::String(expected.to_owned()) {
            self.tally.lost.push(format!(
                "parent {parent} joined {}",
                run["steps"][1]["output"]
            ));
        }
    }

    /// The summary line `scripts/soak` keeps, then the verdict.
    pub(crate) fn report(&self, what: &str, kind: Kind, size: Size, more: &str, started: Instant) {
        let t = &self.tally;
        println!(
            "soak {what} {kind:?} seed {}: {} kills, {} parents finished of {}, {} children stored, \
             {} takeovers ({} children's step rows count fewer), {} crash-loop failures (retried), \
             {}{more}, {:.0?}",
            size.seed,
            t.kills,
            t.parents,
            self.parents.len(),
            t.children,
            t.takeovers,
            t.undercounted,
            t.crash_loops,
            crate::support::losses(&t.lost, &t.repeated),
            started.elapsed()
        );
        crate::support::assert_no_losses(&t.lost, &t.repeated);
        assert_eq!(
            t.undercounted, 0,
            "step rows counting fewer takeovers than their claims"
        );
        assert!(t.kills >= size.kills && t.parents > 0);
    }
}

/// The child crew `shout` (appends `RUN_ID ITEM` to `children.log`, works a
/// little so kills land inside, answers the item in capitals) and the
/// parent: a `children` step over `input.items` (concurrency 2, `all_ok`)
/// and a template joining the outputs.
fn fan_crews(case: &Case) -> String {
    let log = case.path("children.log").display().to_string();
    let child = agent_sh(
        "shout",
        &format!(
            r#"item=$(grep -o '"item":"[a-z]*"' | cut -d'"' -f4); echo "$CAIRN_RUN_ID $item" >> {log}; sleep 0.2; echo $item | tr a-z A-Z"#
        ),
    );
    case.write("child.toml", &crew_toml("shout", &[child]));
    let crew = fan_join_crew(
        case,
        "concurrency = 2\njoin = \"all_ok\"\n",
        "{% for c in outputs.fan %}{{ c.output }} {% endfor %}",
    );
    crew.display().to_string()
}

fn children_under_worker_kills_lose_and_repeat_nothing(kind: Kind) {
    let _load = crate::support::loads_the_machine();
    let size = Size::from_env();
    let case = Case::new(kind);
    let crew = fan_crews(&case);
    let items: Vec<String> = (0..size.children).map(word).collect();
    let expected: String = items
        .iter()
        .map(|i| format!("{} ", i.to_uppercase()))
        .collect();
    let input = json!({ "items": items }).to_string();
    let log = case.path("children.log").display().to_string();
    let submit = ["submit", &crew, "--input", &input]
        .map(str::to_owned)
        .to_vec();
    let mut c = Campaign::new(case, size, submit, &log);
    let started = c.kill_and_drain(size.kills);
    for parent in c.parents.clone() {
        let Some(run) = c.finished_parent(&parent) else {
            continue;
        };
        c.check_join(&parent, &run, &expected);
        c.check_children(&parent, size.children);
    }
    c.report("children", kind, size, "", started);
}

/// The child crew `researcher` (appends `RUN_ID TOPIC` to `children.log`,
/// works a little, answers `{"found": TOPIC}` in capitals) and the parent:
/// an `llm` lead on `model` that may delegate to it, then a template.
fn delegate_crews(case: &Case, model: &cairn_testkit::DelegatingModel) -> String {
    let log = case.path("children.log").display().to_string();
    let script = format!(
        r#"t=$(grep -o '"topic":"[a-z]*"' | cut -d'"' -f4); echo "$CAIRN_RUN_ID $t" >> {log}; sleep 0.2; echo "{{\"found\": \"$(echo $t | tr a-z A-Z)\"}}""#
    );
    crate::support::delegate_crews(case, &model.base_url, &script)
}

/// A parent's answer with every child's run id in it replaced by `CHILD`
/// (the results quote them; they differ from tree to tree).
fn answer(run: &Value, children: &[Value]) -> String {
    let mut text = run["steps"][1]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for child in children {
        if let Some(id) = child["id"].as_str() {
            text = text.replace(id, "CHILD");
        }
    }
    text
}

fn delegated_children_under_worker_kills_lose_and_repeat_nothing(kind: Kind) {
    let _load = crate::support::loads_the_machine();
    let size = Size::from_env();
    let tasks: Vec<Value> = (0..size.children)
        .map(|i| json!({ "topic": word(i) }))
        .collect();
    let model =
        cairn_testkit::DelegatingModel::start("researcher", &tasks).expect("the model server");
    let case = Case::new(kind);
    let crew = delegate_crews(&case, &model);
    // An uncrashed twin on the same database: the answer every parent gives.
    let twin = case.cairn(&["run", &crew, "--input", "{}", "--json"]);
    assert_eq!(twin.code(), Some(0), "{}{}", twin.stdout, twin.stderr);
    let twin_id = twin.json()["id"]
        .as_str()
        .expect("the twin's id")
        .to_owned();
    let log = case.path("children.log").display().to_string();
    let submit = ["submit", &crew, "--input", "{}"]
        .map(str::to_owned)
        .to_vec();
    let mut c = Campaign::new(case, size, submit, &log);
    let expected = answer(&c.show(&twin_id), &c.list(Some(&twin_id)));
    assert!(
        expected.starts_with(&format!("done: Summary of {}:", size.children))
            && tasks.iter().all(|t| {
                let topic = t["topic"].as_str().unwrap_or_default().to_uppercase();
                expected.contains(&topic)
            }),
        "the twin's lead read every child's result: {expected}"
    );
    c.parents.push(twin_id);
    let started = c.kill_and_drain(size.kills);
    for parent in c.parents.clone() {
        let Some(run) = c.finished_parent(&parent) else {
            continue;
        };
        let children = c.check_children(&parent, size.children);
        let said = answer(&run, &children);
        if said != expected {
            c.tally
                .lost
                .push(format!("parent {parent} answered {said}"));
        }
        let mut topics: Vec<String> = children
            .iter()
            .filter(|ch| ch["status"] == "succeeded")
            .filter_map(|ch| ch["input"]["topic"].as_str().map(str::to_owned))
            .collect();
        topics.sort_unstable();
        let mut want: Vec<String> = (0..size.children).map(word).collect();
        want.sort_unstable();
        if topics != want {
            c.tally.lost.push(format!(
                "parent {parent}: its children's topics are {topics:?}"
            ));
        }
    }
    let requests = model.requests().len();
    c.report(
        "delegate",
        kind,
        size,
        &format!(", {requests} model requests"),
        started,
    );
}
