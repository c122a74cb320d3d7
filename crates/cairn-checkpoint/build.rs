//! Re-embed the migrations whenever they change.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
