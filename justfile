# Cairn's developer front door, and CI's: .ci/run runs `lint`, `deny` and
# `test`, and beside `test` the scripts of `api-fuzz 30`,
# `openapi-client-check` and `clients`. Install just with
# `pip install rust-just` (CI: the pinned wheel of .ci/just.txt).
# The tiers are in docs/dev/testing.md.

# The quick loop (docs/dev/testing.md, "Tiers"): every test but the slow
# group (.config/nextest.toml names it by convention: PostgreSQL halves,
# the CLI's process tests, kills, restarts, clusters, browsers, soaks), so
# the adapters, transcript rules, tidy rules and bad-input tests are in.
# Needs cargo-nextest (`cargo install cargo-nextest --locked`).
test-fast:
    cargo nextest run --workspace --profile fast

# Run the whole test suite (SQLite and PostgreSQL). The last line says
# what was skipped and why (a tool this machine lacks), or that nothing was.
test:
    scripts/test

# The fault campaigns at size (docs/reliability.md, "The fault campaign"):
# each database's campaign, one after the other, for SECS seconds (20
# minutes by default) under SEED (a new one by default; the seed is
# printed, and with the commit it reproduces a failure). CI runs them at 45
# and 18 seconds. `just jepsen 1200 '' campaign::` adds the two failover
# campaigns.
jepsen SECS="1200" SEED="" WHICH="campaign::a_campaign_of":
    CAIRN_CAMPAIGN_SECS={{SECS}} CAIRN_CAMPAIGN_SEED={{SEED}} cargo nextest run -p cairn-cli --test it -E 'test(/{{WHICH}}/)' --no-capture

# Formatting and clippy, as CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Supply-chain checks: advisories, licences, duplicates, sources (deny.toml).
deny:
    scripts/deny

# The crash-and-resume demo on embedded SQLite.
demo:
    cargo run --release -p cairn-cli -- demo

# The benchmark (SQLite and PostgreSQL).
bench:
    cargo run --release -p cairn-bench

# The kill-and-resume soak at size: 1,000 SIGKILLs on SQLite, 500 on
# PostgreSQL (CI runs 20 of each); prints kills, runs finished, lost,
# repeated and crash-loop failures (docs/reliability.md).
soak sqlite="1000" postgres="500":
    scripts/soak {{sqlite}} {{postgres}}

# The crew parser and journal decoder fuzzers with more cases than CI's
# (CI: 128 / 1,000 / 500 crews, 150 journals per database).
fuzz cases="5000":
    CAIRN_FUZZ_CASES={{cases}} cargo test --workspace --test fuzz_crew
    CAIRN_FUZZ_CASES={{cases}} cargo test --workspace --test it fuzz_journal

# A client generated from docs/openapi.json answers a real run's waits.
openapi-client-check:
    scripts/openapi-client-check

# The first-party clients (clients/*) against a real `cairn serve`.
clients:
    cargo build -q -p cairn-cli
    clients/typescript/check
    clients/python/check

# `just api-fuzz 30` is CI's run (default: CAIRN_API_FUZZ_SECONDS, or 60).
# The OpenAPI document against a real `cairn serve` (schemathesis).
api-fuzz seconds=env_var_or_default("CAIRN_API_FUZZ_SECONDS", "60"):
    CAIRN_API_FUZZ_SECONDS={{seconds}} scripts/api-fuzz
