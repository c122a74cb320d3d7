# Cairn's developer front door. CI (.ci/run) runs `lint` and `test`.
# Install just with `pip install rust-just` if it is missing.

# Run the whole test suite (SQLite and PostgreSQL).
test:
    cargo test --workspace

# Formatting and clippy, as CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# The crash-and-resume demo on embedded SQLite.
demo:
    cargo run --release -p cairn-cli -- demo

# The benchmark (SQLite and PostgreSQL).
bench:
    cargo run --release -p cairn-bench
