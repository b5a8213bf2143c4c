//! `sqlx::migrate!` embeds migrations at compile time but does not watch for new files.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations/identity");
    println!("cargo:rerun-if-changed=../../migrations/identity/sqlite");
    println!("cargo:rerun-if-changed=../../migrations/identity/postgres");
}
