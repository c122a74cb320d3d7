# Cairn's developer front door. CI (.ci/run) runs `lint` and `test`.
# Install just with `pip install rust-just` if it is missing.

# Run the whole test suite (SQLite and PostgreSQL).
test:
    cargo test --workspace

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

# The OpenAPI document against a real `cairn serve` (schemathesis, 60 s).
api-fuzz:
    scripts/api-fuzz
